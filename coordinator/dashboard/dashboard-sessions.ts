/**
 * Sign-ins to the account dashboard (docs/dashboard.md): a person signs in with one of the
 * account's API keys, or with a single-use link an operator issued (`arclight admin
 * dashboard-link`), and gets a random opaque session id in an HttpOnly, SameSite=Strict cookie.
 *
 * Only SHA-256 hashes of session ids and link tokens are stored (both are 256-bit random secrets:
 * a fast hash is enough, and a leaked table signs nobody in). A session ends 12 hours after it
 * began, after an hour without a request, at sign-out, or — signed in with an API key — as soon as
 * that key is revoked (a revoked key is treated as leaked: its tokens die, and so do the dashboard
 * sessions it opened; rotating a key leaves them, as it leaves its tokens). Every check reads the
 * database, so a sign-out or a revocation on one replica holds on all of them from the next request.
 *
 * The CSRF token a state-changing request must carry (header `X-Arclight-CSRF`) is derived from the
 * session id, so it is bound to the session and needs no storage: only a page that can read the
 * sign-in answer (same origin; the platform API answers no CORS preflight) learns it.
 */

import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Kysely } from 'kysely';
import { ArclightError } from '../../protocol/errors.ts';
import type { CoordinatorDatabase } from '../storage/schema.ts';

/** The cookie carrying the dashboard session id. */
export const DASHBOARD_COOKIE = 'arclight_dashboard';
/** The header every state-changing request authenticated by the cookie must carry. */
export const CSRF_HEADER = 'X-Arclight-CSRF';
/** A session ends this long after sign-in, whatever happens (12 h). */
export const DASHBOARD_SESSION_MS = 12 * 3_600_000;
/** …or this long after its last request (1 h). */
export const DASHBOARD_IDLE_MS = 3_600_000;
/** A sign-in link works once, within this long of being issued (15 minutes). */
export const SIGN_IN_LINK_MS = 15 * 60_000;
/** `last_seen_at` is written at most this often (reads stay reads). */
const TOUCH_EVERY_MS = 60_000;

const SESSION_PREFIX = 'ds_';
const LINK_PREFIX = 'dl_';
/** `ds_` / `dl_` + 32 random bytes, base64url. */
const SECRET_PATTERN = /^d[sl]_[A-Za-z0-9_-]{43}$/;

export type DashboardSignInMethod = 'api_key' | 'link';

export interface DashboardSession {
  readonly accountId: string;
  /** The API key that signed in; null for a sign-in link. */
  readonly apiKeyId: string | null;
  readonly method: DashboardSignInMethod;
  readonly createdAt: number;
  /** The absolute end. */
  readonly expiresAt: number;
  /** When it ends unless used before (capped at `expiresAt`). */
  readonly idleExpiresAt: number;
  /** The `X-Arclight-CSRF` value state-changing requests must carry. */
  readonly csrfToken: string;
}

