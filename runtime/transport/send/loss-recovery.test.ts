import { describe, expect, it } from 'vitest';
import type { RTCRtpTransceiver } from 'werift';
import { KeyframeRequestThrottle, LOSS_RECOVERY, RetransmissionBudget, SendRateMeter, type LossRecoveryRules } from './loss-recovery.ts';
import { RtpTrackSender } from './rtp-track-sender.ts';

/** A clock that moves only when told. */
function manualClock(start = 10_000): { now: () => number; advance(ms: number): void } {
  let t = start;
  return { now: () => t, advance: (ms) => void (t += ms) };
}

const PACKET = 1_200;

describe('SendRateMeter', () => {
  it('is the bytes of the last window as a rate', () => {
    const meter = new SendRateMeter(1_000);
    for (let i = 0; i < 30; i++) meter.note(i * 33, 10_000); // 300 kB in ~1 s
    expect(meter.bitsPerSecond(990)).toBe(300_000 * 8);
    expect(meter.bitsPerSecond(1_500)).toBe(14 * 10_000 * 8); // the frames sent at 0–495 ms left the window
    expect(meter.bitsPerSecond(5_000)).toBe(0);
  });
});

describe('SendRateMeter memory', () => {
  it('keeps only the window, however long it runs without being read (no NACK, no loss)', () => {
    const meter = new SendRateMeter(1_000);
    // An hour of 30 fps with no NACK: only note() is called.
    for (let i = 0; i < 30 * 3_600; i++) meter.note(i * 33.4, 5_000);
    expect(meter.entries).toBeLessThanOrEqual(2 * 31 + 64);
    expect(meter.bitsPerSecond(30 * 3_600 * 33.4)).toBeGreaterThan(0);
  });
});

describe('RetransmissionBudget', () => {
  it('resends within a share of the media rate, and refuses the rest (the token bucket)', () => {
    const clock = manualClock();
    const budget = new RetransmissionBudget(LOSS_RECOVERY, clock.now);
    // 2.4 Mbit/s of media for 2 s: 40 packets a second of 7.5 kB.
    for (let i = 0; i < 80; i++) {
      clock.advance(25);
      budget.noteMediaSent(7_500);
    }
    expect(budget.rateBps()).toBe(0.25 * 2_400_000);
    // 4 s more of the same media, and every 100 ms NACKs for 100 packets (a bottleneck
    // dropping most of what is sent, and the resends too).
    let resent = 0;
    let refused = 0;
    for (let step = 0; step < 40; step++) {
      for (let i = 0; i < 4; i++) {
        clock.advance(25);
        budget.noteMediaSent(7_500);
      }
      for (let i = 0; i < 100; i++) {
        const reason = budget.admit({ bytes: PACKET, sentAtMs: clock.now() - 50, resentAtMs: undefined });
        if (reason === undefined) resent++;
        else {
          expect(reason).toBe('budget');
          refused++;
        }
      }
    }
    // 4 s at 600 kbit/s = 300 kB, plus at most one full bucket (1 s of it) to start with.
    const allowed = (4 * 0.25 * 2_400_000) / 8 + ((LOSS_RECOVERY.budgetDepthMs / 1000) * 0.25 * 2_400_000) / 8;
    expect(resent * PACKET).toBeLessThanOrEqual(allowed);
    expect(resent * PACKET).toBeGreaterThan((0.8 * (4 * 0.25 * 2_400_000)) / 8);
    expect(refused).toBe(4_000 - resent);
  });

  it('takes the receiver estimate (REMB) as the basis where it is below the media rate, with a floor', () => {
    const clock = manualClock();
    const budget = new RetransmissionBudget(LOSS_RECOVERY, clock.now);
    for (let i = 0; i < 40; i++) {
      clock.advance(25);
      budget.noteMediaSent(7_500);
    }
    expect(budget.rateBps({ receiverEstimateBps: 800_000 })).toBe(200_000);
    expect(budget.rateBps({ receiverEstimateBps: 100_000_000 })).toBe(0.25 * 2_400_000);
    expect(budget.rateBps({ receiverEstimateBps: 100_000 })).toBe(64_000); // the floor
    clock.advance(5_000); // nothing sent for a while
    expect(budget.rateBps()).toBe(64_000);
  });

  it('resends a packet at most once per RTT (RTCP) + 5 ms, or the default RTT before one was measured', () => {
    const clock = manualClock();
    const budget = new RetransmissionBudget({ ...LOSS_RECOVERY, minBudgetDepthBytes: 1_000_000 }, clock.now);
    const sentAtMs = clock.now();
    clock.advance(30);
    const resentAtMs = clock.now();
    const rtt = { rttMs: 80 };
    clock.advance(84);
    expect(budget.admit({ bytes: PACKET, sentAtMs, resentAtMs }, rtt)).toBe('within_rtt');
    clock.advance(1);
    expect(budget.admit({ bytes: PACKET, sentAtMs, resentAtMs }, rtt)).toBeUndefined();
    // No RTT yet: 200 ms.
    expect(budget.admit({ bytes: PACKET, sentAtMs, resentAtMs: clock.now() - 204 })).toBe('within_rtt');
    expect(budget.admit({ bytes: PACKET, sentAtMs, resentAtMs: clock.now() - 205 })).toBeUndefined();
    // Never resent: no RTT rule.
    expect(budget.admit({ bytes: PACKET, sentAtMs: clock.now(), resentAtMs: undefined }, rtt)).toBeUndefined();
  });

  it('does not resend a packet older than max(1 s, 3 × RTT)', () => {
    const clock = manualClock();
    const budget = new RetransmissionBudget({ ...LOSS_RECOVERY, minBudgetDepthBytes: 1_000_000 }, clock.now);
    const now = clock.now();
    expect(budget.admit({ bytes: PACKET, sentAtMs: now - 1_000, resentAtMs: undefined }, { rttMs: 100 })).toBeUndefined();
    expect(budget.admit({ bytes: PACKET, sentAtMs: now - 1_001, resentAtMs: undefined }, { rttMs: 100 })).toBe('too_old');
    expect(budget.admit({ bytes: PACKET, sentAtMs: now - 1_400, resentAtMs: undefined }, { rttMs: 500 })).toBeUndefined();
    expect(budget.admit({ bytes: PACKET, sentAtMs: now - 1_501, resentAtMs: undefined }, { rttMs: 500 })).toBe('too_old');
  });
});

