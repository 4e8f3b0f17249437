/**
 * The per-second meter. A session is billed for every whole second from `ready_at` until it ends
 * (not until its network drops: a recoverable disconnect keeps it running), at the rate fixed
 * when it was created. `flush()` charges what accrued since the last flush as one tick per
 * session keyed (session, first second), so a retried flush, a second replica flushing at the
 * same time, or a restart after a crash charges no second twice; a crash loses at most the
 * seconds since the last flush until the next one picks them up (the seconds are computed from
 * times in the database, so none are lost for good).
 *
 * A charge that leaves an account with automatic top-up below its threshold claims the top-up in
 * the same transaction, under the account's lock (`AutoTopupClaimer`); the payment itself is made
 * after the commit, outside any transaction (coordinator/billing/purchases.ts).
 */

import { sql, type ExpressionBuilder, type Kysely, type Transaction } from 'kysely';
import type { CoordinatorDatabase } from '../storage/schema.ts';
import type { AutoTopupState, Charge, CreditLedger } from './credit-ledger.ts';

/**
 * Automatic top-ups, as the meter sees them: `claim` runs in the charge's transaction (holding the
 * account's lock) when the balance it left is below an armed threshold, and returns the id of the
 * purchase it created (undefined: none); `dispatch` gets those ids once the transaction committed.
 */
export interface AutoTopupClaimer {
  claim(tx: Transaction<CoordinatorDatabase>, accountId: string, settings: AutoTopupState, balance: number): Promise<string | undefined>;
  dispatch(purchaseIds: readonly string[]): void;
}

/** Why the meter says a running session must end. */
export type MeterStop = 'out_of_credits' | 'billing_cap';

export interface SessionCharge {
  readonly charged: boolean;
  /** Credits the account's grants could not cover. */
  readonly unpaid: number;
  /** Set when the session must end: its account ran dry, or spent its monthly cap. */
  readonly stop?: MeterStop;
}

export interface FlushResult {
  /** Ticks written. */
  readonly ticks: number;
  /** Sessions whose account ran dry or reached its billing cap with the seconds just charged. */
  readonly mustEnd: ReadonlyArray<{ readonly sessionId: string; readonly accountId: string; readonly stop: MeterStop }>;
}

/**
 * How far a running session may be billed: up to now, but never past its runtime's last
 * heartbeat. A runtime that dies stops heartbeating; when the coordinator declares it gone (three
 * missed heartbeats later) its sessions end as of that last heartbeat, so seconds charged beyond it
 * would be seconds the GPU was not known to serve — charged, and never given back. Waiting for the
 * heartbeat costs live billing at most one heartbeat interval of lag (the seconds are charged at the
 * next flush after it: none is lost), and a dead runtime's sessions are billed exactly to the
 * moment they end. A session with no runtime row (none is assigned before `ready`) bills to now.
 */
function billableUntil(now: number, runtimeHeartbeatAt: number | null): number {
  return runtimeHeartbeatAt === null ? now : Math.min(now, runtimeHeartbeatAt);
}

/** Sessions of one account charged in one transaction (more are split into several). */
export const SESSIONS_PER_CHARGE = 500;

/** Charges in flight during a PostgreSQL flush: overlaps round trips, leaves pool connections for requests. */
export const METER_CONCURRENCY_POSTGRES = 6;

export class SessionMeter {
  readonly #db: Kysely<CoordinatorDatabase>;
  readonly #ledger: CreditLedger;
  readonly #now: () => number;

  readonly #concurrency: number;
  #autoTopup: AutoTopupClaimer | undefined;

  /**
   * `concurrency`: charges in flight during a flush. 1 for SQLite (one writer at a time: more only
   * queue); on PostgreSQL the coordinator uses METER_CONCURRENCY_POSTGRES, under its pool of 10.
   */
  readonly #sessionsPerCharge: number;

