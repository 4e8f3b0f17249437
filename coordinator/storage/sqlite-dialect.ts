/**
 * Kysely's SQLite dialect with one change: transactions start with `BEGIN IMMEDIATE`, taking the
 * database's write lock at once rather than at their first write.
 *
 * Why: admission reads (open sessions, the token's count) then writes, and must be atomic even
 * when several coordinator processes share one SQLite file (`arclight coordinator --workers N`).
 * With Kysely's plain (deferred) `BEGIN`, two processes could both read under WAL snapshots and the
 * second to write would fail with SQLITE_BUSY_SNAPSHOT, which no busy timeout retries. Immediate
 * transactions queue on the lock (up to `busy_timeout`) and then read the latest commit, so they
 * serialize like PostgreSQL's row lock does. Readers outside transactions are never blocked (WAL).
 */

import { CompiledQuery, SqliteDialect, SqliteDriver, type DatabaseConnection, type Driver, type SqliteDialectConfig } from 'kysely';

class WriteLockingSqliteDriver extends SqliteDriver {
  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('begin immediate'));
  }
}

export class WriteLockingSqliteDialect extends SqliteDialect {
  readonly #config: SqliteDialectConfig;

  constructor(config: SqliteDialectConfig) {
    super(config);
    this.#config = config;
  }

  override createDriver(): Driver {
    return new WriteLockingSqliteDriver(this.#config);
  }
}
