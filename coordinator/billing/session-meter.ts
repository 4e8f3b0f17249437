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

export interface FlushResult {
  /** Ticks written. */
  readonly ticks: number;
  /** Sessions whose account could not pay for the seconds just charged. */
  readonly ranDry: ReadonlyArray<{ readonly sessionId: string; readonly accountId: string }>;
}

export class SessionMeter {
  readonly #db: Kysely<CoordinatorDatabase>;
  readonly #ledger: CreditLedger;
  readonly #now: () => number;

  constructor(db: Kysely<CoordinatorDatabase>, ledger: CreditLedger, now: () => number = Date.now) {
    this.#db = db;
    this.#ledger = ledger;
    this.#now = now;
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
          eb.and([eb('status', '=', 'ended'), eb('billed_seconds', '<', eb(eb('ended_at', '-', eb.ref('ready_at')), '/', 1000))]),
        ]),
      )
      .execute();
    let ticks = 0;
    const ranDry: Array<{ sessionId: string; accountId: string }> = [];
    for (const { id, account_id: accountId } of candidates) {
      const result = await this.flushSession(id, accountId);
      if (result.charged) ticks++;
      if (result.unpaid > 0) ranDry.push({ sessionId: id, accountId });
    }
    return { ticks, ranDry };
  }

  /** Charges one session's accrued seconds (also called when a session ends). */
  async flushSession(sessionId: string, accountId: string): Promise<{ charged: boolean; unpaid: number }> {
    return this.#db.transaction().execute(async (tx) => {
      await this.#ledger.lockAccount(tx, accountId);
      // Read under the lock: a concurrent flush that committed first has moved billed_seconds.
      const session = await tx.selectFrom('sessions').selectAll().where('id', '=', sessionId).executeTakeFirstOrThrow();
      if (session.ready_at === null) return { charged: false, unpaid: 0 };
      const until = session.ended_at ?? this.#now();
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
      return result;
    });
  }
}
