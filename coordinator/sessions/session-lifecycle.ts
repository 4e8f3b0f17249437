/**
 * What happens to a session across the coordinator's parts: placing it on a runtime (claim a
 * slot, then open it there; if the runtime refuses, it waits again) and ending it (mark it ended,
 * charge its last seconds, tell the runtime so every client hears the reason; the slot is free
 * once the runtime has let it go).
 */

import type { Logger } from '../../server-kit/log.ts';
import type { SessionMeter } from '../billing/session-meter.ts';
import type { RuntimeClient } from '../runtimes/runtime-client.ts';
import type { RuntimeRecord, RuntimeRegistry } from '../runtimes/runtime-registry.ts';
import type { SessionRecord, SessionStore } from './session-store.ts';

export class SessionLifecycle {
  constructor(
    readonly sessions: SessionStore,
    readonly registry: RuntimeRegistry,
    readonly runtimes: RuntimeClient,
    readonly meter: SessionMeter,
    readonly log: Logger,
  ) {}

  /** Puts a waiting session on a free slot and opens it there; undefined when none is free (yet). */
  async place(session: Pick<SessionRecord, 'id' | 'max_duration_seconds'>): Promise<RuntimeRecord | undefined> {
    const runtime = await this.registry.assign(session.id);
    if (!runtime) return undefined;
    try {
      await this.runtimes.startSession(runtime, session.id, session.max_duration_seconds);
      return runtime;
    } catch (error) {
      this.log.warn('runtime could not open the session; it waits for another slot', {
        session_id: session.id,
        runtime_id: runtime.id,
        error,
      });
      await this.registry.unassign(session.id, runtime.id);
      return undefined;
    }
  }

  /** Places every waiting session that fits now, oldest first. */
  async placeWaiting(): Promise<void> {
    for (const id of await this.registry.unplaced()) {
      const session = await this.sessions.get(id);
      if (session) await this.place(session);
    }
  }

  /**
   * Ends a session: it stops counting and billing now (its last seconds are charged at once), and
   * its runtime ends it too, telling every client `reason` — unless the runtime is who ended it.
   * Its slot is free once the runtime has let it go.
   */
  async end(sessionId: string, reason: string | undefined, options: { fromRuntime?: boolean } = {}): Promise<SessionRecord> {
    // The end and its final charge commit together: nobody reads it ended with seconds unbilled.
    const session = await this.sessions.get(sessionId);
    if (!session) return this.sessions.end(sessionId, reason); // (throws: no such session)
    await this.meter.endAndCharge(session.id, session.account_id, (tx) => this.sessions.endIn(tx, session.id, reason));
    const ended = (await this.sessions.get(sessionId))!;
    if (options.fromRuntime) {
      if (ended.runtime_id !== null) await this.registry.release(ended.id, ended.runtime_id);
    } else {
      await this.#tellRuntime(ended);
    }
    return ended;
  }

  /** After sessions were ended elsewhere (max duration, a dry account): charge them and tell their runtimes. */
  async ended(sessions: readonly SessionRecord[]): Promise<void> {
    for (const session of sessions) {
      await this.meter.flushSession(session.id, session.account_id);
      await this.#tellRuntime(session);
    }
  }

  /** Tells live runtimes again about ended sessions they have not let go (a failed or missed end). */
  async releaseLeftovers(): Promise<void> {
    for (const { sessionId, runtime, reason } of await this.registry.unreleased()) {
      if (await this.runtimes.endSession(runtime, sessionId, reason)) await this.registry.release(sessionId, runtime.id);
    }
  }

  async #tellRuntime(session: SessionRecord): Promise<void> {
    if (session.runtime_id === null) return;
    const runtime = await this.registry.get(session.runtime_id);
    // A gone runtime's slots were released when it was declared gone.
    if (!runtime || runtime.gone !== 0) return;
    if (await this.runtimes.endSession(runtime, session.id, session.end_reason ?? 'The session was ended.'))
      await this.registry.release(session.id, runtime.id);
  }
}
