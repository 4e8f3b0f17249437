/**
 * The ES256 keys that sign tokens. They live in the database (`signing_keys`), shared by every
 * coordinator replica:
 *
 * - **current**: the newest key not superseded signs every new token;
 * - **superseded** (`retired_at`): `rotate()` (`arclight admin rotate-signing-key`) adds a key and
 *   takes the others off signing; they keep verifying the tokens they signed;
 * - **retired**: `retire(kid)` (`arclight admin retire-signing-key`) deletes the key — the tokens it
 *   signed stop verifying and it leaves the JWKS. The current key cannot be retired.
 *
 * Each replica keeps a copy of the set and reads it again at least every `refreshMs` (default
 * 5 s), so a rotation or a retirement on one replica reaches all of them within that bound. A
 * token whose `kid` is unknown triggers an immediate re-read (at most one a second: misses arriving
 * within a second of the last such re-read wait for the next one rather than fail), so a token signed by a key another replica
 * just created verifies everywhere at once. Public keys are published at `/.well-known/jwks.json`.
 *
 * Private keys are stored encrypted under the operator's secret (signing-key-secret.ts) — always
 * on PostgreSQL; on SQLite without a secret they are stored as plain JWKs, with a warning.
 */

import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { exportJWK, generateKeyPair, importJWK, type CryptoKey, type JWK } from 'jose';
import type { Kysely } from 'kysely';
import type { CoordinatorDatabase } from '../storage/schema.ts';
import {
  isEncryptedPrivateKey,
  SIGNING_KEY_SECRET_ENV,
  SIGNING_KEY_SECRET_FILE_ENV,
  SigningKeySecretError,
  type SigningKeyCipher,
} from './signing-key-secret.ts';

export const TOKEN_ALGORITHM = 'ES256';
/** How long a replica signs and verifies with its copy of the key set before reading it again. */
export const DEFAULT_SIGNING_KEY_REFRESH_MS = 5_000;
/** At most one re-read this often for tokens with an unknown `kid` (capped at `refreshMs`). */
const UNKNOWN_KID_REREAD_MS = 1_000;

export interface SigningKey {
  readonly kid: string;
  readonly privateKey: CryptoKey;
}

/** A key as `arclight admin list-signing-keys` shows it (never the private part). */
export interface SigningKeyInfo {
  readonly kid: string;
  readonly createdAt: number;
  /** When a newer key took over signing; null for the current key. */
  readonly supersededAt: number | null;
  /** Whether it signs new tokens. */
  readonly current: boolean;
}

export interface SigningKeyringOptions {
  /** Encrypts new private keys and opens stored ones; absent = plain JWKs (SQLite without a secret). */
  readonly cipher?: SigningKeyCipher | undefined;
  /** Read the key set again at least this often, ms (default 5000). */
  readonly refreshMs?: number;
}

/** The key set as read at `startedAt` (performance.now()). */
interface KeySet {
  readonly startedAt: number;
  readonly current: SigningKey | undefined;
  readonly verifying: ReadonlyMap<string, CryptoKey>;
  readonly jwks: readonly JWK[];
}

export class SigningKeyring {
  readonly #db: Kysely<CoordinatorDatabase>;
  readonly #cipher: SigningKeyCipher | undefined;
  readonly #refreshMs: number;
  readonly #rereadMs: number;
  #set: KeySet | undefined;
  /** A read in flight for the periodic refresh. */
  #refreshing: { readonly startedAt: number; readonly promise: Promise<KeySet> } | undefined;
  /** A re-read for an unknown kid, scheduled and not started yet (misses share it). */
  #reread: Promise<KeySet> | undefined;
  /** When the last re-read for an unknown kid started. */
  #lastRereadAt = Number.NEGATIVE_INFINITY;
  /** Sets read before this (a rotation or retirement here) are stale. */
  #notBefore = Number.NEGATIVE_INFINITY;
  /** Imported public keys by kid (a kid's key never changes). */
  #publicKeys = new Map<string, CryptoKey>();
  /** Kids seen retired here (they left the set): refused without a re-read. */
  readonly #retired = new Set<string>();
  /** The private key last opened (the current one's, once read). */
  #signing: SigningKey | undefined;

  constructor(db: Kysely<CoordinatorDatabase>, options: SigningKeyringOptions = {}) {
    this.#db = db;
    this.#cipher = options.cipher;
    const refreshMs = options.refreshMs ?? DEFAULT_SIGNING_KEY_REFRESH_MS;
    if (!Number.isInteger(refreshMs) || refreshMs < 1)
      throw new RangeError(`the signing-key refresh interval must be a whole number of ms, at least 1 (got ${refreshMs})`);
    this.#refreshMs = refreshMs;
    this.#rereadMs = Math.min(UNKNOWN_KID_REREAD_MS, refreshMs);
  }

  /** Whether private keys are encrypted at rest (a secret was supplied). */
  get encrypted(): boolean {
    return this.#cipher !== undefined;
  }