  constructor(
    db: Kysely<CoordinatorDatabase>,
    ledger: CreditLedger,
    now: () => number = Date.now,
    concurrency = 1,
    sessionsPerCharge = SESSIONS_PER_CHARGE,
  ) {
    if (!(Number.isInteger(concurrency) && concurrency >= 1))
      throw new RangeError(`meter concurrency must be a whole number ≥ 1 (got ${concurrency})`);
    if (!(Number.isInteger(sessionsPerCharge) && sessionsPerCharge >= 1))
      throw new RangeError(`sessionsPerCharge must be a whole number ≥ 1 (got ${sessionsPerCharge})`);
    this.#sessionsPerCharge = sessionsPerCharge;
    this.#db = db;
    this.#ledger = ledger;
    this.#now = now;
    this.#concurrency = concurrency;
  }

  /** Who claims and makes automatic top-ups (the coordinator's purchases); none: top-ups are off. */
  setAutoTopup(claimer: AutoTopupClaimer | undefined): void {
    this.#autoTopup = claimer;
  }

  /** Charges every ready session, and every ended one with seconds not yet charged, up to now. */
  async flush(): Promise<FlushResult> {
    const candidates = await this.#db
      .selectFrom('sessions')
      .select(['id', 'account_id'])
      .where('ready_at', 'is not', null)
      .where((eb) =>
        eb.or([
          eb('status', '=', 'ready'),
          // An ended session with seconds still due: up to its end, and never past its maximum
          // duration (one ended later than that — reaped at a late heartbeat, say — is done once
          // the maximum is billed, instead of staying a candidate that locks its account forever).
          // `(ended_at − ready_at) / 1000` in whole seconds: parenthesized (Kysely does not add
          // parentheses: without them this read `ended_at − ready_at / 1000`, true of every ended
          // session below its maximum, which stayed a candidate for good), and a literal divisor
          // (SQLite divides by a bound number as a REAL: 121 < 121.9 would keep it one too).
          eb.and([
            eb('status', '=', 'ended'),
            eb('billed_seconds', '<', eb(eb.parens('ended_at', '-', eb.ref('ready_at')), '/', sql.lit(1000))),
            eb('billed_seconds', '<', eb.ref('max_duration_seconds')),
          ]),
        ]),
      )
      .execute();
    // Grouped by account: each account's sessions are charged together in one transaction under
    // its lock (a few statements whatever their number), in chunks that bound a transaction.
    const byAccount = new Map<string, string[]>();
    for (const { id, account_id: accountId } of candidates) {
      const list = byAccount.get(accountId) ?? [];
      list.push(id);
      byAccount.set(accountId, list);
    }
    const batches: Array<{ accountId: string; sessionIds: string[] }> = [];
    for (const [accountId, ids] of byAccount) {
      for (let i = 0; i < ids.length; i += this.#sessionsPerCharge)
        batches.push({ accountId, sessionIds: ids.slice(i, i + this.#sessionsPerCharge) });
    }
    let ticks = 0;
    const mustEnd: Array<{ sessionId: string; accountId: string; stop: MeterStop }> = [];
    // A charge is a short transaction of a few round trips; one after another, a flush of many
    // accounts on PostgreSQL takes longer than the flush interval. Several in flight overlap the
    // round trips (SQLite runs one transaction at a time whatever the number).
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < batches.length) {
        const { accountId, sessionIds } = batches[next++]!;
        for (const [sessionId, result] of await this.#flushAccount(accountId, sessionIds)) {
          if (result.charged) ticks++;
          if (result.stop) mustEnd.push({ sessionId, accountId, stop: result.stop });
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.#concurrency, batches.length) }, worker));
    return { ticks, mustEnd };
  }

  /** Charges one session's accrued seconds (also called when a session ends). */
  async flushSession(sessionId: string, accountId: string): Promise<SessionCharge> {
    return (await this.#flushAccount(accountId, [sessionId])).get(sessionId) ?? { charged: false, unpaid: 0 };
  }

  /**
   * Ends a session and charges its last seconds in one transaction under its account's lock:
   * nobody reads it ended but not yet billed for its final seconds (`end` marks it, in `tx`).
   */
  async endAndCharge(
    sessionId: string,
    accountId: string,
    end: (tx: Transaction<CoordinatorDatabase>) => Promise<void>,
  ): Promise<SessionCharge> {
    return (await this.#flushAccount(accountId, [sessionId], end)).get(sessionId) ?? { charged: false, unpaid: 0 };
  }

  /** Charges the accrued seconds of some sessions of one account, in one transaction under its lock. */
  async #flushAccount(
    accountId: string,
    sessionIds: readonly string[],
    before?: (tx: Transaction<CoordinatorDatabase>) => Promise<void>,
  ): Promise<Map<string, SessionCharge>> {
    let topup: string | undefined;
    const outcome = await this.#db.transaction().execute(async (tx) => {
      const { monthlyCreditCap, autoTopup } = await this.#ledger.lockAccount(tx, accountId);
      if (before) await before(tx);
      // Read under the lock: a concurrent flush that committed first has moved billed_seconds.
      const sessions = await tx
        .selectFrom('sessions')
        .leftJoin('runtimes', 'runtimes.id', 'sessions.runtime_id')
        .select([
          'sessions.id',
          'sessions.status',
          'sessions.ready_at',
          'sessions.ended_at',
          'sessions.max_duration_seconds',
          'sessions.billed_seconds',
          'sessions.rate_credits_per_second',
        ])
        .select('runtimes.heartbeat_at as runtime_heartbeat_at')
        .where('sessions.id', 'in', sessionIds)
        .where('sessions.account_id', '=', accountId)
        .execute();
      const now = this.#now();
      const due = new Map<string, number>();
      const charges: Charge[] = [];
      for (const session of sessions) {
        if (session.ready_at === null) continue;
        const until = session.ended_at ?? billableUntil(now, session.runtime_heartbeat_at);
        const seconds = Math.min(Math.floor((until - session.ready_at) / 1000), session.max_duration_seconds);
        const billed = Number(session.billed_seconds);
        if (seconds <= billed) continue;
        due.set(session.id, seconds);
        charges.push({
          accountId,
          sessionId: session.id,
          seq: billed,
          seconds: seconds - billed,
          credits: (seconds - billed) * session.rate_credits_per_second,
        });
      }
      const results = new Map<string, SessionCharge>();
      if (charges.length === 0) return results;
      const { results: charged, balance } = await this.#ledger.chargeMany(tx, accountId, charges);
      // Below an armed threshold: the top-up is claimed now, under this lock, so however many
      // flushes run at once on however many replicas, one fall below the threshold claims one.
      if (autoTopup?.armed && balance < autoTopup.thresholdCredits && this.#autoTopup) {
        topup = await this.#autoTopup.claim(tx, accountId, autoTopup, balance);
      }
      // One statement moves every charged session's billed seconds.
      await tx
        .updateTable('sessions')
        .set((eb) => ({ billed_seconds: billedSecondsCase(eb, due) }))
        .where('id', 'in', [...due.keys()])
        .execute();
      const capReached =
        monthlyCreditCap > 0 &&
        [...charged.values()].some((r) => r.charged) &&
        (await this.#ledger.spentThisMonth(accountId, tx)) >= monthlyCreditCap;
      for (const session of sessions) {
        const result = charged.get(session.id);
        if (!result) continue;
        if (!result.charged || session.status !== 'ready') results.set(session.id, result);
        else if (result.unpaid > 0) results.set(session.id, { ...result, stop: 'out_of_credits' });
        else if (capReached) results.set(session.id, { ...result, stop: 'billing_cap' });
        else results.set(session.id, result);
      }
      return results;
    });
    // Committed: now the payment (outside the transaction; never holding the account's lock).
    if (topup !== undefined) this.#autoTopup?.dispatch([topup]);
    return outcome;
  }
}

/** `CASE id WHEN … THEN <due> … END`: each session's new billed seconds in one UPDATE (both engines). */
function billedSecondsCase(eb: ExpressionBuilder<CoordinatorDatabase, 'sessions'>, due: ReadonlyMap<string, number>) {
  const entries = [...due];
  const [firstId, firstDue] = entries[0]!;
  let expression = eb.case().when('id', '=', firstId).then(firstDue);
  for (const [id, seconds] of entries.slice(1)) expression = expression.when('id', '=', id).then(seconds);
  return expression.else(eb.ref('billed_seconds')).end();
}
