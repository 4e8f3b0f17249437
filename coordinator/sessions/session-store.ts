/**
 * Sessions: admission (the token's max_sessions, the account's concurrency and per-minute quotas,
 * checked and taken in one transaction), the bound-set rule, and ending.
 *
 * Why one transaction that locks the account row (PostgreSQL `SELECT … FOR UPDATE`): two requests
 * — on one coordinator or on two replicas sharing the database — must not both see "4 of 5
 * open" and both insert. The lock serializes admissions per account and nothing else. On SQLite
 * every transaction begins IMMEDIATE (storage/sqlite-dialect.ts): it takes the file's write lock
 * first, which serializes admissions across processes sharing the file (`--workers`).
 */

import { randomUUID } from 'node:crypto';
import type { Kysely, Selectable, Transaction } from 'kysely';
import { maxDurationReason } from '../../protocol/coordinator.ts';
import { ArclightError } from '../../protocol/errors.ts';
import { lockAccountRow } from '../accounts/account-lock.ts';
import type { CreditLedger } from '../billing/credit-ledger.ts';
import type { DatabaseEngine } from '../storage/database.ts';
import type { CoordinatorDatabase, SessionStatus, SessionTable } from '../storage/schema.ts';
import type { AuthenticatedToken } from '../tokens/token-service.ts';

/** Statuses that hold a slot of the account's concurrency quota. */
export const OPEN_STATUSES: readonly SessionStatus[] = ['connecting', 'waiting', 'ready'];
const RATE_WINDOW_MS = 60_000;
/** A client refused for concurrency should try again after closing a session; this is a hint. */
const CONCURRENCY_RETRY_SECONDS = 5;

export type SessionRecord = Selectable<SessionTable>;

/** Who is acting: a verified bearer token, or an API key (server side, account-wide). */
export type SessionActor =
  | { readonly kind: 'token'; readonly token: AuthenticatedToken }
  | { readonly kind: 'api_key'; readonly accountId: string; readonly keyId: string };

/** The same answer for unknown, foreign and unbound sessions: ids cannot be probed. */
const OUTSIDE_BOUND_SET = 'This session is not in the bound set of these credentials.';

export class SessionStore {
  readonly #db: Kysely<CoordinatorDatabase>;
  readonly #engine: DatabaseEngine;
  readonly #ledger: CreditLedger;
  readonly #now: () => number;

  constructor(db: Kysely<CoordinatorDatabase>, engine: DatabaseEngine, ledger: CreditLedger, now: () => number = Date.now) {
    this.#db = db;
    this.#engine = engine;
    this.#ledger = ledger;
    this.#now = now;
  }