  /**
   * Before serving: brings the stored private keys to this keyring's form, then makes the first
   * key if there is none. With a secret, plain rows are encrypted — each by a compare-and-set on
   * its old text, so replicas starting together encrypt it once and a second start finds nothing
   * to do — and every encrypted row must open (a wrong secret throws SigningKeySecretError).
   * Without one, encrypted rows throw (the secret is needed), and `warn` is told once that keys
   * are stored in the clear.
   */
  async prepare(warn: (message: string) => void = () => {}): Promise<void> {
    const rows = await this.#db.selectFrom('signing_keys').select(['kid', 'private_jwk']).execute();
    for (const row of rows) {
      if (isEncryptedPrivateKey(row.private_jwk)) {
        if (!this.#cipher) {
          throw new SigningKeySecretError(
            `the signing keys in this database are encrypted: set ${SIGNING_KEY_SECRET_ENV} (or ${SIGNING_KEY_SECRET_FILE_ENV}, --signing-key-secret-file) to the secret they were encrypted with`,
          );
        }
        this.#cipher.decrypt(row.private_jwk, row.kid);
      } else if (this.#cipher) {
        await this.#db
          .updateTable('signing_keys')
          .set({ private_jwk: this.#cipher.encrypt(row.private_jwk, row.kid) })
          .where('kid', '=', row.kid)
          .where('private_jwk', '=', row.private_jwk)
          .execute();
      }
    }
    if (!this.#cipher) {
      warn(
        `private signing keys are stored unencrypted: set ${SIGNING_KEY_SECRET_ENV} (or ${SIGNING_KEY_SECRET_FILE_ENV}) to encrypt them at rest — fine for local development on SQLite, required on PostgreSQL`,
      );
    }
    await this.current();
  }

  /** The key to sign with: the newest one not superseded, created on first use. */
  async current(): Promise<SigningKey> {
    let set = await this.#fresh();
    if (!set.current) {
      await this.#insertKey(this.#db, Date.now());
      // Another replica may have inserted one at the same moment: everyone takes the newest.
      this.#notBefore = performance.now();
      set = await this.#read();
    }
    if (!set.current) throw new Error('no signing key after creating one');
    return set.current;
  }

  /** The public key for `kid`, if it is one that verifies (superseded keys included, retired ones not). */
  async publicKey(kid: string): Promise<CryptoKey | undefined> {
    const known = (await this.#fresh()).verifying.get(kid);
    if (known || this.#retired.has(kid)) return known;
    // Perhaps a key another replica created since this one last read the set.
    return (await this.#rereadForUnknownKid()).verifying.get(kid);
  }

  /** Whether `kid` still verifies, as of this replica's copy (at most `refreshMs` old). */
  async verifies(kid: string): Promise<boolean> {
    return (await this.#fresh()).verifying.has(kid);
  }

  /** Every key that verifies, as a JWKS document (newest first). */
  async jwks(): Promise<{ keys: JWK[] }> {
    return { keys: [...(await this.#fresh()).jwks] };
  }

  /** Every key that verifies, newest first, for operators. */
  async list(): Promise<SigningKeyInfo[]> {
    const rows = await this.#db
      .selectFrom('signing_keys')
      .select(['kid', 'created_at', 'retired_at'])
      .orderBy('created_at', 'desc')
      .orderBy('kid', 'desc')
      .execute();
    const current = rows.find((r) => r.retired_at === null)?.kid;
    return rows.map((r) => ({ kid: r.kid, createdAt: r.created_at, supersededAt: r.retired_at, current: r.kid === current }));
  }

  /** Starts signing with a fresh key (here at once, on other replicas within `refreshMs`); returns its kid. */
  async rotate(now = Date.now()): Promise<string> {
    const kid = await this.#db.transaction().execute(async (tx) => {
      const created = await this.#insertKey(tx, now);
      await tx.updateTable('signing_keys').set({ retired_at: now }).where('kid', '!=', created).where('retired_at', 'is', null).execute();
      return created;
    });
    this.#notBefore = performance.now();
    return kid;
  }

  /**
   * Retires a key: it is deleted, so the tokens it signed stop verifying (here at once, on other
   * replicas within `refreshMs`) and it leaves the JWKS. Refused for the current signing key
   * (rotate first) and an unknown kid.
   */
  async retire(kid: string): Promise<SigningKeyInfo> {
    try {
      return await this.#db.transaction().execute(async (tx) => {
        const row = await tx
          .selectFrom('signing_keys')
          .select(['kid', 'created_at', 'retired_at'])
          .where('kid', '=', kid)
          .executeTakeFirst();
        if (!row) throw new Error(`no signing key ${kid} (retired already, or never ours): arclight admin list-signing-keys lists them`);
        const newest = await tx
          .selectFrom('signing_keys')
          .select('kid')
          .where('retired_at', 'is', null)
          .orderBy('created_at', 'desc')
          .orderBy('kid', 'desc')
          .limit(1)
          .executeTakeFirst();
        if (newest?.kid === kid)
          throw new Error(
            `signing key ${kid} is the current signing key: rotate first (arclight admin rotate-signing-key), then retire it`,
          );
        await tx.deleteFrom('signing_keys').where('kid', '=', kid).execute();
        return { kid: row.kid, createdAt: row.created_at, supersededAt: row.retired_at, current: false };
      });
    } finally {
      this.#notBefore = performance.now();
    }
  }

  /** The set, read again when older than `refreshMs` (concurrent callers share one read). */
  async #fresh(): Promise<KeySet> {
    const set = this.#set;
    if (set && set.startedAt >= this.#notBefore && performance.now() - set.startedAt < this.#refreshMs) return set;
    if (this.#refreshing && this.#refreshing.startedAt >= this.#notBefore) return this.#refreshing.promise;
    const startedAt = performance.now();
    const promise = this.#read().finally(() => {
      if (this.#refreshing?.promise === promise) this.#refreshing = undefined;
    });
    this.#refreshing = { startedAt, promise };
    return promise;
  }

  /**
   * A read that starts after this call: at once when the last such re-read is an interval old,
   * else when it will be. Misses arriving before it starts share it (so a flood of unknown kids
   * costs one query per interval); misses after it starts schedule the next.
   */
  #rereadForUnknownKid(): Promise<KeySet> {
    if (this.#reread) return this.#reread;
    const wait = Math.max(0, this.#lastRereadAt + this.#rereadMs - performance.now());
    const reread = (async () => {
      await delay(wait); // also lets `this.#reread` be set before it is cleared below
      this.#reread = undefined;
      this.#lastRereadAt = performance.now();
      return this.#read();
    })();
    this.#reread = reread;
    return reread;
  }

  /** Reads the set from the database now; keeps it unless a read started later already landed. */
  async #read(): Promise<KeySet> {
    const startedAt = performance.now();
    const rows = await this.#db
      .selectFrom('signing_keys')
      .select(['kid', 'public_jwk', 'retired_at'])
      .orderBy('created_at', 'desc')
      .orderBy('kid', 'desc')
      .execute();
    const verifying = new Map<string, CryptoKey>();
    const jwks: JWK[] = [];
    for (const row of rows) {
      const jwk = JSON.parse(row.public_jwk) as JWK;
      jwks.push(jwk);
      verifying.set(row.kid, this.#publicKeys.get(row.kid) ?? ((await importJWK(jwk, TOKEN_ALGORITHM)) as CryptoKey));
    }
    const newest = rows.find((r) => r.retired_at === null);
    let current: SigningKey | undefined;
    if (newest) current = this.#signing?.kid === newest.kid ? this.#signing : await this.#openPrivateKey(newest.kid);
    const set: KeySet = { startedAt, current, verifying, jwks };
    if (!this.#set || this.#set.startedAt <= startedAt) {
      // Kept only when no later read landed first, so a slower, older read cannot call a new key retired.
      for (const kid of this.#publicKeys.keys()) if (!verifying.has(kid)) this.#retired.add(kid);
      for (const kid of verifying.keys()) this.#retired.delete(kid);
      this.#publicKeys = new Map(verifying);
      this.#set = set;
    }
    return set;
  }

  async #openPrivateKey(kid: string): Promise<SigningKey | undefined> {
    const row = await this.#db.selectFrom('signing_keys').select('private_jwk').where('kid', '=', kid).executeTakeFirst();
    if (!row) return undefined; // retired between the two reads: the next read finds the newer one
    let text = row.private_jwk;
    if (isEncryptedPrivateKey(text)) {
      if (!this.#cipher)
        throw new SigningKeySecretError(
          `signing key ${kid} is encrypted: set ${SIGNING_KEY_SECRET_ENV} to the secret it was encrypted with`,
        );
      text = this.#cipher.decrypt(text, kid);
    }
    this.#signing = { kid, privateKey: (await importJWK(JSON.parse(text) as JWK, TOKEN_ALGORITHM)) as CryptoKey };
    return this.#signing;
  }

  async #insertKey(db: Kysely<CoordinatorDatabase>, now: number): Promise<string> {
    const { privateKey, publicKey } = await generateKeyPair(TOKEN_ALGORITHM, { extractable: true });
    const kid = randomUUID();
    const publicJwk = { ...(await exportJWK(publicKey)), kid, alg: TOKEN_ALGORITHM, use: 'sig' };
    const privateText = JSON.stringify({ ...(await exportJWK(privateKey)), kid, alg: TOKEN_ALGORITHM });
    await db
      .insertInto('signing_keys')
      .values({
        kid,
        private_jwk: this.#cipher ? this.#cipher.encrypt(privateText, kid) : privateText,
        public_jwk: JSON.stringify(publicJwk),
        created_at: now,
        retired_at: null,
      })
      .execute();
    return kid;
  }
}
