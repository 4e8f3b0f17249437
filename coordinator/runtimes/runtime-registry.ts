/**
 * The runtimes (one per GPU) that serve sessions: they register with the model they host, their
 * slots and capabilities, and heartbeat. A waiting session is assigned to a live, non-draining
 * runtime of its model with a free slot (the least loaded); a runtime that misses heartbeats for
 * `staleAfterMs` is gone — its open sessions are ended and their meters stop at its last
 * heartbeat, the last moment it is known to have served them.
 *
 * Placement happens exactly once per session, whichever replicas, heartbeats and housekeeping
 * passes race for it:
 * - assignment locks the runtime rows it considers (PostgreSQL `FOR UPDATE`; SQLite's write lock
 *   at BEGIN IMMEDIATE), so two replicas never put two sessions in one slot;
 * - the session is claimed by a compare-and-set (`runtime_id IS NULL` → this runtime): only the
 *   caller whose update took it goes on to start it; everyone else gets undefined;
 * - a slot counts as taken until its runtime let it go (`slot_released_at`), not until the
 *   coordinator marked the session ended, so no start reaches a runtime whose slot is still full.
 */

import type { Kysely, Selectable } from 'kysely';
import type { Capabilities } from '../../protocol/capabilities.ts';
import type { DatabaseEngine } from '../storage/database.ts';
import type { CoordinatorDatabase, RuntimeTable } from '../storage/schema.ts';

export type RuntimeRecord = Selectable<RuntimeTable>;

export interface RuntimeRegistration {
  readonly id: string;
  readonly url: string;
  readonly modelId: string;
  readonly slots: number;
  readonly capabilities: Capabilities;
}

/** Heartbeats expected this often by default; three missed and the runtime is gone. */
export const HEARTBEAT_INTERVAL_MS = 5_000;
/** How many heartbeat intervals of silence declare a runtime gone. */
export const MISSED_HEARTBEATS = 3;

export class RuntimeRegistry {
  readonly #db: Kysely<CoordinatorDatabase>;
  readonly #engine: DatabaseEngine;
  readonly #now: () => number;
  readonly #staleAfterMs: number;
  /** The interval runtimes are told to heartbeat at (in the answers to register and heartbeat). */
  readonly heartbeatIntervalMs: number;

  readonly #startedAt: number;

  constructor(db: Kysely<CoordinatorDatabase>, engine: DatabaseEngine, now: () => number = Date.now, heartbeatIntervalMs = HEARTBEAT_INTERVAL_MS) {
    if (!Number.isInteger(heartbeatIntervalMs) || heartbeatIntervalMs < 100) throw new RangeError(`heartbeatIntervalMs must be a whole number of ms, at least 100 (got ${heartbeatIntervalMs})`);
    this.#db = db;
    this.#engine = engine;
    this.#now = now;
    this.heartbeatIntervalMs = heartbeatIntervalMs;
    this.#staleAfterMs = MISSED_HEARTBEATS * heartbeatIntervalMs;
    this.#startedAt = now();
  }

  /** Silence after which a runtime is declared gone (three heartbeat intervals). */
  get staleAfterMs(): number {
    return this.#staleAfterMs;
  }

  /** Registers (or re-registers after a restart: same id, fresh state). */
  async register(registration: RuntimeRegistration): Promise<RuntimeRecord> {
    const now = this.#now();
    const row = {
      id: registration.id,
      url: registration.url,
      model_id: registration.modelId,
      slots: registration.slots,
      capabilities: JSON.stringify(registration.capabilities),
      registered_at: now,
      heartbeat_at: now,
      draining: 0,
      gone: 0,
    };
    await this.#db
      .insertInto('runtimes')
      .values(row)
      .onConflict((oc) =>
        oc.column('id').doUpdateSet({ url: row.url, model_id: row.model_id, slots: row.slots, capabilities: row.capabilities, registered_at: now, heartbeat_at: now, draining: 0, gone: 0 }),
      )
      .execute();
    // A runtime that registers again restarted: whatever it held is gone with its old process.
    await this.#db.updateTable('sessions').set({ slot_released_at: now }).where('runtime_id', '=', registration.id).where('status', '=', 'ended').where('slot_released_at', 'is', null).execute();
    return row;
  }