  /**
   * Admits a new session of `model` for `token`, or throws: 403 `token_exhausted` (max_sessions
   * used up, bind-only tokens included), 429 `too_many_sessions`, 429 `session_rate_limited`.
   *
   * With an `idempotencyKey`, a session this account already created with that key is returned
   * as it is now (`replayed: true`) and nothing is admitted, counted or charged again — whatever
   * the quotas say by then, since the first attempt is what took them. The key must have come
   * with the same token and model; otherwise 409 `idempotency_conflict`.
   */
  async create(
    token: AuthenticatedToken,
    model: { id: string; rateCreditsPerSecond: number },
    idempotencyKey?: string,
  ): Promise<{ session: SessionRecord; replayed: boolean }> {
    return this.#db.transaction().execute(async (tx) => {
      const now = this.#now();
      // The account's lock first: retries racing each other (on any replica) meet here one at a time.
      const account = await this.#lockAccount(tx, token.accountId);
      if (idempotencyKey !== undefined) {
        const earlier = await tx
          .selectFrom('sessions')
          .selectAll()
          .where('account_id', '=', token.accountId)
          .where('idempotency_key', '=', idempotencyKey)
          .executeTakeFirst();
        if (earlier) {
          if (earlier.token_id !== token.tokenId || earlier.model_id !== model.id) {
            throw new ArclightError(
              'idempotency_conflict',
              'This Idempotency-Key already created a session with another token or model; use a new key for a new request.',
            );
          }
          return { session: earlier, replayed: true };
        }
      }
      // Out of credits: refused before anything is taken (a free model needs none).
      if (model.rateCreditsPerSecond > 0 && (await this.#ledger.balance(token.accountId, tx)).credits <= 0) {
        throw new ArclightError('insufficient_credits', 'The account has no credits left; top up, then retry.');
      }
      const cap = Number(account.monthly_credit_cap);
      if (model.rateCreditsPerSecond > 0 && cap > 0 && (await this.#ledger.spentThisMonth(token.accountId, tx)) >= cap) {
        throw new ArclightError(
          'billing_cap_reached',
          `The account has spent its billing cap of ${cap} credits this month; raise the cap or wait for next month.`,
        );
      }
      if (token.scoped) {
        // Counts every session the token ever created or was bound to; closing gives nothing back.
        const taken = await tx
          .updateTable('tokens')
          .set((eb) => ({ bound_sessions: eb('bound_sessions', '+', 1) }))
          .where('id', '=', token.tokenId)
          .where((eb) => eb('bound_sessions', '<', eb.ref('max_sessions')))
          .executeTakeFirst();
        if (Number(taken.numUpdatedRows) !== 1) {
          throw new ArclightError('token_exhausted', 'This token has created all the sessions its max_sessions allows; mint a new token.');
        }
      }
      const open = await tx
        .selectFrom('sessions')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('account_id', '=', token.accountId)
        .where('status', 'in', [...OPEN_STATUSES])
        .executeTakeFirstOrThrow();
      if (Number(open.n) >= account.concurrent_sessions) {
        throw new ArclightError(
          'too_many_sessions',
          `The account already has ${open.n} open sessions (its limit is ${account.concurrent_sessions}); end one and retry.`,
          {
            retryAfterSeconds: CONCURRENCY_RETRY_SECONDS,
          },
        );
      }
      const inWindow = (query: typeof tx) =>
        query
          .selectFrom('sessions')
          .where('account_id', '=', token.accountId)
          .where('model_id', '=', model.id)
          .where('created_at', '>', now - RATE_WINDOW_MS);
      const recent = await inWindow(tx)
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .executeTakeFirstOrThrow();
      if (Number(recent.n) >= account.sessions_per_minute) {
        // The window frees a slot when the oldest of the last `limit` creations turns a minute old.
        const { created_at: oldest } = await inWindow(tx)
          .select('created_at')
          .orderBy('created_at', 'desc')
          .limit(1)
          .offset(account.sessions_per_minute - 1)
          .executeTakeFirstOrThrow();
        throw new ArclightError(
          'session_rate_limited',
          `At most ${account.sessions_per_minute} sessions of this model per minute; retry shortly.`,
          {
            retryAfterSeconds: (oldest + RATE_WINDOW_MS - now) / 1000,
          },
        );
      }
      const maxDuration = Math.min(account.max_session_duration_seconds, token.maxSessionDurationSeconds ?? Number.POSITIVE_INFINITY);
      const session: SessionRecord = {
        id: randomUUID(),
        account_id: token.accountId,
        model_id: model.id,
        token_id: token.tokenId,
        status: 'waiting',
        created_at: now,
        ready_at: null,
        ended_at: null,
        end_reason: null,
        max_duration_seconds: maxDuration,
        rate_credits_per_second: model.rateCreditsPerSecond,
        billed_seconds: 0,
        runtime_id: null,
        slot_released_at: null,
        idempotency_key: idempotencyKey ?? null,
      };
      await tx.insertInto('sessions').values(session).execute();
      return { session, replayed: false };
    });
  }

  /**
   * The session, if `actor` may act on it: a scoped token on its bound set (created by it or bound
   * at minting), an unscoped token or an API key on any session of its account. Otherwise 403 —
   * the same for a session that does not exist.
   *
   * Ending is acting: the spec's endpoint table lets "a token bound to that session" DELETE it, and
   * a token binds what it created and what it names in `bind`. That an adopter's leaving does not
   * end a shared session (spec, session behaviour 4) is the client library's doing: its
   * `disconnect()` in an adopted session retires its connection and sends no DELETE. Refusing the
   * bearer instead left a creator that re-minted its token with `bind` (auth rule 6) unable to
   * end its own session.
   */
  async authorize(actor: SessionActor, sessionId: string): Promise<SessionRecord> {
    const session = await this.#db.selectFrom('sessions').selectAll().where('id', '=', sessionId).executeTakeFirst();
    const accountId = actor.kind === 'token' ? actor.token.accountId : actor.accountId;
    let allowed = session !== undefined && session.account_id === accountId;
    if (allowed && actor.kind === 'token' && actor.token.scoped && session!.token_id !== actor.token.tokenId) {
      const binding = await this.#db
        .selectFrom('token_bindings')
        .select('session_id')
        .where('token_id', '=', actor.token.tokenId)
        .where('session_id', '=', sessionId)
        .executeTakeFirst();
      allowed = binding !== undefined;
    }
    if (!allowed) throw new ArclightError('forbidden', OUTSIDE_BOUND_SET);
    return session!;
  }

