/**
 * The shaping logic on a manual clock and a seeded random source: loss (random and bursty),
 * delay, jitter with and without reordering, the cap with its bounded queue, and changes while
 * running. No wall clock, no sockets.
 */

import { describe, expect, it } from 'vitest';
import { ManualClock, seededRandom } from './clock.ts';
import { histogramQuantile } from './histogram.ts';
import { ImpairedLink } from './impaired-link.ts';
import { burstLoss, burstLossFigures, type LinkImpairment } from './impairment.ts';
import { NetworkLab } from './network-lab.ts';
import type { RelayedDatagram } from './udp-relay.ts';

interface Arrival {
  readonly seq: number;
  readonly sentAt: number;
  readonly at: number;
}

function rig(settings: LinkImpairment = {}, seed = 1) {
  const clock = new ManualClock();
  const arrivals: Arrival[] = [];
  const link = new ImpairedLink<{ seq: number; sentAt: number }>({
    clock,
    random: seededRandom(seed),
    deliver: (p) => arrivals.push({ ...p, at: clock.now() }),
    settings,
  });
  let seq = 0;
  /** Sends `count` datagrams of `bytes`, one every `everyMs`, advancing the clock. */
  const stream = (count: number, bytes: number, everyMs: number): void => {
    for (let i = 0; i < count; i++) {
      link.send({ seq: seq++, sentAt: clock.now() }, bytes);
      clock.advance(everyMs);
    }
  };
  return { clock, link, arrivals, stream };
}

/** Lengths of the runs of consecutive missing sequence numbers. */
function lossRuns(arrivals: readonly Arrival[], sent: number): number[] {
  const got = new Set(arrivals.map((a) => a.seq));
  const runs: number[] = [];
  let run = 0;
  for (let seq = 0; seq < sent; seq++) {
    if (got.has(seq)) {
      if (run > 0) runs.push(run);
      run = 0;
    } else run++;
  }
  if (run > 0) runs.push(run);
  return runs;
}

