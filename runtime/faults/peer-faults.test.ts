import { describe, expect, it } from 'vitest';
import type { RTCPeerConnection } from 'werift';
import { applyPeerFaults, rtpLossFault } from './peer-faults.ts';

function fakePeer() {
  const transports = [{}, {}];
  return { pc: { dtlsTransports: transports } as unknown as RTCPeerConnection, transports };
}

describe('applyPeerFaults', () => {
  it('gives every DTLS transport an RTP loss draw at the given share', () => {
    const { pc, transports } = fakePeer();
    let i = 0;
    // Deterministic "random": every 4th packet draws below 0.25.
    applyPeerFaults(pc, { outboundRtpLossPercent: 25 }, () => (i++ % 4 === 3 ? 0.1 : 0.9));
    const drops = Array.from({ length: 8 }, () => rtpLossFault(transports[0]!)!());
    expect(drops).toEqual([false, false, false, true, false, false, false, true]);
    expect(rtpLossFault(transports[1]!)).toBeTypeOf('function');
  });

  it('a second call replaces the first instead of stacking', () => {
    const { pc, transports } = fakePeer();
    applyPeerFaults(pc, { outboundRtpLossPercent: 25 }, () => 0.9);
    applyPeerFaults(pc, { outboundRtpLossPercent: 100 }, () => 0.9);
    expect(rtpLossFault(transports[0]!)!()).toBe(true);
  });

  it('does nothing without faults or with 0 %', () => {
    for (const faults of [undefined, {}, { outboundRtpLossPercent: 0 }]) {
      const { pc, transports } = fakePeer();
      applyPeerFaults(pc, faults, () => 0);
      expect(rtpLossFault(transports[0]!)).toBeUndefined();
    }
  });
});
