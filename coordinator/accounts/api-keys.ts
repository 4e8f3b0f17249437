/**
 * API keys: `rk_` + 32 random bytes (base64url). Only a SHA-256 of the key is stored — a key is
 * a high-entropy secret, so a fast hash is enough to make a leaked table useless, and lookups
 * stay one indexed read. The key itself is shown once, when created or rotated.
 *
 * Two kinds of callers: operators (`arclight admin`, the methods without an account) may do
 * anything, including revoking an account's last key; the account itself (the platform API,
 * `…Owned` methods) acts only on its own keys, within MAX_ACTIVE_API_KEYS, and never revokes its
 * last active key. The owned operations decide under the account's lock, so two concurrent
 * revocations cannot both pass the last-key check, nor two creations the cap.
 */

import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type { Kysely, Selectable, Transaction } from 'kysely';
import { ArclightError } from '../../protocol/errors.ts';
import type { DatabaseEngine } from '../storage/database.ts';
import type { ApiKeyTable, CoordinatorDatabase } from '../storage/schema.ts';
import { lockAccountRow } from './account-lock.ts';

export const API_KEY_PREFIX = 'rk_';
/** Characters of the key kept in clear, to tell keys apart in listings. */
const SHOWN_PREFIX_LENGTH = 10;
/** Active keys an account may hold through the platform API (operators are not bound by it). */
export const MAX_ACTIVE_API_KEYS = 20;
/** Longest key name, in characters. */
export const MAX_API_KEY_NAME_LENGTH = 64;
/** Longer than any id we issue (UUIDs): looked up as unknown without a query. */
const MAX_KEY_ID_LENGTH = 128;

export interface ApiKeyRecord {
  readonly id: string;
  readonly accountId: string;
  /** A label chosen by whoever created it (`"production"`), kept across rotations; null when none. */
  readonly name: string | null;
  /** e.g. `rk_3fA9xQ_` — never enough to use the key. */
  readonly prefix: string;
  readonly createdAt: number;
  /** When the key stopped working: revoked, or rotated (replaced). */
  readonly revokedAt: number | null;
  /**
   * When the tokens it minted stopped working: set by a revocation, never by a rotation (a rotated
   * key's tokens live until they expire). Null while they work.
   */
  readonly tokensRevokedAt: number | null;
}

/** A key as issued: the secret, shown once. */
export interface IssuedApiKey {
  readonly key: string;
  readonly record: ApiKeyRecord;
}

/** A rotation: the new key (shown once) and the id of the key it revoked. */
export interface RotatedApiKey extends IssuedApiKey {
  readonly replaces: string;
}

export function generateApiKey(): string {
  return API_KEY_PREFIX + randomBytes(32).toString('base64url');
}

export function hashApiKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

/**
 * A key name as given (`null`/absent: none): a string of 1–64 characters once trimmed, without
 * control characters. Throws `invalid_request` naming `field`.
 */
export function parseApiKeyName(value: unknown, field = '/name'): string | null {
  if (value === undefined || value === null) return null;
  const name = typeof value === 'string' ? value.trim() : undefined;
  if (name === undefined || name.length === 0 || [...name].length > MAX_API_KEY_NAME_LENGTH || /[\u0000-\u001f\u007f-\u009f]/.test(name)) {
    throw new ArclightError(
      'invalid_request',
      `name must be a string of 1 to ${MAX_API_KEY_NAME_LENGTH} characters without control characters, or null.`,
      { field },
    );
  }
  return name;
}

const NOT_FOUND = (keyId: string) => new ArclightError('api_key_not_found', `This account has no API key ${keyId}.`);

function toRecord(row: Selectable<ApiKeyTable>): ApiKeyRecord {
  return {
    id: row.id,
    accountId: row.account_id,
    name: row.name,
    prefix: row.key_prefix,
    createdAt: row.created_at,
    revokedAt: row.revoked_at,
    tokensRevokedAt: row.tokens_revoked_at,
  };
}

export class ApiKeyStore {
  readonly #db: Kysely<CoordinatorDatabase>;
  readonly #engine: DatabaseEngine;

