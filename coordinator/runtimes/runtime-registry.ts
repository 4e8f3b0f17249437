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
/** Heartbeats arriving within this long are written in one statement (0: each on its own). */
export const HEARTBEAT_BATCH_MS = 50;

export class RuntimeRegistry {
  readonly #db: Kysely<CoordinatorDatabase>;
  readonly #engine: DatabaseEngine;
  readonly #now: () => number;
  readonly #staleAfterMs: number;
  /** The interval runtimes are told to heartbeat at (in the answers to register and heartbeat). */
  readonly heartbeatIntervalMs: number;

  readonly #startedAt: number;
  readonly #heartbeatBatchMs: number;
  #pendingBeats = new Map<
    string,
    { at: number; draining: boolean; waiters: { resolve(live: boolean): void; reject(error: unknown): void }[] }
  >();
  #beatTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    db: Kysely<CoordinatorDatabase>,
    engine: DatabaseEngine,
    now: () => number = Date.now,
    heartbeatIntervalMs = HEARTBEAT_INTERVAL_MS,
    heartbeatBatchMs = HEARTBEAT_BATCH_MS,
  ) {
    if (!Number.isInteger(heartbeatIntervalMs) || heartbeatIntervalMs < 100)
      throw new RangeError(`heartbeatIntervalMs must be a whole number of ms, at least 100 (got ${heartbeatIntervalMs})`);
    if (!Number.isInteger(heartbeatBatchMs) || heartbeatBatchMs < 0)
      throw new RangeError(`heartbeatBatchMs must be a whole number of ms ≥ 0 (got ${heartbeatBatchMs})`);
    this.#db = db;
    this.#engine = engine;
    this.#now = now;
    this.heartbeatIntervalMs = heartbeatIntervalMs;
    this.#heartbeatBatchMs = heartbeatBatchMs;
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
        oc.column('id').doUpdateSet({
          url: row.url,
          model_id: row.model_id,
          slots: row.slots,
          capabilities: row.capabilities,
          registered_at: now,
          heartbeat_at: now,
          draining: 0,
          gone: 0,
        }),
      )
      .execute();
    // A runtime that registers again restarted: whatever it held is gone with its old process.
    await this.#db
      .updateTable('sessions')
      .set({ slot_released_at: now })
      .where('runtime_id', '=', registration.id)
      .where('status', '=', 'ended')
      .where('slot_released_at', 'is', null)
      .execute();
    return row;
  }

  /**
   * Records a heartbeat; false when the runtime is unknown or already declared gone (re-register).
   * Heartbeats arriving within `heartbeatBatchMs` of each other are written together, one UPDATE
   * for all of them (a fleet of 1,000 runtimes heartbeats 200 times a second): each keeps its own
   * arrival time, and each answer waits for the write that carries it.
   */
  async heartbeat(id: string, draining: boolean): Promise<boolean> {
    const beat = { at: this.#now(), draining };
    if (this.#heartbeatBatchMs === 0) return (await this.#writeHeartbeats(new Map([[id, beat]]))).has(id);
    return new Promise<boolean>((resolve, reject) => {
      const pending = this.#pendingBeats.get(id);
      this.#pendingBeats.set(id, { ...beat, waiters: [...(pending?.waiters ?? []), { resolve, reject }] });
      this.#beatTimer ??= setTimeout(() => void this.#flushHeartbeats(), this.#heartbeatBatchMs);
    });
  }

  /** Writes the heartbeats waiting for their batch now (the coordinator calls it when closing). */
  async flushHeartbeats(): Promise<void> {
    await this.#flushHeartbeats();
  }

  async #flushHeartbeats(): Promise<void> {
    if (this.#beatTimer) clearTimeout(this.#beatTimer);
    this.#beatTimer = undefined;
    const batch = this.#pendingBeats;
    if (batch.size === 0) return;
    this.#pendingBeats = new Map();
    try {
      const live = await this.#writeHeartbeats(batch);
      for (const [id, { waiters }] of batch) for (const waiter of waiters) waiter.resolve(live.has(id));
    } catch (error) {
      if (batch.size === 1) {
        for (const { waiters } of batch.values()) for (const waiter of waiters) waiter.reject(error);
        return;
      }
      // One beat the database refuses must not fail the others written with it: each on its own.
      await Promise.all(
        [...batch].map(async ([id, beat]) => {
          try {
            const live = (await this.#writeHeartbeats(new Map([[id, beat]]))).has(id);
            for (const waiter of beat.waiters) waiter.resolve(live);
          } catch (single) {
            for (const waiter of beat.waiters) waiter.reject(single);
          }
        }),
      );
    }
  }

  /** One UPDATE for a batch of heartbeats; the ids of the runtimes it found (known, not gone). */
  async #writeHeartbeats(batch: ReadonlyMap<string, { readonly at: number; readonly draining: boolean }>): Promise<Set<string>> {
    const entries = [...batch].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    // One row locks one row: nothing to order (and a lone heartbeat stays one statement).
    if (this.#engine !== 'postgres' || entries.length === 1) return this.#updateHeartbeats(this.#db, entries);
    // Row locks in id order, as assign() takes them: an UPDATE of many rows locks them in whatever
    // order it scans, and two replicas' batches (or a batch and a placement) would deadlock.
    return this.#db.transaction().execute(async (tx) => {
      await tx
        .selectFrom('runtimes')
        .select('id')
        .where(
          'id',
          'in',
          entries.map(([id]) => id),
        )
        .orderBy('id')
        .forUpdate()
        .execute();
      return this.#updateHeartbeats(tx, entries);
    });
  }

  async #updateHeartbeats(
    db: Kysely<CoordinatorDatabase>,
    entries: ReadonlyArray<readonly [string, { readonly at: number; readonly draining: boolean }]>,
  ): Promise<Set<string>> {
    const rows = await db
      .updateTable('runtimes')
      .set((eb) => {
        const [firstId, first] = entries[0]!;
        let at = eb.case().when('id', '=', firstId).then(first.at);
        let draining = eb
          .case()
          .when('id', '=', firstId)
          .then(first.draining ? 1 : 0);
        for (const [id, beat] of entries.slice(1)) {
          at = at.when('id', '=', id).then(beat.at);
          draining = draining.when('id', '=', id).then(beat.draining ? 1 : 0);
        }
        return { heartbeat_at: at.else(eb.ref('heartbeat_at')).end(), draining: draining.else(eb.ref('draining')).end() };
      })
      .where(
        'id',
        'in',
        entries.map(([id]) => id),
      )
      .where('gone', '=', 0)
      .returning('id')
      .execute();
    return new Set(rows.map((r) => r.id));
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
      const session = await tx
        .selectFrom('sessions')
        .select(['model_id', 'runtime_id', 'status'])
        .where('id', '=', sessionId)
        .executeTakeFirst();
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
        .where(
          'runtime_id',
          'in',
          runtimes.map((r) => r.id),
        )
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
    return rows.map(({ session_id, end_reason, ...runtime }) => ({
      sessionId: session_id,
      runtime,
      reason: end_reason ?? 'The session was ended.',
    }));
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
      await this.#db
        .updateTable('sessions')
        .set({ slot_released_at: this.#now() })
        .where('runtime_id', '=', runtime.id)
        .where('slot_released_at', 'is', null)
        .execute();
      const sessions = await this.#db
        .selectFrom('sessions')
        .select(['id', 'ready_at'])
        .where('runtime_id', '=', runtime.id)
        .where('status', '!=', 'ended')
        .execute();
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