describe('KeyframeRequestThrottle', () => {
  it('lets a picture-loss report through at most once per max(300 ms, RTT)', () => {
    const clock = manualClock();
    const throttle = new KeyframeRequestThrottle(LOSS_RECOVERY, clock.now);
    expect(throttle.pictureLost(50)).toBe(true);
    clock.advance(299);
    expect(throttle.pictureLost(50)).toBe(false);
    clock.advance(1);
    expect(throttle.pictureLost(50)).toBe(true);
    clock.advance(400);
    expect(throttle.pictureLost(450)).toBe(false); // a long RTT: the keyframe is still on its way
    clock.advance(50);
    expect(throttle.pictureLost(450)).toBe(true);
  });

  it('asks for a keyframe for an unrepaired loss at most once per max(1 s, 2 × RTT), and that counts for PLIs too', () => {
    const clock = manualClock();
    const throttle = new KeyframeRequestThrottle(LOSS_RECOVERY, clock.now);
    expect(throttle.lossUnrepaired(100)).toBe(true);
    clock.advance(100);
    expect(throttle.pictureLost(100)).toBe(false);
    clock.advance(899);
    expect(throttle.lossUnrepaired(100)).toBe(false);
    clock.advance(1);
    expect(throttle.lossUnrepaired(100)).toBe(true);
    clock.advance(1_500);
    expect(throttle.lossUnrepaired(800)).toBe(false);
    clock.advance(100);
    expect(throttle.lossUnrepaired(800)).toBe(true);
  });
});

describe('RtpTrackSender keyframe requests', () => {
  /** Just what the constructor and `pictureLost` read of werift's transceiver. */
  function fakeTransceiver(sender: { rtt?: number; receiverEstimatedMaxBitrate: bigint }): RTCRtpTransceiver {
    return {
      sender: { ...sender, kind: 'video', onGenericNack: { subscribe: () => ({ unSubscribe: () => {} }) } },
      headerExtensions: [],
      mid: '0',
      codecs: [],
    } as unknown as RTCRtpTransceiver;
  }

  it('throttles PLIs by the RTT RTCP measured, and counts the ones it ignored', () => {
    const clock = manualClock();
    let throttled = 0;
    const rules: LossRecoveryRules = LOSS_RECOVERY;
    const sender = new RtpTrackSender(fakeTransceiver({ rtt: 0.6, receiverEstimatedMaxBitrate: 0n }), {
      clock: clock.now,
      lossRecovery: rules,
      onKeyframeRequestThrottled: () => throttled++,
    });
    expect(sender.pictureLost()).toBe(true);
    clock.advance(500);
    expect(sender.pictureLost()).toBe(false); // within the 600 ms RTT
    clock.advance(100);
    expect(sender.pictureLost()).toBe(true);
    expect(throttled).toBe(1);
    expect(sender.lossRecovery.keyframeRequestsThrottled).toBe(1);
  });
});