/** A new session: the cookie's value (never stored) and what it grants. */
export interface DashboardSignIn {
  readonly cookie: string;
  readonly session: DashboardSession;
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** The CSRF token of a session id: a one-way function of it, so bound to it and unguessable without it. */
export function csrfTokenFor(sessionId: string): string {
  return createHash('sha256').update(`arclight-dashboard-csrf\0${sessionId}`).digest('base64url');
}

/** Constant-time comparison of a presented CSRF token with the session's. */
export function csrfTokenMatches(sessionId: string, presented: string | undefined): boolean {
  if (presented === undefined) return false;
  const expected = Buffer.from(csrfTokenFor(sessionId));
  const given = Buffer.from(presented);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

const LINK_INVALID = () =>
  new ArclightError(
    'sign_in_link_invalid',
    'This sign-in link is not valid: it was used already, has expired (links last 15 minutes), or was never issued. Ask your operator for a new one.',
  );

export class DashboardSessionStore {
  readonly #db: Kysely<CoordinatorDatabase>;
  readonly #now: () => number;

  constructor(db: Kysely<CoordinatorDatabase>, now: () => number = Date.now) {
    this.#db = db;
    this.#now = now;
  }

  /** Opens a session for the account (the caller has checked the credential). */
  async signIn(
    accountId: string,
    apiKeyId: string | null,
    method: DashboardSignInMethod,
    db: Kysely<CoordinatorDatabase> = this.#db,
  ): Promise<DashboardSignIn> {
    const cookie = SESSION_PREFIX + randomBytes(32).toString('base64url');
    const now = this.#now();
    const expiresAt = now + DASHBOARD_SESSION_MS;
    await db
      .insertInto('dashboard_sessions')
      .values({
        id_hash: sha256(cookie),
        account_id: accountId,
        api_key_id: apiKeyId,
        method,
        created_at: now,
        expires_at: expiresAt,
        last_seen_at: now,
      })
      .execute();
    return {
      cookie,
      session: {
        accountId,
        apiKeyId,
        method,
        createdAt: now,
        expiresAt,
        idleExpiresAt: Math.min(expiresAt, now + DASHBOARD_IDLE_MS),
        csrfToken: csrfTokenFor(cookie),
      },
    };
  }

  /**
   * The live session a cookie value names, or undefined (unknown, malformed, expired, idle too
   * long, or its sign-in key revoked — an ended one is deleted). Marks it used.
   */
  async authenticate(cookie: string): Promise<DashboardSession | undefined> {
    if (!SECRET_PATTERN.test(cookie) || !cookie.startsWith(SESSION_PREFIX)) return undefined;
    const idHash = sha256(cookie);
    const row = await this.#db
      .selectFrom('dashboard_sessions as d')
      .leftJoin('api_keys as k', 'k.id', 'd.api_key_id')
      .select(['d.account_id', 'd.api_key_id', 'd.method', 'd.created_at', 'd.expires_at', 'd.last_seen_at', 'k.tokens_revoked_at'])
      .where('d.id_hash', '=', idHash)
      .executeTakeFirst();
    if (!row) return undefined;
    const now = this.#now();
    const expiresAt = Number(row.expires_at);
    const lastSeen = Number(row.last_seen_at);
    if (now >= expiresAt || now - lastSeen >= DASHBOARD_IDLE_MS || (row.api_key_id !== null && row.tokens_revoked_at !== null)) {
      await this.#db.deleteFrom('dashboard_sessions').where('id_hash', '=', idHash).execute();
      return undefined;
    }
    let seen = lastSeen;
    if (now - lastSeen >= TOUCH_EVERY_MS) {
      await this.#db.updateTable('dashboard_sessions').set({ last_seen_at: now }).where('id_hash', '=', idHash).execute();
      seen = now;
    }
    return {
      accountId: row.account_id,
      apiKeyId: row.api_key_id,
      method: row.method === 'link' ? 'link' : 'api_key',
      createdAt: Number(row.created_at),
      expiresAt,
      idleExpiresAt: Math.min(expiresAt, seen + DASHBOARD_IDLE_MS),
      csrfToken: csrfTokenFor(cookie),
    };
  }

  /** Ends the session the cookie names (nothing if none). */
  async signOut(cookie: string): Promise<void> {
    if (!SECRET_PATTERN.test(cookie)) return;
    await this.#db.deleteFrom('dashboard_sessions').where('id_hash', '=', sha256(cookie)).execute();
  }

  /** Ends every dashboard session of the account (an operator's lever; tests). Returns how many. */
  async signOutAccount(accountId: string): Promise<number> {
    const result = await this.#db.deleteFrom('dashboard_sessions').where('account_id', '=', accountId).executeTakeFirst();
    return Number(result.numDeletedRows);
  }

  /** A single-use sign-in link's token for the account, valid for 15 minutes (the caller checked the account exists). */
  async issueLink(accountId: string): Promise<{ token: string; expiresAt: number }> {
    const token = LINK_PREFIX + randomBytes(32).toString('base64url');
    const now = this.#now();
    const expiresAt = now + SIGN_IN_LINK_MS;
    await this.#db
      .insertInto('dashboard_links')
      .values({ token_hash: sha256(token), account_id: accountId, created_at: now, expires_at: expiresAt, used_at: null })
      .execute();
    return { token, expiresAt };
  }

  /**
   * Exchanges a link's token for a session, once: the link is marked used by a conditional update
   * in the same transaction, so two exchanges at once (on any replicas) sign in one of them.
   * 401 `sign_in_link_invalid` for a used, expired, unknown or malformed token.
   */
  async redeemLink(token: string): Promise<DashboardSignIn> {
    if (!SECRET_PATTERN.test(token) || !token.startsWith(LINK_PREFIX)) throw LINK_INVALID();
    const tokenHash = sha256(token);
    const now = this.#now();
    return this.#db.transaction().execute(async (tx) => {
      const used = await tx
        .updateTable('dashboard_links')
        .set({ used_at: now })
        .where('token_hash', '=', tokenHash)
        .where('used_at', 'is', null)
        .where('expires_at', '>', now)
        .returning('account_id')
        .executeTakeFirst();
      if (!used) throw LINK_INVALID();
      return this.signIn(used.account_id, null, 'link', tx);
    });
  }

  /** Housekeeping: deletes ended sessions and links past their expiry (used or not). */
  async purge(): Promise<void> {
    const now = this.#now();
    await this.#db
      .deleteFrom('dashboard_sessions')
      .where((eb) => eb.or([eb('expires_at', '<=', now), eb('last_seen_at', '<=', now - DASHBOARD_IDLE_MS)]))
      .execute();
    await this.#db.deleteFrom('dashboard_links').where('expires_at', '<=', now).execute();
  }
}
