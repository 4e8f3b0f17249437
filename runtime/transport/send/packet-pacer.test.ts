import { describe, expect, it } from 'vitest';
import { PacketPacer } from './packet-pacer.ts';
import { TransportCongestion, TransportSendHistory } from './transport-feedback.ts';

/** A pacer on a manual clock whose timer fires when the test advances past it. */
function manualPacer(maxDelayMs = 250) {
  let now = 1000;
  let timer: { at: number; fn: () => void } | undefined;
  const pacer = new PacketPacer({
    now: () => now,
    maxDelayMs,
    setTimer: (fn, ms) => (timer = { at: now + ms, fn }),
    clearTimer: () => (timer = undefined),
  });
  const sent: Array<[number, number]> = [];
  const write = (packet: Buffer) => sent.push([now, packet[0]!]);
  const advance = (ms: number) => {
    const until = now + ms;
    while (timer && timer.at <= until) {
      now = Math.max(now, timer.at);
      const { fn } = timer;
      timer = undefined;
      fn();
    }
    now = until;
  };
  return { pacer, sent, write, advance, now: () => now };
}

describe('PacketPacer', () => {
  it('sends at once when not paced', () => {
    const { pacer, sent, write } = manualPacer();
    for (let i = 0; i < 5; i++) pacer.dispatch(pacer.reserve(1200, undefined), Buffer.from([i]), write);
    expect(sent).toEqual([0, 1, 2, 3, 4].map((i) => [1000, i]));
  });

  it('spreads a burst at the pacing rate, in order, and lets unpaced packets queue behind it', () => {
    const { pacer, sent, write, advance } = manualPacer();
    // 1,200 bytes at 960 kbit/s: one packet every 10 ms.
    const at = [0, 1, 2, 3].map(() => pacer.reserve(1200, 960_000));
    expect(at).toEqual([1000, 1010, 1020, 1030]);
    at.forEach((t, i) => pacer.dispatch(t, Buffer.from([i]), write));
    pacer.dispatch(pacer.reserve(100, undefined), Buffer.from([9]), write); // behind the paced ones
    expect(sent).toEqual([[1000, 0]]);
    advance(45);
    expect(sent).toEqual([
      [1000, 0],
      [1010, 1],
      [1020, 2],
      [1030, 3],
      [1040, 9], // when the paced ones have drained
    ]);
    expect(pacer.queued).toBe(0);
  });

  it('never holds a packet longer than its maximum delay', () => {
    const { pacer } = manualPacer(50);
    const at = Array.from({ length: 20 }, () => pacer.reserve(1200, 96_000)); // 100 ms a packet
    expect(Math.max(...at) - 1000).toBeLessThanOrEqual(50);
  });
});

describe('TransportCongestion pacing', () => {
  it('paces only when the receiver gives feedback and the target is near the rate sent', () => {
    let now = 0;
    const congestion = new TransportCongestion({ now: () => now, history: new TransportSendHistory(4096, 0), maxBps: 2_000_000 });
    for (let i = 0; i < 100; i++) {
      now += 10;
      congestion.send(1200); // 960 kbit/s
    }
    expect(congestion.pacingRateBps()).toBeUndefined(); // no feedback yet
    // Feedback for the first packets (all received): the controller is active; its target (2 Mbit/s) is above 1.2 × 0.96.
    congestion.onFeedback({
      baseSequenceNumber: 80,
      packetStatusCount: 20,
      referenceTime: 0,
      packetChunks: [{ runLength: 20, packetStatus: 1 }],
      recvDeltas: Array.from({ length: 20 }, () => ({ delta: 10_000 })),
    });
    expect(congestion.active()).toBe(true);
    expect(congestion.pacingRateBps()).toBeUndefined();
    const constrained = new TransportCongestion({ now: () => now, history: new TransportSendHistory(4096, 0), maxBps: 1_000_000 });
    for (let i = 0; i < 100; i++) {
      now += 10;
      constrained.send(1200);
    }
    constrained.onFeedback({
      baseSequenceNumber: 80,
      packetStatusCount: 20,
      referenceTime: 0,
      packetChunks: [{ runLength: 20, packetStatus: 1 }],
      recvDeltas: Array.from({ length: 20 }, () => ({ delta: 10_000 })),
    });
    expect(constrained.pacingRateBps()).toBe(2.5 * 1_000_000);
  });
});
