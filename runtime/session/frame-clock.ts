import { systemClock, type Clock } from './clock.ts';

/**
 * A drift-free frame clock: yields frame indices at a fixed rate, scheduling each tick against
 * the start time. When the consumer falls behind it skips to the current index rather than
 * firing a burst of late ticks. Ends when the signal aborts.
 */
export class FrameClock implements AsyncIterable<number> {
  readonly #intervalMs: number;
  readonly #signal: AbortSignal;
  readonly #clock: Clock;

  /** `clock`: the runtime's own by default; the test harness passes one that tests advance. */
  constructor(fps: number, signal: AbortSignal, clock: Clock = systemClock) {
    if (!(fps > 0 && fps <= 1000)) throw new RangeError(`fps must be in (0, 1000]; got ${fps}`);
    this.#intervalMs = 1000 / fps;
    this.#signal = signal;
    this.#clock = clock;
  }

  async *[Symbol.asyncIterator](): AsyncIterator<number> {
    const start = this.#clock.now();
    let index = 0;
    while (!this.#signal.aborted) {
      yield index;
      const now = this.#clock.now();
      index = Math.max(index + 1, Math.floor((now - start) / this.#intervalMs));
      const wait = start + index * this.#intervalMs - now;
      if (wait > 0) {
        const aborted = await this.#clock.sleep(wait, this.#signal);
        if (aborted) return;
      }
    }
  }
}
