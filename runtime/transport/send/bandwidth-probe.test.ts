import { describe, expect, it } from 'vitest';
import { evaluateCluster, PROBE_RULES, ProbeScheduler, type ProbeOutcome, type ProbePacket } from './bandwidth-probe.ts';
import { TransportCongestion, type TransportWideFeedback } from './transport-feedback.ts';

/** `count` packets of `bytes` sent evenly at `sendBps` from t=0, arriving `spacing` apart (or at the send spacing). */
function cluster(count: number, bytes: number, sendBps: number, receiveBps?: number): ProbePacket[] {
  const sendGap = (bytes * 8 * 1000) / sendBps;
  const receiveGap = receiveBps === undefined ? sendGap : (bytes * 8 * 1000) / receiveBps;
  return Array.from({ length: count }, (_, i) => ({ sentAtMs: i * sendGap, bytes, arrivedAtMs: 500 + 20 + i * receiveGap }));
}

describe('evaluateCluster', () => {
  it('reads a cluster that arrived as fast as it left as the rate it was sent at', () => {
    const result = evaluateCluster(cluster(12, 1100, 2_000_000));
    expect(result.saturated).toBe(false);
    expect(result.bps).toBeCloseTo(2_000_000, -3);
  });

  it('reads one that arrived slower as a full link, at the rate that came through', () => {
    const result = evaluateCluster(cluster(12, 1100, 2_000_000, 1_000_000));
    expect(result.saturated).toBe(true);
    expect(result.bps).toBeCloseTo(1_000_000, -3);
    expect(result.sendBps).toBeCloseTo(2_000_000, -3);
  });

  it('gives no rate for arrivals bunched faster than twice the send rate (a stall let them out together)', () => {
    expect(evaluateCluster(cluster(12, 1100, 1_000_000, 2_500_000)).bps).toBeUndefined();
  });

  it('gives no rate when too few of its packets were reported received', () => {
    const packets = cluster(12, 1100, 2_000_000).map((p, i) => (i % 3 === 0 ? { ...p, arrivedAtMs: undefined } : p));
    expect(evaluateCluster(packets).bps).toBeUndefined(); // 8 of 12 < 80 %
    expect(evaluateCluster(cluster(4, 1100, 2_000_000)).bps).toBeUndefined(); // fewer than 5
  });
});

describe('ProbeScheduler', () => {
  const state = { targetBps: 1_000_000, ceilingBps: 10_000_000, sentBps: 900_000, lastDecreaseMs: -Infinity };

  it('probes at twice the estimate while the estimate binds and is under the ceiling, one at a time', () => {
    const scheduler = new ProbeScheduler();
    expect(scheduler.due(0, state)).toBe(2_000_000);
    expect(scheduler.due(1, state)).toBeUndefined(); // in flight
  });

  it('does not probe near the ceiling, for a sender under its estimate, or just after a decrease', () => {
    const scheduler = new ProbeScheduler();
    expect(scheduler.due(0, { ...state, targetBps: 9_500_000 })).toBeUndefined();
    expect(scheduler.due(0, { ...state, sentBps: 400_000 })).toBeUndefined();
    expect(scheduler.due(1_000, { ...state, lastDecreaseMs: 0 })).toBeUndefined();
    expect(scheduler.due(1_500, { ...state, lastDecreaseMs: 0 })).toBe(2_000_000);
    expect(new ProbeScheduler().due(0, { ...state, targetBps: 6_000_000, sentBps: 5_000_000 })).toBe(10_000_000);
  });

  it('probes again soon after a raise, and waits the interval after anything else', () => {
    const scheduler = new ProbeScheduler();
    scheduler.due(0, state);
    scheduler.finished(100, 'raised');
    expect(scheduler.due(100 + PROBE_RULES.afterRaiseMs - 1, state)).toBeUndefined();
    expect(scheduler.due(100 + PROBE_RULES.afterRaiseMs, state)).toBe(2_000_000);
    scheduler.finished(1_000, 'saturated');
    expect(scheduler.due(1_000 + PROBE_RULES.intervalMs - 1, state)).toBeUndefined();
    // After a probe that found the link full: a smaller one (less padding queued at a full link).
    expect(scheduler.due(1_000 + PROBE_RULES.intervalMs, state)).toBe(1_500_000);
  });

  it('backs off while the link stays full: the interval doubles per saturated probe in a row, up to the cap', () => {
    const scheduler = new ProbeScheduler();
    let now = 0;
    const gaps: number[] = [];
    scheduler.due(now, state);
    for (let i = 0; i < 4; i++) {
      scheduler.finished(now, 'saturated');
      const from = now;
      while (scheduler.due(now, state) === undefined) now += 100; // due() starts the next probe
      gaps.push(now - from);
    }
    expect(gaps).toEqual([2_000, 4_000, 4_000, 4_000]);
    // A probe that raises the estimate resets it.
    scheduler.finished(now, 'raised');
    scheduler.due(now + PROBE_RULES.afterRaiseMs, state);
    scheduler.finished(now + PROBE_RULES.afterRaiseMs, 'saturated');
    expect(scheduler.due(now + PROBE_RULES.afterRaiseMs + PROBE_RULES.intervalMs, state)).toBe(1_500_000);
    // One that got through without raising it (no_gain) brings back the full factor.
    scheduler.finished(now + 3_000, 'no_gain');
    expect(scheduler.due(now + 3_000 + PROBE_RULES.intervalMs, state)).toBe(2_000_000);
  });
});

