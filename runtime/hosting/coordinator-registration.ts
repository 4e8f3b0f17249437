/**
 * Hosted mode as the runtime's composition holds it: the coordinator link (hosted/coordinator-link.ts)
 * can only exist once the server listens (it registers the runtime's URL) and the model has loaded,
 * but the session host reports to it from the start. This holds the link once there is one, and
 * until then answers as a runtime the coordinator has not heard of: nothing to report, nothing
 * to drain or stop.
 */

import type { Capabilities } from '../../protocol/capabilities.ts';
import type { Logger } from '../../server-kit/log.ts';
import { CoordinatorLink, type HostedOptions } from '../hosted/coordinator-link.ts';

/** What the coordinator is told about of a session (the runtime's Session meets it). */
export interface ReportedSession {
  readonly id: string;
  /** Starts the session's maximum-duration clock at `origin` (performance.now() time). */
  startDurationLimit(origin: number): void;
}

export class CoordinatorRegistration {
  readonly #options: HostedOptions;
  readonly #log: Logger;
  #link: CoordinatorLink | undefined;

  constructor(options: HostedOptions, log: Logger) {
    this.#options = options;
    this.#log = log;
  }

  /** The session host's events (SessionHostEvents): a session's first ready client, and its end. */
  readonly sessionEvents = {
    connectionReady: (session: ReportedSession): void => {
      // The coordinator's maximum duration counts from `ready` as the coordinator records
      // it (its ready_at, stamped when this report arrives), so the clock starts once the
      // report is acknowledged: the runtime's deadline then never comes before the
      // coordinator's. Unacknowledged, it counts from this moment (the coordinator does
      // not bill a session it never heard was ready).
      const readyAt = performance.now();
      void (this.#link?.sessionReady(session.id) ?? Promise.resolve(false)).then((acknowledged) =>
        session.startDurationLimit(acknowledged ? performance.now() : readyAt),
      );
    },
    ended: (session: ReportedSession, reason: string): void => this.#link?.sessionEnded(session.id, reason),
  };

  /** Registers with the coordinator (retrying until it answers), then heartbeats. */
  register(registration: { readonly url: string; readonly model: string; readonly capabilities: Capabilities }): void {
    this.#link = new CoordinatorLink(this.#options, registration, this.#log);
    this.#link.start();
  }

  /** Takes no new sessions; the coordinator hears at once. */
  async drain(): Promise<void> {
    await this.#link?.drain();
  }

  /** Stops heartbeating once the reports in flight have gone out, or after `graceMs`. */
  async stop(graceMs: number): Promise<void> {
    await this.#link?.stop(graceMs);
  }
}