  constructor(db: Kysely<CoordinatorDatabase>, engine: DatabaseEngine) {
    this.#db = db;
    this.#engine = engine;
  }

  /** A new key for the account (operators: no cap). */
  async create(accountId: string, options: { name?: string | null; now?: number } = {}): Promise<IssuedApiKey> {
    return this.#insert(this.#db, accountId, options.name ?? null, options.now ?? Date.now());
  }

  /**
   * Replaces a key: a new key for the same account and name, the old one stopped at once (it can
   * no longer mint or act), in one transaction (a concurrent rotation of the same key finds it
   * stopped). Sessions and tokens minted before keep working until they expire — rotating is
   * routine hygiene, and the spec says it does not affect active sessions; `revoke` is for a key
   * that leaked, and also kills its tokens.
   */
  async rotate(keyId: string, now = Date.now()): Promise<RotatedApiKey> {
    const owner = await this.#db.selectFrom('api_keys').select('account_id').where('id', '=', keyId).executeTakeFirst();
    if (!owner) throw new Error(`no active API key ${keyId}`);
    return this.#db.transaction().execute(async (tx) => {
      await lockAccountRow(tx, this.#engine, owner.account_id);
      const old = await tx.selectFrom('api_keys').selectAll().where('id', '=', keyId).executeTakeFirst();
      if (!old || old.revoked_at !== null) throw new Error(`no active API key ${keyId}`);
      return this.#replace(tx, old, now);
    });
  }

  /**
   * Revokes a key (operators: even the account's last one): it stops working, and so does every
   * token it minted — on every replica, from the next request (token verification reads the key's
   * state with the token). Revoking a rotated key kills the tokens the rotation left alive. A
   * revoked key stays revoked; revoking it again changes nothing.
   */
  async revoke(keyId: string, now = Date.now()): Promise<void> {
    await this.#db
      .updateTable('api_keys')
      .set((eb) => ({ revoked_at: eb.fn.coalesce('revoked_at', eb.val(now)), tokens_revoked_at: now }))
      .where('id', '=', keyId)
      .where('tokens_revoked_at', 'is', null)
      .execute();
  }

  /** Every key of the account, revoked ones included, oldest first. */
  async list(accountId: string): Promise<ApiKeyRecord[]> {
    const rows = await this.#db
      .selectFrom('api_keys')
      .selectAll()
      .where('account_id', '=', accountId)
      .orderBy('created_at')
      .orderBy('id')
      .execute();
    return rows.map(toRecord);
  }

  /** The account's key with this id, or undefined (unknown, or another account's: the same). */
  async getOwned(accountId: string, keyId: string): Promise<ApiKeyRecord | undefined> {
    if (keyId.length > MAX_KEY_ID_LENGTH) return undefined;
    const row = await this.#db
      .selectFrom('api_keys')
      .selectAll()
      .where('id', '=', keyId)
      .where('account_id', '=', accountId)
      .executeTakeFirst();
    return row ? toRecord(row) : undefined;
  }

  /** Whether the key exists and is not revoked. */
  async isActive(keyId: string): Promise<boolean> {
    const row = await this.#db
      .selectFrom('api_keys')
      .select('id')
      .where('id', '=', keyId)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    return row !== undefined;
  }

  /** The account creating a key: refused with 409 `too_many_api_keys` at MAX_ACTIVE_API_KEYS active keys. */
  async createOwned(accountId: string, name: string | null, now = Date.now()): Promise<IssuedApiKey> {
    return this.#db.transaction().execute(async (tx) => {
      await lockAccountRow(tx, this.#engine, accountId);
      const active = await this.#countActive(tx, accountId);
      if (active >= MAX_ACTIVE_API_KEYS) {
        throw new ArclightError(
          'too_many_api_keys',
          `This account already has ${MAX_ACTIVE_API_KEYS} active API keys, the most it may hold; revoke one first.`,
        );
      }
      return this.#insert(tx, accountId, name, now);
    });
  }

  /** The account rotating its key: 404 `api_key_not_found` (unknown or foreign), 409 `api_key_revoked`. */
  async rotateOwned(accountId: string, keyId: string, now = Date.now()): Promise<RotatedApiKey> {
    if (keyId.length > MAX_KEY_ID_LENGTH) throw NOT_FOUND(keyId.slice(0, MAX_KEY_ID_LENGTH));
    return this.#db.transaction().execute(async (tx) => {
      await lockAccountRow(tx, this.#engine, accountId);
      const old = await tx
        .selectFrom('api_keys')
        .selectAll()
        .where('id', '=', keyId)
        .where('account_id', '=', accountId)
        .executeTakeFirst();
      if (!old) throw NOT_FOUND(keyId);
      if (old.revoked_at !== null)
        throw new ArclightError('api_key_revoked', `API key ${keyId} is revoked; a revoked key cannot be rotated (create a new one).`);
      return this.#replace(tx, old, now);
    });
  }

  /**
   * The account revoking its key, and the tokens it minted: idempotent (an already revoked key
   * answers as it is; a rotated one is answered as it is too, its tokens now revoked); 404
   * `api_key_not_found` (unknown or foreign); 409 `last_api_key` for the account's only active key.
   */
  async revokeOwned(accountId: string, keyId: string, now = Date.now()): Promise<ApiKeyRecord> {
    if (keyId.length > MAX_KEY_ID_LENGTH) throw NOT_FOUND(keyId.slice(0, MAX_KEY_ID_LENGTH));
    return this.#db.transaction().execute(async (tx) => {
      await lockAccountRow(tx, this.#engine, accountId);
      const row = await tx
        .selectFrom('api_keys')
        .selectAll()
        .where('id', '=', keyId)
        .where('account_id', '=', accountId)
        .executeTakeFirst();
      if (!row) throw NOT_FOUND(keyId);
      if (row.revoked_at !== null) {
        // Rotated (or revoked before): it stopped working already; now its tokens stop too.
        if (row.tokens_revoked_at !== null) return toRecord(row);
        await tx.updateTable('api_keys').set({ tokens_revoked_at: now }).where('id', '=', keyId).execute();
        return toRecord({ ...row, tokens_revoked_at: now });
      }
      if ((await this.#countActive(tx, accountId)) <= 1) {
        throw new ArclightError(
          'last_api_key',
          "This is the account's only active API key: revoking it would lock the account out of the API. Rotate it instead, or create another key first.",
        );
      }
      await tx.updateTable('api_keys').set({ revoked_at: now, tokens_revoked_at: now }).where('id', '=', keyId).execute();
      return toRecord({ ...row, revoked_at: now, tokens_revoked_at: now });
    });
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

  async #countActive(tx: Transaction<CoordinatorDatabase>, accountId: string): Promise<number> {
    const row = await tx
      .selectFrom('api_keys')
      .select((eb) => eb.fn.countAll<number | string>().as('n'))
      .where('account_id', '=', accountId)
      .where('revoked_at', 'is', null)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  async #insert(db: Kysely<CoordinatorDatabase>, accountId: string, name: string | null, now: number): Promise<IssuedApiKey> {
    const key = generateApiKey();
    const record: ApiKeyRecord = {
      id: randomUUID(),
      accountId,
      name,
      prefix: key.slice(0, SHOWN_PREFIX_LENGTH),
      createdAt: now,
      revokedAt: null,
      tokensRevokedAt: null,
    };
    await db
      .insertInto('api_keys')
      .values({
        id: record.id,
        account_id: accountId,
        name,
        key_hash: hashApiKey(key),
        key_prefix: record.prefix,
        created_at: now,
        revoked_at: null,
      })
      .execute();
    return { key, record };
  }

  /** In `tx`, holding the account's lock, `old` active: its successor, then `old` stopped (its tokens left alone). */
  async #replace(tx: Transaction<CoordinatorDatabase>, old: Selectable<ApiKeyTable>, now: number): Promise<RotatedApiKey> {
    const issued = await this.#insert(tx, old.account_id, old.name, now);
    await tx.updateTable('api_keys').set({ revoked_at: now }).where('id', '=', old.id).execute();
    return { ...issued, replaces: old.id };
  }
}
