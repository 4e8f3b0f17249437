/**
 * The time source of the model-facing clocks (`session.ticks()`, the output pacing a harness
 * simulates): the runtime runs them on `performance.now()` and real timers, the model test
 * harness (`arclight/testing`) on a clock that moves only when a test advances it.
 */
export interface Clock {
  /** Milliseconds on a monotonic scale (only differences mean anything). */
  now(): number;
  /** Waits `ms`; resolves `true` if `signal` aborted first (the wait is then abandoned), else `false`. */
  sleep(ms: number, signal: AbortSignal): Promise<boolean>;
}

/** `performance.now()` and `setTimeout`: the runtime's clock. */
export const systemClock: Clock = {
  now: () => performance.now(),
  sleep: (ms, signal) =>
    new Promise((resolve) => {
      if (signal.aborted) return resolve(true);
      const onAbort = (): void => {
        clearTimeout(timer);
        resolve(true);
      };
      const timer = setTimeout(() => {
        signal.removeEventListener('abort', onAbort);
        resolve(false);
      }, ms);
      signal.addEventListener('abort', onAbort, { once: true });
    }),
};
