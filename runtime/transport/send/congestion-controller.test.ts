import { describe, expect, it } from 'vitest';
import { CongestionController, DelayTrend, type PacketFeedback } from './congestion-controller.ts';

/**
 * A synthetic path: a sender that sends 30 frames a second at the controller's target (at most
 * `encoderMaxBps`), in 1,200-byte packets, through one FIFO bottleneck of a given capacity with
 * a 200 ms tail-drop queue and 20 ms propagation; the receiver reports every 100 ms.
 */
class SimulatedPath {
  readonly controller: CongestionController;
  capacityBps: number;
  lossFraction = 0;
  readonly encoderMaxBps: number;
  /** The encoder's share of the target (the runtime's takes 0.9 × it). */
  encoderShare = 1;
  now = 0;
  #linkFreeAt = 0;
  #pending: Array<PacketFeedback & { reportAt: number }> = [];
  #nextFrameAt = 0;
  #nextFeedbackAt = 100;
  #random = 1;
  /** Target after each feedback: [time ms, bit/s]. */
  readonly trace: Array<[number, number]> = [];

  constructor(capacityBps: number, encoderMaxBps: number) {
    this.capacityBps = capacityBps;
    this.encoderMaxBps = encoderMaxBps;
    this.controller = new CongestionController({ minBps: 50_000, maxBps: 10_000_000 });
  }

  #rand(): number {
    this.#random = (this.#random * 16807) % 2147483647;
    return this.#random / 2147483647;
  }

  run(untilMs: number): void {
    while (this.now < untilMs) {
      const next = Math.min(this.#nextFrameAt, this.#nextFeedbackAt);
      this.now = next;
      if (next === this.#nextFrameAt) {
        this.#sendFrame();
        this.#nextFrameAt += 1000 / 30;
      } else {
        this.#feedback();
        this.#nextFeedbackAt += 100;
      }
    }
  }

  #sendFrame(): void {
    const rate = Math.min(this.encoderMaxBps, this.encoderShare * this.controller.targetBps);
    let bytes = Math.round(rate / 8 / 30);
    while (bytes > 0) {
      const size = Math.min(1200, bytes);
      bytes -= size;
      const sentAtMs = this.now;
      const queueMs = Math.max(0, this.#linkFreeAt - sentAtMs);
      let arrivedAtMs: number | undefined;
      if (queueMs > 200 || this.#rand() < this.lossFraction) {
        arrivedAtMs = undefined;
      } else {
        const start = Math.max(sentAtMs, this.#linkFreeAt);
        this.#linkFreeAt = start + (size * 8 * 1000) / this.capacityBps;
        arrivedAtMs = this.#linkFreeAt + 20;
      }
      this.#pending.push({ sentAtMs, bytes: size, arrivedAtMs, reportAt: (arrivedAtMs ?? sentAtMs + 220) + 1 });
    }
  }

  #feedback(): void {
    const due = this.#pending.filter((p) => p.reportAt <= this.now);
    this.#pending = this.#pending.filter((p) => p.reportAt > this.now);
    if (due.length > 0) this.controller.onFeedback(due, this.now + 20, 40);
    this.trace.push([this.now, this.controller.targetBps]);
  }

  /** The first time at or after `fromMs` the target was ≤ `bps`. */
  firstAtOrBelow(bps: number, fromMs: number): number | undefined {
    return this.trace.find(([t, v]) => t >= fromMs && v <= bps)?.[0];
  }

  firstAtOrAbove(bps: number, fromMs: number): number | undefined {
    return this.trace.find(([t, v]) => t >= fromMs && v >= bps)?.[0];
  }
}

/**
 * One feedback's worth of `count` 1,000-byte packets sent evenly over 100 ms from `t`, each
 * arriving 20 ms after it left (no delay signal), every `lostEvery`-th lost.
 */
