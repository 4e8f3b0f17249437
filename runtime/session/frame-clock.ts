/**
 * A drift-free frame clock: yields frame indices at a fixed rate, scheduling each tick against
 * the start time. When the consumer falls behind it skips to the current index rather than
 * firing a burst of late ticks. Ends when the signal aborts.
 */
export class FrameClock implements AsyncIterable<number> {
  readonly #intervalMs: number;
  readonly #signal: AbortSignal;

  constructor(fps: number, signal: AbortSignal) {
    if (!(fps > 0 && fps <= 1000)) throw new RangeError(`fps must be in (0, 1000]; got ${fps}`);
    this.#intervalMs = 1000 / fps;
    this.#signal = signal;
  }

  async *[Symbol.asyncIterator](): AsyncIterator<number> {
    const start = performance.now();
    let index = 0;
    while (!this.#signal.aborted) {
      yield index;
      const now = performance.now();
      index = Math.max(index + 1, Math.floor((now - start) / this.#intervalMs));
      const wait = start + index * this.#intervalMs - now;
      if (wait > 0) {
        const aborted = await sleep(wait, this.#signal);
        if (aborted) return;
      }
    }
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    const onAbort = () => {
      clearTimeout(timer);
      resolve(true);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve(false);
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
