/**
 * The time source of the network lab: a clock that reads milliseconds and runs a callback at a
 * given time. Real runs use `systemClock` (performance.now + setTimeout); unit tests use a
 * `ManualClock` they advance by hand, so shaping is tested without the wall clock.
 */

export interface LabClock {
  /** Milliseconds on a monotonic scale. */
  now(): number;
  /** Runs `callback` at `at` (ms on this clock) or as soon after as possible; returns a cancel. */
  at(at: number, callback: () => void): () => void;
}

/** performance.now() and unref'd timers: a pending datagram never keeps a process alive. */
export const systemClock: LabClock = {
  now: () => performance.now(),
  at(at, callback) {
    const timer = setTimeout(callback, Math.max(0, at - performance.now()));
    timer.unref();
    return () => clearTimeout(timer);
  },
};

/** A clock that moves only when `advance` is called; callbacks run in time order. */
export class ManualClock implements LabClock {
  #now: number;
  #seq = 0;
  readonly #timers = new Map<number, { readonly at: number; readonly seq: number; readonly callback: () => void }>();

  constructor(start = 0) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  at(at: number, callback: () => void): () => void {
    const seq = this.#seq++;
    this.#timers.set(seq, { at: Math.max(at, this.#now), seq, callback });
    return () => this.#timers.delete(seq);
  }

  /** Moves time forward by `ms`, running every callback due on the way at its own time. */
  advance(ms: number): void {
    const end = this.#now + ms;
    for (;;) {
      let next: { readonly at: number; readonly seq: number; readonly callback: () => void } | undefined;
      for (const timer of this.#timers.values()) {
        if (timer.at <= end && (next === undefined || timer.at < next.at || (timer.at === next.at && timer.seq < next.seq))) next = timer;
      }
      if (next === undefined) break;
      this.#timers.delete(next.seq);
      this.#now = next.at;
      next.callback();
    }
    this.#now = end;
  }

  /** Callbacks waiting. */
  get pending(): number {
    return this.#timers.size;
  }
}

/**
 * A seeded uniform [0, 1) source (mulberry32): the same seed gives the same drops, so a
 * scenario's loss pattern can be repeated exactly.
 */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