function evenPackets(t: number, count: number, lostEvery: number): PacketFeedback[] {
  const spacing = 100 / count;
  return Array.from({ length: count }, (_, i) => ({
    sentAtMs: t + i * spacing,
    bytes: 1000,
    arrivedAtMs: i % lostEvery === 0 ? undefined : t + i * spacing + 20,
  }));
}

describe('CongestionController', () => {
  it('holds the rate on a path with room to spare', () => {
    const path = new SimulatedPath(10_000_000, 2_500_000);
    path.run(20_000);
    // Never lowered below what the encoder sends: no false overuse on a clean path.
    expect(Math.min(...path.trace.map(([, v]) => v))).toBeGreaterThanOrEqual(2_500_000);
  });

  it('falls under a capacity drop within 2 s and climbs back when it lifts', () => {
    const path = new SimulatedPath(4_000_000, 2_500_000);
    path.run(10_000);
    expect(path.controller.targetBps).toBeGreaterThanOrEqual(2_500_000);
    path.capacityBps = 1_000_000;
    path.run(25_000);
    const under = path.firstAtOrBelow(1_000_000, 10_000);
    expect(under).toBeDefined();
    expect(under! - 10_000).toBeLessThanOrEqual(2_000); // 20 feedback intervals
    // It stays near the capacity while capped: under it, and not collapsed.
    const capped = path.trace.filter(([t]) => t >= 15_000 && t < 25_000).map(([, v]) => v);
    expect(Math.max(...capped)).toBeLessThanOrEqual(1_300_000);
    expect(Math.min(...capped)).toBeGreaterThanOrEqual(400_000);
    path.capacityBps = 4_000_000;
    path.run(40_000);
    const back = path.firstAtOrAbove(0.8 * 2_500_000, 25_000);
    expect(back).toBeDefined();
    expect(back! - 25_000).toBeLessThanOrEqual(10_000);
  });

  it('takes a probe that found the link full as its capacity: 0.95 × it when the estimate is lower, never a decrease', () => {
    const path = new SimulatedPath(1_000_000, 5_000_000);
    path.run(10_000);
    // Capped: a probe that measures the same link raises the delay-based estimate at most to
    // 0.95 × it, and not past the capacity's upper bound.
    const delayBefore = path.controller.delayBasedBps;
    expect(delayBefore).toBeLessThan(1_100_000);
    path.controller.onSaturatedProbe(1_000_000, path.now);
    expect(path.controller.delayBasedBps).toBe(Math.max(delayBefore, 950_000));
    // The link widens to 4 Mbit/s: a probe arrives at 4 Mbit/s, and the estimate goes to 0.95 × it
    // at once (additive increase near the old capacity would take tens of seconds).
    path.capacityBps = 4_000_000;
    path.run(10_500);
    expect(path.controller.onSaturatedProbe(4_000_000, path.now)).toBe(true);
    expect(path.controller.targetBps).toBe(3_800_000);
    // A later probe that measured less lowers nothing the sender uses.
    expect(path.controller.onSaturatedProbe(2_000_000, path.now)).toBe(false);
    expect(path.controller.targetBps).toBe(3_800_000);
  });

  it('brings a delay-based estimate left high down to a capacity a probe measured — never the target — and climbs no higher for a while', () => {
    const controller = new CongestionController({ startBps: 5_000_000 });
    // 25 packets per 100 ms (2 Mbit/s sent), arriving evenly: no delay signal.
    const packets = (t: number, lostEvery: number) => evenPackets(t, 25, lostEvery);
    // 20 % loss: the loss-based estimate falls and binds; the delay-based one stays where it was.
    let t = 0;
    for (; t < 2_000; t += 100) controller.onFeedback(packets(t, 5), t + 120);
    const target = controller.targetBps;
    expect(target).toBeLessThan(2_500_000);
    expect(controller.delayBasedBps).toBeGreaterThan(2 * target);
    // A probe finds the link full at 2.6 Mbit/s: the delay-based estimate comes down to that
    // capacity's upper bound (2.6 Mbit/s + 3 deviations), the target stays.
    expect(controller.onSaturatedProbe(2_600_000, t)).toBe(false);
    expect(controller.targetBps).toBe(target);
    const upper = controller.delayBasedBps;
    expect(upper).toBeGreaterThan(2_600_000);
    expect(upper).toBeLessThan(2_900_000);
    // The loss stops (2 Mbit/s gets through, under the capacity): the delay-based estimate stays at
    // the bound while the measurement is fresh (5 s), then climbs again.
    const measuredAt = t;
    for (; t < measuredAt + 4_500; t += 100) controller.onFeedback(packets(t, 1_000), t + 120);
    expect(controller.delayBasedBps).toBe(upper);
    for (; t < measuredAt + 8_000; t += 100) controller.onFeedback(packets(t, 1_000), t + 120);
    expect(controller.delayBasedBps).toBeGreaterThan(upper);
  });

  it('brings an estimate the sender never used down to what it used by its second decrease, not by halves', () => {
    // An encoder at 0.9 × the target, capped at 2.5 Mbit/s, under an estimate at its 10 Mbit/s start.
    const path = new SimulatedPath(4_000_000, 2_500_000);
    path.encoderShare = 0.9;
    path.run(10_000);
    expect(path.controller.targetBps).toBe(10_000_000);
    path.capacityBps = 1_000_000;
    path.run(12_000);
    const decreases = path.trace.filter(([t], i) => t >= 10_000 && path.trace[i]![1] < path.trace[i - 1]![1]).map(([, v]) => v);
    // The first halves the estimate (one overuse alone may be a blip: on a wide path it costs the
    // encoder nothing); the second, the path still saying overuse, halves only the estimate in use
    // (1.5 × what got through + 10 kbit/s) — not 5 → 2.5 Mbit/s.
    expect(decreases[0]).toBe(5_000_000);
    expect(decreases[1]).toBeLessThan(2_000_000);
  });

  it('lowers the rate on heavy loss and raises it again when the loss stops', () => {
    // Capacity to spare: the delay stays flat, only the loss speaks.
    const path = new SimulatedPath(50_000_000, 2_500_000);
    path.run(3_000);
    const before = path.controller.targetBps;
    path.lossFraction = 0.2;
    path.run(6_000);
    expect(path.controller.lossFraction).toBeGreaterThan(0.1);
    expect(path.controller.lossBasedBps).toBeLessThan(before);
    expect(path.controller.targetBps).toBeLessThan(2_500_000);
    const low = path.controller.targetBps;
    path.lossFraction = 0.01;
    path.run(16_000);
    expect(path.controller.targetBps).toBeGreaterThan(low * 1.5);
  });

  it('holds between 2 % and 10 % loss', () => {
    const controller = new CongestionController({ startBps: 1_000_000 });
    const packets = (t: number, lostEvery: number) => evenPackets(t, 40, lostEvery);
    for (let t = 0; t < 3000; t += 100) controller.onFeedback(packets(t, 20), t + 120); // 5 %
    expect(controller.lossFraction).toBeCloseTo(0.05, 2);
    expect(controller.lossBasedBps).toBe(10_000_000); // untouched from its start
  });
});

describe('DelayTrend', () => {
  it('signals overuse when each group arrives later than the one before, not on jitter', () => {
    const trend = new DelayTrend();
    let usage = trend.usage;
    // 30 groups, 33 ms apart, arriving with ±3 ms of jitter: normal.
    for (let i = 0; i < 30; i++) usage = trend.packet(i * 33, i * 33 + 20 + ((i * 7) % 7) - 3);
    expect(usage).toBe('normal');
    // Then a queue builds: each group 5 ms later than the one before.
    let overuseAt: number | undefined;
    for (let i = 30; i < 80; i++) {
      usage = trend.packet(i * 33, i * 33 + 20 + (i - 30) * 5);
      if (usage === 'overusing' && overuseAt === undefined) overuseAt = i;
    }
    expect(overuseAt).toBeDefined();
    expect(overuseAt! - 30).toBeLessThan(20);
  });
});
