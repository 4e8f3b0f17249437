/**
 * The adaptive pacer on simulated time: a producer that hands over chunks after each step (held
 * while the pacer says the stream is full, as the block policy holds it) and a pump that sends each
 * frame at its slot. Deterministic — no wall clock.
 */

import { describe, expect, it } from 'vitest';
import { AdaptivePacer } from './adaptive-pacer.ts';

interface Sent {
  readonly at: number;
  /** When its batch was handed over. */
  readonly emittedAt: number;
  readonly step: number;
}

interface Run {
  readonly sent: readonly Sent[];
  readonly pacer: AdaptivePacer;
  /** Per step: when it was handed over and how long the producer was held first. */
  readonly handovers: ReadonlyArray<{ at: number; heldMs: number }>;
}

/**
 * Simulates `durationMs` of a step producer: step k takes `stepMs(k)` and yields `frames(k)`
 * frames; it is handed over when the pacer has room, and the next step starts then.
 */
function simulate(options: {
  stepMs: (k: number) => number;
  frames?: (k: number) => number;
  durationMs: number;
  minFps?: number;
  maxFps?: number;
}): Run {
  const pacer = new AdaptivePacer({ minFps: options.minFps ?? 1, maxFps: options.maxFps ?? 60 });
  const framesOf = options.frames ?? (() => 4);
  const queue: Array<{ emittedAt: number; step: number }> = [];
  const sent: Sent[] = [];
  const handovers: Array<{ at: number; heldMs: number }> = [];
  let step = 0;
  let ready = options.stepMs(0); // when step 0's chunk is ready
  let now = 0;
  while (now < options.durationMs) {
    const nextSend = queue.length > 0 ? pacer.slot(now) : Infinity;
    // The producer hands over once its chunk is ready and the stream has room (checked at each event).
    const canHand = now >= ready && !pacer.full(now, queue.length);
    if (canHand) {
      const n = framesOf(step);
      pacer.produced(n, options.stepMs(step), now, queue.length);
      for (let i = 0; i < n; i++) queue.push({ emittedAt: now, step });
      handovers.push({ at: now, heldMs: now - ready });
      step++;
      ready = now + options.stepMs(step);
      continue;
    }
    const next = Math.min(nextSend, now >= ready ? Infinity : ready);
    if (next === Infinity) throw new Error('stuck');
    now = next;
    if (queue.length > 0 && now >= pacer.slot(now) && nextSend <= now) {
      const frame = queue.shift()!;
      pacer.sent(now, now);
      sent.push({ at: now, emittedAt: frame.emittedAt, step: frame.step });
    }
  }
  return { sent, pacer, handovers };
}

const intervals = (sent: readonly Sent[]): number[] => sent.slice(1).map((s, i) => s.at - sent[i]!.at);
const mean = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
function p95(xs: readonly number[]): number {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.95))]!;
}

