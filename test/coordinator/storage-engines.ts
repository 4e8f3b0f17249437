/**
 * The storage engines every coordinator test runs on: SQLite (a temp file) and a real PostgreSQL
 * server (test/support/postgres.ts, one per test process, a fresh database per call).
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { sharedPostgres } from '../support/postgres.ts';

export type Engine = 'sqlite' | 'postgres';
export const ENGINES: readonly Engine[] = ['sqlite', 'postgres'];

/**
 * The SQLite databases' temp folders the test file made, removed after its last test (the hook
 * is registered on the file that imports this module; every test file gets its own module).
 */
const sqliteFolders: string[] = [];
afterAll(() => {
  for (const folder of sqliteFolders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

/** A database URL for a fresh, empty database on `engine`. */
export async function freshDatabase(engine: Engine): Promise<string> {
  if (engine === 'sqlite') {
    // Removed after the file, not after the test: a test may hand the file to a coordinator it
    // stops in its own afterAll. (Each run of the suite had left ~600 of these in /tmp.)
    const folder = mkdtempSync(join(tmpdir(), 'arclight-coordinator-'));
    sqliteFolders.push(folder);
    return join(folder, 'coordinator.db');
  }
  return (await sharedPostgres()).createDatabase('coordinator');
}
