/**
 * A clock that moves only when told to: the model test harness runs `session.ticks()` and its
 * simulated output pacing on it, so a test decides exactly which frames happen, and nothing
 * depends on how fast the machine running the test is.
 */

import type { Clock } from '../session/clock.ts';

interface Sleeper {
  readonly dueAt: number;
  /** Creation order: sleepers due at the same moment wake in the order they began to wait. */
  readonly order: number;
  readonly wake: (aborted: boolean) => void;
}

/** A `Clock` at 0 that moves only through `moveTo`; its sleepers wake in due order. */
export class ManualClock implements Clock {
  #now = 0;
  #order = 0;
  #sleepers: Sleeper[] = [];
  #waitsBegun = 0;

  /** Milliseconds since the clock was made, as far as it has been moved. */
  now(): number {
    return this.#now;
  }

  /** Resolves `false` once the clock is moved to `now() + ms` or past it; `true` at once if `signal` aborts first. */
  sleep(ms: number, signal: AbortSignal): Promise<boolean> {
    if (signal.aborted) return Promise.resolve(true);
    this.#waitsBegun++;
    return new Promise((resolve) => {
      const sleeper: Sleeper = {
        dueAt: this.#now + Math.max(0, ms),
        order: this.#order++,
        wake: (aborted) => {
          signal.removeEventListener('abort', onAbort);
          resolve(aborted);
        },
      };
      const onAbort = (): void => {
        this.#sleepers = this.#sleepers.filter((s) => s !== sleeper);
        sleeper.wake(true);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.#sleepers.push(sleeper);
    });
  }

  /** How many waits have begun so far: a new one means the code under test did something. */
  get waitsBegun(): number {
    return this.#waitsBegun;
  }

  /** When the earliest sleeper is due, if it is due by `until`. */
  nextDue(until: number): number | undefined {
    let next: number | undefined;
    for (const sleeper of this.#sleepers) if (sleeper.dueAt <= until && (next === undefined || sleeper.dueAt < next)) next = sleeper.dueAt;
    return next;
  }

  /**
   * Moves the clock to `to` (never backwards) and wakes every sleeper due by then, earliest
   * first. The caller lets the woken code run before it moves the clock again.
   */
  moveTo(to: number): void {
    this.#now = Math.max(this.#now, to);
    const due = this.#sleepers.filter((s) => s.dueAt <= this.#now).sort((a, b) => a.dueAt - b.dueAt || a.order - b.order);
    if (due.length === 0) return;
    this.#sleepers = this.#sleepers.filter((s) => s.dueAt > this.#now);
    for (const sleeper of due) sleeper.wake(false);
  }
}
