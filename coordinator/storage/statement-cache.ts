/**
 * better-sqlite3 compiles SQL on every `prepare()`, and Kysely prepares once per query: under load
 * that compile was the coordinator's largest single cost on SQLite (a CPU profile of POST /tokens
 * put ~8 % of all time in `prepare`). Our queries are a small fixed set of SQL texts with
 * parameters, so a prepared statement is kept per text and reused.
 *
 * Safe because Kysely runs one query at a time on the one SQLite connection (a mutex) and never
 * leaves a statement mid-iteration for another query; SQLite re-prepares a statement itself
 * when a migration changes the schema under it.
 */

import type Database from 'better-sqlite3';
import type { SqliteDatabase, SqliteStatement } from 'kysely';

/** Distinct SQL texts kept (ours number in the dozens; `IN (…)` lists vary with their length). */
const CAPACITY = 512;

export function withStatementCache(file: Database.Database): SqliteDatabase {
  const statements = new Map<string, SqliteStatement>();
  return {
    close: () => {
      statements.clear();
      file.close();
    },
    prepare(sql: string): SqliteStatement {
      let statement = statements.get(sql);
      if (statement) {
        // Most recently used last, so eviction takes the least recently used.
        statements.delete(sql);
      } else {
        statement = file.prepare(sql) as unknown as SqliteStatement;
        if (statements.size >= CAPACITY) statements.delete(statements.keys().next().value!);
      }
      statements.set(sql, statement);
      return statement;
    },
  };
}