  /** Records a heartbeat; false when the runtime is unknown or already declared gone (re-register). */
  async heartbeat(id: string, draining: boolean): Promise<boolean> {
    const result = await this.#db
      .updateTable('runtimes')
      .set({ heartbeat_at: this.#now(), draining: draining ? 1 : 0 })
      .where('id', '=', id)
      .where('gone', '=', 0)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }

  async get(id: string): Promise<RuntimeRecord | undefined> {
    return this.#db.selectFrom('runtimes').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /**
   * Claims a free slot for the waiting session, if a live runtime of its model has one, and
   * returns that runtime: the caller, and only it, starts the session there. Undefined when none
   * is free (the session keeps waiting; housekeeping retries) or when the session is no longer
   * waiting for one (ended, or already placed — by another replica, say).
   */
  async assign(sessionId: string): Promise<RuntimeRecord | undefined> {
    return this.#db.transaction().execute(async (tx) => {
      const session = await tx.selectFrom('sessions').select(['model_id', 'runtime_id', 'status']).where('id', '=', sessionId).executeTakeFirst();
      if (!session || session.status === 'ended' || session.runtime_id !== null) return undefined;
      let candidates = tx
        .selectFrom('runtimes')
        .selectAll()
        .where('model_id', '=', session.model_id)
        .where('gone', '=', 0)
        .where('draining', '=', 0)
        .where('heartbeat_at', '>', this.#now() - this.#staleAfterMs)
        .orderBy('id');
      if (this.#engine === 'postgres') candidates = candidates.forUpdate();
      const runtimes = await candidates.execute();
      if (runtimes.length === 0) return undefined;
      // Slots held per candidate, in one query: open sessions, and ended ones whose runtime has
      // not let them go yet.
      const counts = await tx
        .selectFrom('sessions')
        .select((eb) => ['runtime_id', eb.fn.countAll<number>().as('n')])
        .where('runtime_id', 'in', runtimes.map((r) => r.id))
        .where('slot_released_at', 'is', null)
        .groupBy('runtime_id')
        .execute();
      const used = new Map(counts.map((c) => [c.runtime_id, Number(c.n)]));
      let best: { runtime: RuntimeRecord; used: number } | undefined;
      for (const runtime of runtimes) {
        const n = used.get(runtime.id) ?? 0;
        if (n < runtime.slots && (best === undefined || n < best.used)) best = { runtime, used: n };
      }
      if (!best) return undefined;
      // The claim: it takes the session only if nobody placed or ended it since it was read.
      const claimed = await tx
        .updateTable('sessions')
        .set({ runtime_id: best.runtime.id })
        .where('id', '=', sessionId)
        .where('runtime_id', 'is', null)
        .where('status', '!=', 'ended')
        .executeTakeFirst();
      return Number(claimed.numUpdatedRows) === 1 ? best.runtime : undefined;
    });
  }

  /** The runtime let the session's slot go (it answered the end, or ended the session itself). */
  async release(sessionId: string, runtimeId: string): Promise<void> {
    await this.#db
      .updateTable('sessions')
      .set({ slot_released_at: this.#now() })
      .where('id', '=', sessionId)
      .where('runtime_id', '=', runtimeId)
      .where('slot_released_at', 'is', null)
      .execute();
  }

  /**
   * Ended sessions whose live runtime has not yet let their slot go (telling it failed, or a
   * replica stopped between ending a session and telling its runtime): housekeeping tells again.
   */
  async unreleased(limit = 500): Promise<{ readonly sessionId: string; readonly runtime: RuntimeRecord; readonly reason: string }[]> {
    const rows = await this.#db
      .selectFrom('sessions')
      .innerJoin('runtimes', 'runtimes.id', 'sessions.runtime_id')
      .selectAll('runtimes')
      .select(['sessions.id as session_id', 'sessions.end_reason'])
      .where('sessions.status', '=', 'ended')
      .where('sessions.slot_released_at', 'is', null)
      .where('runtimes.gone', '=', 0)
      .orderBy('sessions.ended_at')
      .limit(limit)
      .execute();
    return rows.map(({ session_id, end_reason, ...runtime }) => ({ sessionId: session_id, runtime, reason: end_reason ?? 'The session was ended.' }));
  }

  /** Takes a session off its runtime (it could not be opened there); it waits again. */
  async unassign(sessionId: string, runtimeId: string): Promise<void> {
    await this.#db
      .updateTable('sessions')
      .set({ runtime_id: null })
      .where('id', '=', sessionId)
      .where('runtime_id', '=', runtimeId)
      .where('status', '!=', 'ended')
      .execute();
  }

  /** Waiting sessions without a runtime, oldest first. */
  async unplaced(): Promise<string[]> {
    const rows = await this.#db
      .selectFrom('sessions')
      .select('id')
      .where('status', 'in', ['connecting', 'waiting'])
      .where('runtime_id', 'is', null)
      .orderBy('created_at')
      .execute();
    return rows.map((r) => r.id);
  }

  /**
   * Declares runtimes without a heartbeat for `staleAfterMs` gone and ends their open sessions as
   * of the last heartbeat. Returns the sessions ended.
   */
  async reapStale(): Promise<string[]> {
    // A coordinator that was down (a crash, a deploy) heard no heartbeats — the runtimes were not
    // silent, it was. It judges nobody until a whole stale window has passed since it started.
    if (this.#now() - this.#startedAt < this.#staleAfterMs) return [];
    const stale = await this.#db
      .selectFrom('runtimes')
      .select(['id', 'heartbeat_at'])
      .where('gone', '=', 0)
      .where('heartbeat_at', '<=', this.#now() - this.#staleAfterMs)
      .execute();
    const ended: string[] = [];
    for (const runtime of stale) {
      await this.#db.updateTable('runtimes').set({ gone: 1 }).where('id', '=', runtime.id).execute();
      // A gone runtime holds nothing: its slots are free whenever it comes back (re-registered).
      await this.#db.updateTable('sessions').set({ slot_released_at: this.#now() }).where('runtime_id', '=', runtime.id).where('slot_released_at', 'is', null).execute();
      const sessions = await this.#db.selectFrom('sessions').select(['id', 'ready_at']).where('runtime_id', '=', runtime.id).where('status', '!=', 'ended').execute();
      for (const session of sessions) {
        await this.#db
          .updateTable('sessions')
          .set({
            status: 'ended',
            // Billing stops at the last moment the runtime was known to serve the session.
            ended_at: Math.max(runtime.heartbeat_at, session.ready_at ?? runtime.heartbeat_at),
            end_reason: 'The GPU serving this session stopped responding.',
          })
          .where('id', '=', session.id)
          .where('status', '!=', 'ended')
          .execute();
        ended.push(session.id);
      }
    }
    return ended;
  }
}
