/**
 * API keys: `rk_` + 32 random bytes (base64url). Only a SHA-256 of the key is stored — a key is
 * a high-entropy secret, so a fast hash is enough to make a leaked table useless, and lookups
 * stay one indexed read. The key itself is shown once, when created or rotated.
 */

import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { CoordinatorDatabase } from '../storage/schema.ts';

export const API_KEY_PREFIX = 'rk_';
/** Characters of the key kept in clear, to tell keys apart in listings. */
const SHOWN_PREFIX_LENGTH = 10;

export interface ApiKeyRecord {
  readonly id: string;
  readonly accountId: string;
  /** e.g. `rk_3fA9xQ_` — never enough to use the key. */
  readonly prefix: string;
  readonly createdAt: number;
  readonly revokedAt: number | null;
}

/** A key as issued: the secret, shown once. */
export interface IssuedApiKey {
  readonly key: string;
  readonly record: ApiKeyRecord;
}

export function generateApiKey(): string {
  return API_KEY_PREFIX + randomBytes(32).toString('base64url');
}

export function hashApiKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

export class ApiKeyStore {
  readonly #db: Kysely<CoordinatorDatabase>;

  constructor(db: Kysely<CoordinatorDatabase>) {
    this.#db = db;
  }

  async create(accountId: string, now = Date.now()): Promise<IssuedApiKey> {
    const key = generateApiKey();
    const record: ApiKeyRecord = { id: randomUUID(), accountId, prefix: key.slice(0, SHOWN_PREFIX_LENGTH), createdAt: now, revokedAt: null };
    await this.#db
      .insertInto('api_keys')
      .values({ id: record.id, account_id: accountId, key_hash: hashApiKey(key), key_prefix: record.prefix, created_at: now, revoked_at: null })
      .execute();
    return { key, record };
  }

  /**
   * Replaces a key: a new key for the same account, the old one revoked at once. Sessions and
   * tokens minted before keep working (they are not tied to the key after minting).
   */
  async rotate(keyId: string, now = Date.now()): Promise<IssuedApiKey> {
    const old = await this.#db.selectFrom('api_keys').select(['account_id', 'revoked_at']).where('id', '=', keyId).executeTakeFirst();
    if (!old || old.revoked_at !== null) throw new Error(`no active API key ${keyId}`);
    const issued = await this.create(old.account_id, now);
    await this.revoke(keyId, now);
    return issued;
  }

  async revoke(keyId: string, now = Date.now()): Promise<void> {
    await this.#db.updateTable('api_keys').set({ revoked_at: now }).where('id', '=', keyId).where('revoked_at', 'is', null).execute();
  }

  async list(accountId: string): Promise<ApiKeyRecord[]> {
    const rows = await this.#db.selectFrom('api_keys').selectAll().where('account_id', '=', accountId).orderBy('created_at').execute();
    return rows.map((r) => ({ id: r.id, accountId: r.account_id, prefix: r.key_prefix, createdAt: r.created_at, revokedAt: r.revoked_at }));
  }

  /** The active key's id and account, or undefined for an unknown, malformed or revoked key. */
  async authenticate(key: string): Promise<{ keyId: string; accountId: string } | undefined> {
    if (!key.startsWith(API_KEY_PREFIX) || key.length > 200) return undefined;
    const row = await this.#db
      .selectFrom('api_keys')
      .select(['id', 'account_id'])
      .where('key_hash', '=', hashApiKey(key))
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    return row ? { keyId: row.id, accountId: row.account_id } : undefined;
  }
}