describe('ImpairedLink', () => {
  it('passes everything at once on a clean link, and counts it', () => {
    const { link, arrivals, stream } = rig();
    stream(100, 1_000, 1);
    expect(arrivals.map((a) => a.at - a.sentAt)).toEqual(new Array(100).fill(0));
    expect(link.counters).toMatchObject({
      packetsIn: 100,
      bytesIn: 100_000,
      delivered: 100,
      bytesDelivered: 100_000,
      droppedRandom: 0,
      inFlight: 0,
    });
  });

  it('drops about lossPercent of the datagrams at random, independently', () => {
    const { link, arrivals, stream } = rig({ lossPercent: 2 });
    stream(20_000, 100, 0);
    const lost = link.counters.droppedRandom;
    expect(lost / 20_000).toBeGreaterThan(0.016);
    expect(lost / 20_000).toBeLessThan(0.024);
    expect(arrivals).toHaveLength(20_000 - lost);
    // Independent: bursts are rare (P(run ≥ 3) ≈ 0.02² per loss).
    expect(lossRuns(arrivals, 20_000).filter((run) => run >= 3).length).toBeLessThan(5);
  });

  it('Gilbert–Elliott: burstLoss({ 5 %, mean burst 3 }) loses ~5 % in runs averaging ~3', () => {
    const model = burstLoss({ meanLossPercent: 5, meanBurst: 3 });
    expect(model.r).toBeCloseTo(1 / 3);
    expect(model.p).toBeCloseTo(0.05 / 3 / 0.95);
    expect(burstLossFigures(model).meanLoss).toBeCloseTo(0.05);
    const { link, arrivals, stream } = rig({ burstLoss: model }, 7);
    stream(100_000, 100, 0);
    const lost = link.counters.droppedBurst;
    expect(lost / 100_000).toBeGreaterThan(0.04);
    expect(lost / 100_000).toBeLessThan(0.06);
    const runs = lossRuns(arrivals, 100_000);
    const meanRun = runs.reduce((a, b) => a + b, 0) / runs.length;
    expect(meanRun).toBeGreaterThan(2.6);
    expect(meanRun).toBeLessThan(3.4);
    expect(link.counters.droppedRandom).toBe(0);
  });

  it('delays each datagram by delayMs, in order', () => {
    const { clock, link, arrivals, stream } = rig({ delayMs: 20 });
    stream(10, 500, 5);
    clock.advance(100);
    expect(arrivals.map((a) => a.at - a.sentAt)).toEqual(new Array(10).fill(20));
    expect(link.counters.inFlight).toBe(0);
  });

  it('jitter without reordering: delays within delay ± jitter, order kept', () => {
    const { clock, link, arrivals, stream } = rig({ delayMs: 30, jitterMs: 10 });
    stream(2_000, 500, 2);
    clock.advance(100);
    const delays = arrivals.map((a) => a.at - a.sentAt);
    expect(arrivals.map((a) => a.seq)).toEqual([...Array(2_000).keys()]);
    expect(Math.min(...delays)).toBeGreaterThanOrEqual(20);
    expect(Math.max(...delays)).toBeLessThanOrEqual(40);
    expect(new Set(delays.map(Math.round)).size).toBeGreaterThan(5);
    expect(link.counters.reordered).toBe(0);
  });

  it('jitter with reordering: each datagram at its own time (datagrams overtake), delays within delay ± jitter', () => {
    const { clock, link, arrivals, stream } = rig({ delayMs: 30, jitterMs: 10, reorder: true });
    stream(2_000, 500, 2);
    clock.advance(100);
    const delays = arrivals.map((a) => a.at - a.sentAt);
    expect(arrivals).toHaveLength(2_000);
    expect(Math.min(...delays)).toBeGreaterThanOrEqual(20);
    expect(Math.max(...delays)).toBeLessThanOrEqual(40);
    expect(link.counters.reordered).toBeGreaterThan(100);
    expect(arrivals.map((a) => a.at)).toEqual([...arrivals.map((a) => a.at)].sort((a, b) => a - b));
  });

  it('caps the rate: a 2 Mbit/s stream through a 1 Mbit/s cap delivers 1 Mbit/s, the queue fills to its limit and tail-drops', () => {
    // 1,000-byte datagrams every 4 ms = 2 Mbit/s offered for 2 s.
    const { clock, link, arrivals, stream } = rig({ capMbps: 1, queueMs: 100 });
    expect(link.queueLimitBytes).toBe(12_500);
    stream(500, 1_000, 4);
    // Delivered in the second half (queue full by then): 8 ms a datagram at 1 Mbit/s.
    const late = arrivals.filter((a) => a.at >= 1_000 && a.at < 2_000);
    expect(late.length).toBeGreaterThanOrEqual(124);
    expect(late.length).toBeLessThanOrEqual(126);
    const c = link.counters;
    expect(c.maxQueueBytes).toBeLessThanOrEqual(12_500);
    expect(c.maxQueueBytes).toBeGreaterThanOrEqual(11_000);
    expect(c.droppedQueue).toBeGreaterThan(200);
    expect(c.delivered + c.droppedQueue + c.inFlight).toBe(500);
    // Queueing delay reaches the queue's length in time, never beyond (+ one datagram's serialisation).
    expect(c.queueDelay.maxMs).toBeLessThanOrEqual(108);
    expect(c.queueDelay.maxMs).toBeGreaterThan(90);
    // 12 datagrams fit the 12,500-byte queue: 96 ms of serialisation ahead of the last one.
    expect(histogramQuantile(c.queueDelay, 0.95)).toBe(96);
    clock.advance(1_000);
    expect(link.counters.inFlight).toBe(0);
  });

  it('a queueBytes limit wins over queueMs', () => {
    const { link, stream } = rig({ capMbps: 1, queueMs: 1_000, queueBytes: 3_000 });
    stream(10, 1_000, 0);
    expect(link.counters).toMatchObject({ droppedQueue: 7, maxQueueBytes: 3_000 });
  });

  it('a cap change applies at once: 4 → 1 → 4 Mbit/s, the rate follows each step', () => {
    const { clock, link, arrivals } = rig({ capMbps: 4, queueMs: 200 });
    // Offer 5 Mbit/s (1,250-byte datagrams every 2 ms) for 3 s; the cap steps at 1 s and 2 s.
    let seq = 0;
    for (let t = 0; t < 3_000; t += 2) {
      if (t === 1_000) link.set({ capMbps: 1 });
      if (t === 2_000) link.set({ capMbps: 4 });
      link.send({ seq: seq++, sentAt: clock.now() }, 1_250);
      clock.advance(2);
    }
    const mbps = (from: number, to: number) => (arrivals.filter((a) => a.at >= from && a.at < to).length * 1_250 * 8) / ((to - from) * 1e3);
    expect(mbps(300, 1_000)).toBeCloseTo(4, 1);
    // The queue drains at the new rate: 1 Mbit/s from the step on.
    expect(mbps(1_000, 2_000)).toBeCloseTo(1, 1);
    expect(mbps(2_300, 3_000)).toBeCloseTo(4, 1);
    expect(link.settings.capMbps).toBe(4);
  });

  it('removing the cap lets the queue out at once', () => {
    const { clock, link, arrivals, stream } = rig({ capMbps: 1, queueMs: 500 });
    stream(20, 1_250, 0); // 20 × 10 ms of serialisation
    clock.advance(15);
    expect(arrivals).toHaveLength(1);
    link.set({ capMbps: null });
    expect(arrivals).toHaveLength(20);
  });

  it('rejects settings out of range', () => {
    const { link } = rig();
    expect(() => link.set({ lossPercent: 101 })).toThrow(RangeError);
    expect(() => link.set({ capMbps: 0 })).toThrow(RangeError);
    expect(() => link.set({ burstLoss: { p: 0.1, r: 0 } })).toThrow(RangeError);
    expect(() => burstLoss({ meanLossPercent: 5, meanBurst: 0.5 })).toThrow(RangeError);
  });
});