/**
 * One connection's congestion control on a simulated link (an injected clock, no sockets): media at
 * 0.9 × the target in 30 fps bursts, the link's rate (fixed, or by the time) and 10 ms each way, feedback every 50 ms, and
 * probe padding sent by a stand-in sender through the same link.
 */
function simulate(
  link: number | ((nowMs: number) => number),
  seconds: number,
  padded = true,
  weightKbps?: number,
): { outcomes: ProbeOutcome[]; targets: number[]; congestion: TransportCongestion } {
  let now = 0;
  const timers: Array<{ at: number; fn: () => void }> = [];
  const congestion = new TransportCongestion({
    now: () => now,
    setTimer: (fn, ms) => timers.push({ at: now + ms, fn }),
    startBps: 1_000_000,
    maxBps: 8_000_000,
  });
  const arrivals = new Map<number, number>(); // unwrapped transport sequence → arrival (ms)
  let linkFreeAt = 0;
  const send = (bytes: number): void => {
    const sequence = congestion.history.nextSequence;
    congestion.send(bytes, now);
    const linkBps = typeof link === 'number' ? link : link(now);
    linkFreeAt = Math.max(now, linkFreeAt) + (bytes * 8 * 1000) / linkBps;
    arrivals.set(sequence, linkFreeAt + 10);
  };
  const outcomes: ProbeOutcome[] = [];
  const padding = {
    sendPadding: (): number => {
      send(1100);
      return 1100;
    },
    onProbe: (outcome: ProbeOutcome) => outcomes.push(outcome),
  };
  congestion.offerPadding(padding);
  if (!padded) congestion.withdrawPadding(padding);
  let reported = congestion.history.nextSequence;
  const targets: number[] = [];
  for (let tick = 0; tick < seconds * 1000; tick++) {
    now = tick;
    for (const timer of timers.splice(0).filter((t) => (t.at <= now ? true : (timers.push(t), false)))) timer.fn();
    if (tick % 33 === 0) {
      congestion.noteSender(padding, weightKbps);
      // One frame: 0.9 × the target, in packets of up to 1,100 bytes.
      let frameBytes = (0.9 * congestion.controller.targetBps) / 8 / 30;
      while (frameBytes > 0) {
        send(Math.min(1100, Math.max(200, frameBytes)));
        frameBytes -= 1100;
      }
    }
    if (tick % 50 === 0) {
      const next = congestion.history.nextSequence;
      const base = reported;
      let last = base;
      while (last < next && (arrivals.get(last) ?? Infinity) + 10 <= now) last++;
      if (last > base) {
        const deltas: Array<{ delta: number }> = [];
        let previousUs = 0;
        for (let s = base; s < last; s++) {
          const atUs = Math.round(arrivals.get(s)! * 1000);
          deltas.push({ delta: atUs - previousUs });
          previousUs = atUs;
        }
        const feedback: TransportWideFeedback = {
          baseSequenceNumber: base & 0xffff,
          packetStatusCount: last - base,
          referenceTime: 0,
          packetChunks: [{ runLength: last - base, packetStatus: 2 }],
          recvDeltas: deltas,
        };
        congestion.onFeedback(feedback, 20);
        reported = last;
      }
      targets.push(congestion.controller.targetBps);
    }
  }
  return { outcomes, targets, congestion };
}

