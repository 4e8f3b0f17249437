/**
 * Opens the coordinator's database from a URL: `postgres://…` / `postgresql://…` for PostgreSQL
 * (replicas share it), anything else is a SQLite file path (`:memory:` for a throwaway one).
 * Both go through Kysely with one schema, so every query is written once.
 */

import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { migrateToLatest } from './migrations.ts';
import { WriteLockingSqliteDialect } from './sqlite-dialect.ts';
import { withStatementCache } from './statement-cache.ts';
import type { CoordinatorDatabase } from './schema.ts';

export type DatabaseEngine = 'sqlite' | 'postgres';

export interface CoordinatorStorage {
  readonly db: Kysely<CoordinatorDatabase>;
  readonly engine: DatabaseEngine;
  close(): Promise<void>;
}

/** PostgreSQL's int8 (bigint, `count(*)`) as a JS number: our values (ms times, counts) fit in 2^53. */
const INT8_OID = 20;
const pgTypes = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID ? (value: string) => Number(value) : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};

export function isPostgresUrl(url: string): boolean {
  return /^postgres(ql)?:\/\//i.test(url);
}

/** Opens (creating the SQLite file's folder if needed) and migrates to the latest schema. */
export async function openStorage(
  url: string,
  options: {
    poolSize?: number;
    /** An idle PostgreSQL connection failed (it is replaced). */ onConnectionError?: (error: Error) => void;
  } = {},
): Promise<CoordinatorStorage> {
  let storage: CoordinatorStorage;
  if (isPostgresUrl(url)) {
    const pool = new pg.Pool({ connectionString: url, max: options.poolSize ?? 10, types: pgTypes });
    // An idle pooled connection the server drops (a restart, a failover, an administrator) makes
    // the pool emit 'error'; unheard, that ends the process. The pool discards the connection and
    // opens a new one for the next query; queries meanwhile fail and answer 503/500.
    pool.on('error', (error) => options.onConnectionError?.(error));
    const db = new Kysely<CoordinatorDatabase>({ dialect: new PostgresDialect({ pool }) });
    storage = { db, engine: 'postgres', close: () => db.destroy() };
  } else {
    if (url !== ':memory:') mkdirSync(dirname(url), { recursive: true });
    const file = new SQLite(url);
    // WAL: readers do not block the writer; NORMAL sync is durable across a process crash
    // (only an OS crash can lose the last commits), which is what the ledger needs.
    file.pragma('journal_mode = WAL');
    file.pragma('synchronous = NORMAL');
    file.pragma('foreign_keys = ON');
    file.pragma('busy_timeout = 5000');
    const db = new Kysely<CoordinatorDatabase>({ dialect: new WriteLockingSqliteDialect({ database: withStatementCache(file) }) });
    storage = { db, engine: 'sqlite', close: () => db.destroy() };
  }
  try {
    await migrateToLatest(storage.db as Kysely<unknown>);
  } catch (error) {
    await storage.close();
    throw error;
  }
  return storage;
}