describe('NetworkLab.schedule', () => {
  it('applies each step at its time, per direction', async () => {
    const clock = new ManualClock();
    const lab = await NetworkLab.start({ clientSideAddress: '127.0.0.1', clock, random: seededRandom(3) });
    const running = lab.schedule([
      { at: 25_000, down: { capMbps: 4 } },
      { at: 0, down: { capMbps: 4 }, up: { delayMs: 20 } },
      { at: 10_000, down: { capMbps: 1 } },
    ]);
    expect(lab.settings.down.capMbps).toBe(4);
    expect(lab.settings.up.delayMs).toBe(20);
    clock.advance(9_999);
    expect(lab.settings.down.capMbps).toBe(4);
    clock.advance(1);
    expect(lab.settings.down.capMbps).toBe(1);
    expect(lab.settings.up).toMatchObject({ delayMs: 20, capMbps: null });
    clock.advance(15_000);
    expect(lab.settings.down.capMbps).toBe(4);
    await running.done;
    await lab.close();
  });

  it('cancel stops the steps still to come', async () => {
    const clock = new ManualClock();
    const lab = await NetworkLab.start({ clientSideAddress: '127.0.0.1', clock });
    const running = lab.schedule([{ at: 1_000, down: { lossPercent: 50 } }]);
    running.cancel();
    clock.advance(2_000);
    expect(lab.settings.down.lossPercent).toBe(0);
    await running.done;
    await lab.close();
  });
});

describe('NetworkLab seed', () => {
  /** The indexes of the first `count` down-link datagrams that the lab dropped, with `upBetween` up-link datagrams sent between each. */
  async function downDrops(upBetween: number, count = 400): Promise<number[]> {
    const lab = await NetworkLab.start({
      clientSideAddress: '127.0.0.1',
      clock: new ManualClock(),
      seed: 41,
      down: { lossPercent: 5 },
      up: { lossPercent: 5 },
    });
    const sink = { send: () => undefined } as unknown as RelayedDatagram['via'];
    const datagram: RelayedDatagram = { data: Buffer.alloc(100), via: sink, to: { address: '127.0.0.1', port: 9 } };
    const drops: number[] = [];
    for (let i = 0; i < count; i++) {
      const before = lab.down.counters.droppedRandom;
      lab.down.send(datagram, 100);
      if (lab.down.counters.droppedRandom > before) drops.push(i);
      for (let j = 0; j < upBetween; j++) lab.up.send(datagram, 100);
    }
    await lab.close();
    return drops;
  }

  it("gives each direction its own stream: the down link's drops do not depend on the up link's traffic", async () => {
    const alone = await downDrops(0);
    expect(alone.length).toBeGreaterThan(5);
    expect(await downDrops(3)).toEqual(alone);
  });
});
