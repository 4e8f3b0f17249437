/**
 * One housekeeper among the replicas: reaping silent runtimes, ending expired sessions, telling
 * runtimes about ends they missed, placement sweeps and meter flushes run on whichever replica
 * holds this lease, a row in the database with an expiry. Each replica tries to take or renew it
 * every half flush interval; the holder renews it and does the work at most once per interval.
 * A holder that dies stops renewing: the lease lapses `ttlMs` after its last renewal and the next
 * replica to try takes it, so the work moves within ttl + half an interval (2 intervals with the
 * default ttl of 1.5).
 *
 * The lease decides who *should* work, not what is safe: every step of housekeeping is already
 * safe to run twice at once (the meter's ticks are keyed, placement claims by compare-and-set),
 * which is what makes a lease enough — a holder paused past its expiry (a long GC, a stalled
 * database call) may overlap its successor for one pass, and nothing is charged or placed twice.
 * Replica clocks are compared through the expiry, so they must agree to well within `ttlMs` (NTP).
 */

import type { Kysely } from 'kysely';
import type { CoordinatorDatabase } from '../storage/schema.ts';

export const HOUSEKEEPING_LEASE = 'housekeeping';

export interface LeaseState {
  readonly holder: string;
  readonly expiresAt: number;
  readonly acquiredAt: number;
}

export class HousekeeperLease {
  readonly #db: Kysely<CoordinatorDatabase>;
  readonly #now: () => number;
  /** This replica's name in the lease row (host, pid and a random part: unique per process start). */
  readonly holder: string;
  readonly ttlMs: number;

  constructor(db: Kysely<CoordinatorDatabase>, holder: string, ttlMs: number, now: () => number = Date.now) {
    if (!(Number.isFinite(ttlMs) && ttlMs > 0)) throw new RangeError(`ttlMs must be positive (got ${ttlMs})`);
    this.#db = db;
    this.holder = holder;
    this.ttlMs = ttlMs;
    this.#now = now;
  }

  /**
   * Takes the lease if it is free or lapsed, or renews it if this replica holds it. True while
   * this replica holds it. One conditional update: two replicas trying at once cannot both win.
   */
  async acquire(): Promise<boolean> {
    const now = this.#now();
    const renewed = await this.#db
      .updateTable('leases')
      .set({ expires_at: now + this.ttlMs })
      .where('name', '=', HOUSEKEEPING_LEASE)
      .where('holder', '=', this.holder)
      .where('expires_at', '>', now)
      .executeTakeFirst();
    if (Number(renewed.numUpdatedRows) === 1) return true;
    const taken = await this.#db
      .updateTable('leases')
      .set({ holder: this.holder, expires_at: now + this.ttlMs, acquired_at: now })
      .where('name', '=', HOUSEKEEPING_LEASE)
      .where('expires_at', '<=', now)
      .executeTakeFirst();
    return Number(taken.numUpdatedRows) === 1;
  }

  /** Gives the lease up (a clean shutdown), so another replica takes it at its next try. */
  async release(): Promise<void> {
    await this.#db
      .updateTable('leases')
      .set({ expires_at: 0 })
      .where('name', '=', HOUSEKEEPING_LEASE)
      .where('holder', '=', this.holder)
      .execute();
  }

  async state(): Promise<LeaseState | undefined> {
    const row = await this.#db.selectFrom('leases').selectAll().where('name', '=', HOUSEKEEPING_LEASE).executeTakeFirst();
    return row && { holder: row.holder, expiresAt: Number(row.expires_at), acquiredAt: Number(row.acquired_at) };
  }
}