describe('AdaptivePacer', () => {
  it('plays 4 frames every 250 ms evenly at 16 fps, each frame within one step of its emit', () => {
    const { sent, pacer } = simulate({ stepMs: () => 250, durationMs: 20_000 });
    const steady = sent.filter((s) => s.at > 3_000);
    const gaps = intervals(steady);
    const m = mean(gaps);
    expect(m).toBeCloseTo(62.5, 1);
    expect(p95(gaps.map((g) => Math.abs(g - m)))).toBeLessThan(1);
    expect(Math.max(...steady.map((s) => s.at - s.emittedAt))).toBeLessThanOrEqual(250);
    expect(pacer.stats.fps).toBeCloseTo(16, 1);
    expect(pacer.stats.productionFps).toBeCloseTo(16, 5);
  });

  it('keeps chunk boundaries smooth when step times vary ±10 %', () => {
    // A fixed pseudo-random sequence: 225–275 ms.
    let seed = 7;
    const times: number[] = [];
    for (let k = 0; k < 200; k++) {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      times.push(225 + (seed / 2 ** 31) * 50);
    }
    const { sent, pacer } = simulate({ stepMs: (k) => times[k % times.length]!, durationMs: 30_000 });
    const gaps = intervals(sent.filter((s) => s.at > 3_000));
    const m = mean(gaps);
    expect(m).toBeGreaterThan(58);
    expect(m).toBeLessThan(67);
    // No chunk-boundary gap of a fixed pacer (145 ms): every gap within a third of the mean.
    expect(Math.max(...gaps)).toBeLessThan(m * 1.34);
    expect(p95(gaps.map((g) => Math.abs(g - m)))).toBeLessThan(10);
    expect(pacer.stats.cushionMs).toBeGreaterThan(4);
  });

  it('follows a step time that doubles within 2 s, without a stall longer than a step, and latency stays within a step', () => {
    const { sent } = simulate({ stepMs: (k) => (k < 40 ? 250 : 500), durationMs: 25_000 });
    const change = 40 * 250;
    const after = sent.filter((s) => s.at > change + 2_000);
    expect(mean(intervals(after))).toBeGreaterThan(123);
    expect(mean(intervals(after))).toBeLessThan(127);
    expect(Math.max(...intervals(sent.filter((s) => s.at > change - 1_000)))).toBeLessThanOrEqual(500);
    expect(Math.max(...after.map((s) => s.at - s.emittedAt))).toBeLessThanOrEqual(500);
  });

  it('follows a step time that halves within 2 s, holding the producer rather than building latency', () => {
    const { sent, handovers } = simulate({ stepMs: (k) => (k < 40 ? 250 : 125), durationMs: 20_000 });
    const change = 40 * 250;
    const after = sent.filter((s) => s.at > change + 2_000);
    expect(mean(intervals(after))).toBeCloseTo(31.25, 0);
    // Latency never exceeds about one (old) step plus a frame, at the switch or after.
    expect(Math.max(...sent.filter((s) => s.at > change).map((s) => s.at - s.emittedAt))).toBeLessThan(250 + 63);
    expect(Math.max(...after.map((s) => s.at - s.emittedAt))).toBeLessThanOrEqual(125);
    // Once caught up, the producer is not held.
    expect(handovers.filter((h) => h.at > change + 3_000).every((h) => h.heldMs < 1)).toBe(true);
  });

  it('does not take a changed step time for jitter: the cushion stays small across the change', () => {
    for (const after of [500, 500.5, 125]) {
      const pacer = new AdaptivePacer({ minFps: 1, maxFps: 60 });
      let t = 0;
      for (let i = 0; i < 20; i++) pacer.produced(4, 250, (t += 250), 0);
      for (let i = 0; i < 8; i++) {
        pacer.produced(4, after, (t += after), 0);
        expect(pacer.cushionMs, `after ${i + 1} samples of ${after} ms`).toBeLessThan(10);
      }
      expect(pacer.stats.productionFps).toBeCloseTo(4000 / after, 5);
    }
  });

  it('weighs chunks of varying size by their frames', () => {
    // 4, 8, 4, 8 … frames, each chunk in 40 ms per frame: 25 fps. (A 4-frame chunk lasts 160 ms
    // and the 8-frame one after it takes 320 ms: a gap follows, since the cushion stays within
    // one frame interval to keep latency within a step.)
    const { sent, pacer } = simulate({
      stepMs: (k) => (k % 2 === 0 ? 160 : 320),
      frames: (k) => (k % 2 === 0 ? 4 : 8),
      durationMs: 20_000,
    });
    expect(pacer.stats.productionFps).toBeCloseTo(25, 5);
    const steady = sent.filter((s) => s.at > 3_000);
    expect(mean(intervals(steady))).toBeCloseTo(40, 0);
    expect(Math.max(...steady.map((s) => s.at - s.emittedAt))).toBeLessThanOrEqual(320);
  });

  it('never plays faster than maxFps: a fast producer is held to it', () => {
    const { sent, pacer, handovers } = simulate({ stepMs: () => 20, durationMs: 10_000, maxFps: 24 });
    expect(pacer.stats.fps).toBe(24);
    expect(mean(intervals(sent.filter((s) => s.at > 2_000)))).toBeCloseTo(1000 / 24, 0);
    expect(handovers.at(-1)!.heldMs).toBeGreaterThan(0);
    // The estimate is the producer's own rate, its held time excluded.
    expect(pacer.stats.productionFps).toBeCloseTo(200, 0);
  });

  it('never plays slower than minFps', () => {
    const { pacer } = simulate({ stepMs: () => 2_000, frames: () => 1, durationMs: 20_000, minFps: 2 });
    expect(pacer.stats.fps).toBe(2);
  });

  it('counts an underrun when a batch comes after the stream ran dry, and restarts a cushion later', () => {
    const pacer = new AdaptivePacer({ minFps: 1, maxFps: 30 });
    pacer.produced(2, 100, 0, 0);
    expect(pacer.stats.fps).toBeCloseTo(20, 5);
    const first = pacer.slot(0);
    pacer.sent(first, first);
    const second = pacer.slot(first);
    expect(second - first).toBeCloseTo(pacer.intervalMs, 5);
    pacer.sent(second, second);
    // The next batch is late: the stream ran dry.
    pacer.produced(2, 300, 400, 0);
    expect(pacer.stats.underruns).toBe(1);
    expect(pacer.slot(400)).toBeGreaterThan(400);
    expect(pacer.slot(400)).toBeLessThanOrEqual(400 + pacer.intervalMs);
    pacer.reset();
    expect(pacer.slot(500)).toBe(500);
  });

  it('refuses a range that is not one', () => {
    expect(() => new AdaptivePacer({ minFps: 0, maxFps: 30 })).toThrow(RangeError);
    expect(() => new AdaptivePacer({ minFps: 10, maxFps: 5 })).toThrow(RangeError);
  });
});
