/**
 * The storage engines every coordinator test runs on: SQLite (a temp file) and a real PostgreSQL
 * server (test/support/postgres.ts, one per test process, a fresh database per call).
 */

import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sharedPostgres } from '../support/postgres.ts';

export type Engine = 'sqlite' | 'postgres';
export const ENGINES: readonly Engine[] = ['sqlite', 'postgres'];

/** A database URL for a fresh, empty database on `engine`. */
export async function freshDatabase(engine: Engine): Promise<string> {
  if (engine === 'sqlite') return join(mkdtempSync(join(tmpdir(), 'arclight-coordinator-')), 'coordinator.db');
  return (await sharedPostgres()).createDatabase('coordinator');
}