  async get(sessionId: string): Promise<SessionRecord | undefined> {
    return this.#db.selectFrom('sessions').selectAll().where('id', '=', sessionId).executeTakeFirst();
  }

  /**
   * Marks a waiting session ready (a GPU is serving it): the billing meter starts now. Idempotent.
   */
  async markReady(sessionId: string): Promise<void> {
    await this.#db
      .updateTable('sessions')
      .set({ status: 'ready', ready_at: this.#now() })
      .where('id', '=', sessionId)
      .where('status', 'in', ['connecting', 'waiting'])
      .execute();
  }

  /**
   * Ends every ready session that has reached its maximum duration, as of the moment it did (so
   * the meter stops exactly there). Returns the ended sessions.
   */
  async endExpired(): Promise<SessionRecord[]> {
    const now = this.#now();
    const due = await this.#db
      .selectFrom('sessions')
      .selectAll()
      .where('status', '=', 'ready')
      .where((eb) => eb(eb('ready_at', '+', eb('max_duration_seconds', '*', 1000)), '<=', now))
      .execute();
    const ended: SessionRecord[] = [];
    for (const session of due) {
      const at = session.ready_at! + session.max_duration_seconds * 1000;
      const reason = maxDurationReason(session.max_duration_seconds);
      const result = await this.#db
        .updateTable('sessions')
        .set({ status: 'ended', ended_at: at, end_reason: reason })
        .where('id', '=', session.id)
        .where('status', '=', 'ready')
        .executeTakeFirst();
      if (Number(result.numUpdatedRows) === 1) ended.push({ ...session, status: 'ended', ended_at: at, end_reason: reason });
    }
    return ended;
  }

  /**
   * Ends an open session (idempotent: an ended one is returned as it is). A ready session already
   * past its maximum duration ended there: it is recorded as housekeeping would have ended it —
   * at ready_at + max, with the maximum-duration reason — whoever ends it now. That is how a
   * hosted runtime's own end at the deadline lands (its report arrives just after the deadline,
   * since the runtime counts from the coordinator's acknowledgement of `ready`), and why a late
   * DELETE bills no second past the maximum either.
   */
  async end(sessionId: string, reason: string | undefined): Promise<SessionRecord> {
    await this.endIn(this.#db, sessionId, reason);
    return this.#db.selectFrom('sessions').selectAll().where('id', '=', sessionId).executeTakeFirstOrThrow();
  }

  /** `end` inside a transaction (the meter's, so the end and its final charge commit together). */
  async endIn(
    db: Kysely<CoordinatorDatabase> | Transaction<CoordinatorDatabase>,
    sessionId: string,
    reason: string | undefined,
  ): Promise<void> {
    const now = this.#now();
    const open = await db
      .selectFrom('sessions')
      .select(['status', 'ready_at', 'max_duration_seconds'])
      .where('id', '=', sessionId)
      .executeTakeFirst();
    let endedAt = now;
    let endReason = reason ?? null;
    if (open?.status === 'ready' && open.ready_at !== null) {
      const deadline = Number(open.ready_at) + open.max_duration_seconds * 1000;
      if (now >= deadline) {
        endedAt = deadline;
        endReason = maxDurationReason(open.max_duration_seconds);
      }
    }
    await db
      .updateTable('sessions')
      .set({ status: 'ended', ended_at: endedAt, end_reason: endReason })
      .where('id', '=', sessionId)
      .where('status', '!=', 'ended')
      .execute();
  }

  async #lockAccount(tx: Transaction<CoordinatorDatabase>, accountId: string) {
    const account = await lockAccountRow(tx, this.#engine, accountId);
    if (!account) throw new ArclightError('unauthorized', 'The account of these credentials no longer exists.');
    return account;
  }
}
