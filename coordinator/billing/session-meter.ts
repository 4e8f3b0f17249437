/**
 * The per-second meter. A session is billed for every whole second from `ready_at` until it ends
 * (not until its network drops: a recoverable disconnect keeps it running), at the rate fixed
 * when it was created. `flush()` charges what accrued since the last flush as one tick per
 * session keyed (session, first second), so a retried flush, a second replica flushing at the
 * same time, or a restart after a crash charges no second twice; a crash loses at most the
 * seconds since the last flush until the next one picks them up (the seconds are computed from
 * times in the database, so none are lost for good).
 */

import type { Kysely } from 'kysely';
import type { CoordinatorDatabase } from '../storage/schema.ts';
import type { CreditLedger } from './credit-ledger.ts';

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

/** Charges in flight during a PostgreSQL flush: overlaps round trips, leaves pool connections for requests. */
export const METER_CONCURRENCY_POSTGRES = 6;

export class SessionMeter {
  readonly #db: Kysely<CoordinatorDatabase>;
  readonly #ledger: CreditLedger;
  readonly #now: () => number;

  readonly #concurrency: number;

  /**
   * `concurrency`: charges in flight during a flush. 1 for SQLite (one writer at a time: more only
   * queue); on PostgreSQL the coordinator uses METER_CONCURRENCY_POSTGRES, under its pool of 10.
   */
  constructor(db: Kysely<CoordinatorDatabase>, ledger: CreditLedger, now: () => number = Date.now, concurrency = 1) {
    if (!(Number.isInteger(concurrency) && concurrency >= 1)) throw new RangeError(`meter concurrency must be a whole number ≥ 1 (got ${concurrency})`);
    this.#db = db;
    this.#ledger = ledger;
    this.#now = now;
    this.#concurrency = concurrency;
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
          eb.and([
            eb('status', '=', 'ended'),
            eb('billed_seconds', '<', eb(eb('ended_at', '-', eb.ref('ready_at')), '/', 1000)),
            eb('billed_seconds', '<', eb.ref('max_duration_seconds')),
          ]),
        ]),
      )
      .execute();
    let ticks = 0;
    const mustEnd: Array<{ sessionId: string; accountId: string; stop: MeterStop }> = [];
    // A charge is a short transaction of a few round trips; one after another, a flush of 10,000
    // sessions on PostgreSQL takes longer than the flush interval. Several in flight overlap the
    // round trips (sessions of one account still serialize on its row lock; SQLite runs one
    // transaction at a time whatever the number).
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < candidates.length) {
        const { id, account_id: accountId } = candidates[next++]!;
        const result = await this.flushSession(id, accountId);
        if (result.charged) ticks++;
        if (result.stop) mustEnd.push({ sessionId: id, accountId, stop: result.stop });
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.#concurrency, candidates.length) }, worker));
    return { ticks, mustEnd };
  }

  /** Charges one session's accrued seconds (also called when a session ends). */
  async flushSession(sessionId: string, accountId: string): Promise<SessionCharge> {
    return this.#db.transaction().execute(async (tx) => {
      const { monthlyCreditCap } = await this.#ledger.lockAccount(tx, accountId);
      // Read under the lock: a concurrent flush that committed first has moved billed_seconds.
      const session = await tx
        .selectFrom('sessions')
        .leftJoin('runtimes', 'runtimes.id', 'sessions.runtime_id')
        .selectAll('sessions')
        .select('runtimes.heartbeat_at as runtime_heartbeat_at')
        .where('sessions.id', '=', sessionId)
        .executeTakeFirstOrThrow();
      if (session.ready_at === null) return { charged: false, unpaid: 0 };
      const until = session.ended_at ?? billableUntil(this.#now(), session.runtime_heartbeat_at);
      const due = Math.min(Math.floor((until - session.ready_at) / 1000), session.max_duration_seconds);
      const billed = Number(session.billed_seconds);
      if (due <= billed) return { charged: false, unpaid: 0 };
      const seconds = due - billed;
      const result = await this.#ledger.charge(tx, {
        accountId,
        sessionId,
        seq: billed,
        seconds,
        credits: seconds * session.rate_credits_per_second,
      });
      await tx.updateTable('sessions').set({ billed_seconds: due }).where('id', '=', sessionId).execute();
      if (!result.charged || session.status !== 'ready') return result;
      if (result.unpaid > 0) return { ...result, stop: 'out_of_credits' as const };
      if (monthlyCreditCap > 0 && (await this.#ledger.spentThisMonth(accountId, tx)) >= monthlyCreditCap) return { ...result, stop: 'billing_cap' as const };
      return result;
    });
  }
}
