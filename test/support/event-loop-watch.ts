/**
 * Watches this process's event loop: how late a short timer fires, tick by tick. For tests whose
 * whole path (runtime, coordinator, client) runs in this process: time the loop was held up
 * during a span is time no part of that path could run, so a latency bound can allow for it
 * instead of failing on a loaded machine — while a slow path (batching, polling) still fails.
 */
export interface EventLoopWatch {
  /** How long, in all, the loop was held up past its ticks within [fromMs, toMs] (Date.now() clock). */
  lateBetween(fromMs: number, toMs: number): number;
  /** The sum, over every stall, of its length beyond `thresholdMs` (ms). */
  lateBeyond(thresholdMs: number): number;
  /** The longest single hold-up (ms). */
  readonly maxLateMs: number;
  stop(): void;
}

export function watchEventLoop(tickMs = 10): EventLoopWatch {
  /** Each hold-up: it ran from `at - late` to `at` (Date.now() ms). */
  const stalls: Array<{ at: number; late: number }> = [];
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    const late = now - last - tickMs;
    last = now;
    if (late > 1) stalls.push({ at: Date.now(), late });
  }, tickMs);
  timer.unref();
  return {
    lateBetween(fromMs, toMs) {
      let total = 0;
      for (const { at, late } of stalls) total += Math.max(0, Math.min(at, toMs) - Math.max(at - late, fromMs));
      return total;
    },
    lateBeyond(thresholdMs) {
      return stalls.reduce((sum, { late }) => sum + Math.max(0, late - thresholdMs), 0);
    },
    get maxLateMs() {
      return stalls.reduce((max, { late }) => Math.max(max, late), 0);
    },
    stop() {
      clearInterval(timer);
    },
  };
}