describe('TransportCongestion probing', () => {
  it('on a wide link, jumps the estimate past what the encoder alone could show it (1.5 × acked), in a few probes', () => {
    const { outcomes, targets } = simulate(20_000_000, 3);
    expect(outcomes).toContain('raised');
    // Without probes the estimate climbs at 15 %/s and stops at 1.5 × the acked rate (~1.4 Mbit/s here).
    expect(Math.max(...targets)).toBeGreaterThan(4_000_000);
  });

  it('does not probe past what the tracks could use (their configured rates)', () => {
    const { outcomes, targets } = simulate(20_000_000, 3, true, 1_000);
    expect(outcomes).toContain('raised');
    // Ceiling: 1,000 kbit/s ÷ 0.9 + 10 % ≈ 1.22 Mbit/s; the estimate may still creep past it (1.5 × acked).
    expect(Math.max(...targets)).toBeLessThan(2_000_000);
  });

  it('on a link already full, finds it full and leaves the estimate near the link', () => {
    const { outcomes, targets } = simulate(1_100_000, 8);
    expect(outcomes.length).toBeGreaterThan(0);
    expect(outcomes).not.toContain('raised');
    expect(targets.at(-1)!).toBeLessThan(1_400_000);
  });

  it('after a cap lifts, a probe that finds the wider link full but far above the estimate probes again soon', () => {
    // 1 Mbit/s for 8 s (probes find it full), then 4 Mbit/s: a probe at twice the estimate is
    // received at the link's rate, slower than it left — full, yet 3 × the estimate. Counted as a
    // raise, the next probe goes 0.5 s later (not 2 s), and the estimate is near the link 5 s
    // after the lift.
    const lift = 8_000;
    const { outcomes, targets } = simulate((now) => (now < lift ? 1_000_000 : 4_000_000), 13, true, 5_000);
    expect(outcomes.slice(0, 3)).toEqual(['saturated', 'saturated', 'saturated']);
    expect(outcomes).toContain('raised');
    expect(targets.at(-1)!).toBeGreaterThanOrEqual(0.9 * 4_000_000);
    // Not past the link's edge.
    expect(Math.max(...targets.slice(lift / 50))).toBeLessThan(4_200_000);
  });

  it('paces a path that queues, not one whose probe got through since its last decrease', () => {
    // A full link: probes find it full, and the delay-based estimate keeps falling back to it.
    const full = simulate(1_100_000, 8).congestion;
    expect(full.pacingRateBps()).toBeGreaterThan(0);
    // A wide link whose tracks want ~1 Mbit/s: the estimate sits near the rate sent (under 1.2 ×
    // it, where pacing used to start), but a probe got through and nothing queued since.
    const wide = simulate(20_000_000, 3, true, 1_000).congestion;
    expect(wide.controller.targetBps).toBeLessThan(1.2 * wide.sentBps());
    expect(wide.pacingRateBps()).toBeUndefined();
  });

  it('without a sender to pad, does not probe, and the estimate climbs only as far as the media shows', () => {
    const { outcomes, targets } = simulate(20_000_000, 3, false);
    expect(outcomes).toEqual([]);
    expect(Math.max(...targets)).toBeLessThan(1_600_000);
  });
});
