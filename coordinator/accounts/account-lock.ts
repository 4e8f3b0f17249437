/**
 * The one way code decides something per account one decision at a time: lock the account's row.
 * Its own file because both the account store and the credit ledger (which the store hands out)
 * take it, and neither should import the other for it.
 */

import type { Selectable, Transaction } from 'kysely';
import type { DatabaseEngine } from '../storage/database.ts';
import type { AccountTable, CoordinatorDatabase } from '../storage/schema.ts';

/**
 * The account's row, locked until `tx` ends, so what is decided per account (admission, charging)
 * is decided one at a time — across coordinator processes too: PostgreSQL locks the row (`FOR
 * UPDATE`); on SQLite every transaction already holds the file's write lock (BEGIN IMMEDIATE,
 * storage/sqlite-dialect.ts). Undefined when there is no such account.
 */
export async function lockAccountRow(
  tx: Transaction<CoordinatorDatabase>,
  engine: DatabaseEngine,
  accountId: string,
): Promise<Selectable<AccountTable> | undefined> {
  let query = tx.selectFrom('accounts').selectAll().where('id', '=', accountId);
  if (engine === 'postgres') query = query.forUpdate();
  return query.executeTakeFirst();
}
