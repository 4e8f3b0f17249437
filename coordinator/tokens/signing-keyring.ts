/**
 * The ES256 keys that sign tokens. They live in the database, so every coordinator replica signs
 * with the same newest key and verifies with any key still listed; `rotate()` adds a key and
 * retires the others from signing (they keep verifying: tokens signed with them live at most
 * 6 hours). Public keys are published at `/.well-known/jwks.json`.
 */

import { randomUUID } from 'node:crypto';
import { exportJWK, generateKeyPair, importJWK, type CryptoKey, type JWK } from 'jose';
import type { Kysely } from 'kysely';
import type { CoordinatorDatabase } from '../storage/schema.ts';

export const TOKEN_ALGORITHM = 'ES256';

export interface SigningKey {
  readonly kid: string;
  readonly privateKey: CryptoKey;
}

export class SigningKeyring {
  readonly #db: Kysely<CoordinatorDatabase>;
  readonly #publicKeys = new Map<string, CryptoKey>();
  #current: SigningKey | undefined;

  constructor(db: Kysely<CoordinatorDatabase>) {
    this.#db = db;
  }

  /** The key to sign with: the newest unretired one, created on first use. */
  async current(): Promise<SigningKey> {
    if (this.#current) return this.#current;
    let row = await this.#newest();
    if (!row) {
      await this.#insertKey();
      // Another replica may have inserted one at the same moment: everyone takes the newest.
      row = await this.#newest();
    }
    if (!row) throw new Error('no signing key after creating one');
    this.#current = { kid: row.kid, privateKey: (await importJWK(JSON.parse(row.private_jwk) as JWK, TOKEN_ALGORITHM)) as CryptoKey };
    return this.#current;
  }

  /** The public key for `kid`, if it is one of ours (retired keys included). */
  async publicKey(kid: string): Promise<CryptoKey | undefined> {
    const cached = this.#publicKeys.get(kid);
    if (cached) return cached;
    const row = await this.#db.selectFrom('signing_keys').select('public_jwk').where('kid', '=', kid).executeTakeFirst();
    if (!row) return undefined;
    const key = (await importJWK(JSON.parse(row.public_jwk) as JWK, TOKEN_ALGORITHM)) as CryptoKey;
    this.#publicKeys.set(kid, key);
    return key;
  }

  /** Every key that may still verify a token, as a JWKS document. */
  async jwks(): Promise<{ keys: JWK[] }> {
    const rows = await this.#db.selectFrom('signing_keys').select('public_jwk').orderBy('created_at', 'desc').execute();
    return { keys: rows.map((r) => JSON.parse(r.public_jwk) as JWK) };
  }

  /** Starts signing with a fresh key; returns its kid. */
  async rotate(now = Date.now()): Promise<string> {
    const kid = await this.#insertKey(now);
    await this.#db.updateTable('signing_keys').set({ retired_at: now }).where('kid', '!=', kid).where('retired_at', 'is', null).execute();
    this.#current = undefined;
    return kid;
  }

  async #newest() {
    return this.#db
      .selectFrom('signing_keys')
      .select(['kid', 'private_jwk'])
      .where('retired_at', 'is', null)
      .orderBy('created_at', 'desc')
      .orderBy('kid', 'desc')
      .limit(1)
      .executeTakeFirst();
  }

  async #insertKey(now = Date.now()): Promise<string> {
    const { privateKey, publicKey } = await generateKeyPair(TOKEN_ALGORITHM, { extractable: true });
    const kid = randomUUID();
    const publicJwk = { ...(await exportJWK(publicKey)), kid, alg: TOKEN_ALGORITHM, use: 'sig' };
    const privateJwk = { ...(await exportJWK(privateKey)), kid, alg: TOKEN_ALGORITHM };
    await this.#db
      .insertInto('signing_keys')
      .values({ kid, private_jwk: JSON.stringify(privateJwk), public_jwk: JSON.stringify(publicJwk), created_at: now, retired_at: null })
      .execute();
    return kid;
  }
}
