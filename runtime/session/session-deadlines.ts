/**
 * When a session ends by itself: `idle_timeout` once no connection has been live for the
 * reconnect grace (a dropped client has that long to come back), `max_duration` that long after
 * it opened, and the hosted duration limit, counted from `ready` (where the coordinator counts
 * and bills from). Kept apart from the session so its timers are read, armed and cleared in one
 * place; the session says when (start, a connection ready or lost, end).
 */

/** Hosted mode: how long the session may run once `ready`, and what its clients are told at the end. */
export interface DurationLimit {
  readonly ms: number;
  readonly reason: string;
}

export interface SessionDeadlineOptions {
  /** A session with no live connection for this long ends (`idle_timeout`). */
  readonly reconnectGraceMs: number;
  /** Ends the session (`max_duration`) this long after it starts; undefined = no limit. */
  readonly maxDurationMs?: number | undefined;
  /** Hosted mode: the coordinator's maximum duration, from `ready` (startDurationLimit). */
  readonly durationLimit?: DurationLimit | undefined;
}

/** The longest delay setTimeout takes (~24.8 days); a longer one would fire at once. */
const MAX_TIMER_MS = 2 ** 31 - 1;

export class SessionDeadlines {
  readonly #options: SessionDeadlineOptions;
  /** Ends the session with a reason. */
  readonly #end: (reason: string) => void;
  /** How many connections are live (negotiating or ready) now. */
  readonly #liveConnections: () => number;
  readonly #ended: () => boolean;
  #idleTimer: NodeJS.Timeout | undefined;
  #maxDurationTimer: NodeJS.Timeout | undefined;
  #durationLimitTimer: NodeJS.Timeout | undefined;
  #durationLimitStarted = false;

  constructor(options: SessionDeadlineOptions, end: (reason: string) => void, liveConnections: () => number, ended: () => boolean) {
    this.#options = options;
    this.#end = end;
    this.#liveConnections = liveConnections;
    this.#ended = ended;
  }

  /** The session opened: its maximum duration starts, and so does the grace for a first client. */
  started(): void {
    if (this.#options.maxDurationMs !== undefined) {
      this.#maxDurationTimer = setTimeout(() => this.#end('max_duration'), this.#options.maxDurationMs);
    }
    this.armIdle();
  }

  /** With no live connection, the session ends after the reconnect grace unless one comes. */
  armIdle(): void {
    clearTimeout(this.#idleTimer);
    if (this.#ended() || this.#liveConnections() > 0) return;
    this.#idleTimer = setTimeout(() => {
      if (this.#liveConnections() === 0) this.#end('idle_timeout');
    }, this.#options.reconnectGraceMs);
  }

  /** A connection became ready: the session is not idle. */
  cancelIdle(): void {
    clearTimeout(this.#idleTimer);
  }

  /** See Session.startDurationLimit. */
  startDurationLimit(origin: number): void {
    const limit = this.#options.durationLimit;
    if (!limit || this.#durationLimitStarted || this.#ended()) return;
    this.#durationLimitStarted = true;
    const deadline = origin + limit.ms;
    // Re-armed in steps: a limit may exceed what one setTimeout can wait.
    const arm = (): void => {
      const wait = deadline - performance.now();
      if (wait <= 0) {
        this.#end(limit.reason);
        return;
      }
      this.#durationLimitTimer = setTimeout(arm, Math.min(wait, MAX_TIMER_MS));
    };
    arm();
  }

  /** The session is ending: no deadline fires any more. */
  clear(): void {
    clearTimeout(this.#idleTimer);
    clearTimeout(this.#maxDurationTimer);
    clearTimeout(this.#durationLimitTimer);
  }
}
