import { describe, expect, it } from 'vitest';
import { RtcpHeader, RtcpTransportLayerFeedback, TransportWideCC } from 'werift';
import { IcePolicy } from './ice-policy.ts';
import { createRuntimePeer } from './peer-factory.ts';

/**
 * libwebrtc's transport-wide feedback names the SSRC of the last packet it received: after an
 * RTX packet (a resend, a probe's padding) that is the RTX SSRC. werift's router keys senders by
 * their media SSRC only and dropped such feedback, so the congestion controller never heard of
 * the packets it covered; the runtime's peers route the RTX SSRC to the same sender.
 */
describe('transport-wide feedback that names a sender’s RTX SSRC', () => {
  it('reaches that sender', async () => {
    const pc = createRuntimePeer({ icePolicy: new IcePolicy({ hostAddresses: ['127.0.0.1'] }), iceServers: [] });
    try {
      const transceiver = pc.addTransceiver('video', { direction: 'sendonly' });
      const sender = transceiver.sender;
      const seen: unknown[] = [];
      sender.onRtcp.subscribe((packet) => seen.push(packet));
      // One packet (sequence 0) received 1 ms after the reference time, as a receiver would send it.
      const feedback = (mediaSourceSsrc: number) => {
        const body = Buffer.alloc(20);
        body.writeUInt32BE(1, 0); // sender SSRC
        body.writeUInt32BE(mediaSourceSsrc, 4);
        body.writeUInt16BE(0, 8); // base sequence number
        body.writeUInt16BE(1, 10); // status count
        body.writeUIntBE(0, 12, 3); // reference time
        body.writeUInt16BE(0b0_01_0000000000001, 16); // run-length chunk: 1 × small delta
        body[18] = 4; // +1 ms
        const header = new RtcpHeader({ type: RtcpTransportLayerFeedback.type, count: TransportWideCC.count });
        return new RtcpTransportLayerFeedback({ header, feedback: TransportWideCC.deSerialize(body, header) });
      };
      const router = (pc as unknown as { router: { routeRtcp(packet: unknown): void } }).router;
      router.routeRtcp(feedback(sender.ssrc));
      router.routeRtcp(feedback(sender.rtxSsrc));
      expect(seen).toHaveLength(2);
    } finally {
      await pc.close();
    }
  });
});
