/**
 * A video sender's FlexFEC repair packets (rtp-track-sender.ts, flexfec-sender.ts): when they go
 * (negotiated, the receiver NACKed lately, a path that loses without queueing, H.264) and what
 * they are on the wire (the FEC SSRC and payload type, SRTP-protected under the FEC SSRC, a
 * FlexFEC header naming the media SSRC and the frame's packets).
 */

import { describe, expect, it } from 'vitest';
import { RtpTrackSender } from './rtp-track-sender.ts';
import { SRTP_AEAD_AES_128_GCM } from './srtp-protector.ts';
import { existingTransportCongestion, TRANSPORT_WIDE_CC_URI, type TransportWideFeedback } from './transport-feedback.ts';
import { flexfecOf, withFlexfec } from '../signalling/flexfec-negotiation.ts';
import { connectedTransport, extensionsOf, videoTransceiverStandIn } from '../../../test/support/werift-sender-stand-in.ts';

const MEDIA_SSRC = 0x12345678;
const TRANSPORT_WIDE_ID = 3;

/**
 * An H.264 sender whose transceiver negotiated flexfec-03 (payload type 49), unless `negotiated`
 * is false; its track configured at `configuredKbps` (default 1 Mbit/s: the estimate, 10 Mbit/s
 * until the path says less, has room for repairs).
 */
function fecSender(negotiated = true, configuredKbps: number | 'unknown' = 1_000) {
  const { transport, wire, receiver } = connectedTransport(SRTP_AEAD_AES_128_GCM);
  const { transceiver, nack } = videoTransceiverStandIn(transport, {
    ssrc: MEDIA_SSRC,
    codec: { payloadType: 102, mimeType: 'video/H264' },
    headerExtensions: [{ id: TRANSPORT_WIDE_ID, uri: TRANSPORT_WIDE_CC_URI }],
  });
  if (negotiated) {
    const offer = 'v=0\r\nm=video 9 UDP/TLS/RTP/SAVPF 102 49\r\na=mid:0\r\na=rtpmap:49 flexfec-03/90000\r\n';
    const answer = `v=0\r\nm=video 9 UDP/TLS/RTP/SAVPF 102\r\na=mid:0\r\na=sendonly\r\na=rtpmap:102 H264/90000\r\na=ssrc:${MEDIA_SSRC} cname:x\r\n`;
    withFlexfec(answer, offer, [{ transceiver, mid: '0' }]);
  }
  let now = 10_000;
  const sender = new RtpTrackSender(transceiver, {
    latencyMode: () => 'realtime',
    setTimer: () => {},
    clock: () => now,
    ...(configuredKbps === 'unknown' ? {} : { shareWeight: configuredKbps }),
  });
  /** Feedback on every packet on the wire so far, all received (the connection's estimate counts from then on). */
  const reportAll = () => {
    const numbered = wire.filter((p) => extensionsOf(p).has(TRANSPORT_WIDE_ID));
    const from = extensionsOf(numbered[0]!).get(TRANSPORT_WIDE_ID)!.readUInt16BE(0);
    const feedback: TransportWideFeedback = {
      baseSequenceNumber: from,
      packetStatusCount: numbered.length,
      referenceTime: 0,
      packetChunks: [{ runLength: numbered.length, packetStatus: 1 }],
      recvDeltas: numbered.map(() => ({ delta: 1000 })),
    };
    existingTransportCongestion(transport)!.onFeedback(feedback);
  };
  return {
    sender,
    wire,
    receiver,
    transceiver,
    reportAll,
    nack,
    advance: (ms: number) => void (now += ms),
    /** A frame, feedback on it, a NACK of its first packet, and a second gone: repairs may start. */
    nackedASecondAgo: () => {
      sender.sendFrame(frame(3, 1), 0);
      reportAll();
      nack([wire[0]!.readUInt16BE(2)]);
      now += 1_000;
    },
  };
}

const frame = (count: number, fill: number): Buffer[] => Array.from({ length: count }, (_, i) => Buffer.alloc(900 + i, fill));

describe('RtpTrackSender: FlexFEC repair packets', () => {
  it('follows each frame with one repair packet per group of up to 8, once the receiver has NACKed for a second on a path that does not queue', () => {
    const { sender, wire, receiver, transceiver, reportAll, nack, advance } = fecSender();
    const fec = flexfecOf(transceiver)!;
    sender.sendFrame(frame(3, 1), 0);
    reportAll();
    sender.sendFrame(frame(3, 2), 3000);
    expect(wire.every((p) => p.readUInt32BE(8) === MEDIA_SSRC)).toBe(true); // no NACK yet: no repair packets
    nack([wire[0]!.readUInt16BE(2)]);
    advance(500);
    sender.sendFrame(frame(3, 3), 6000);
    expect(sender.repairPacketsSent).toBe(0); // a first drop may be a bottleneck's: not yet
    advance(500);
    wire.length = 0;
    sender.sendFrame(frame(10, 3), 9000);
    // 10 packets: two groups (5 + 5), a repair packet each, after the frame.
    expect(wire).toHaveLength(12);
    const media = wire.slice(0, 10);
    const repairs = wire.slice(10);
    expect(sender.repairPacketsSent).toBe(2);
    for (const [g, repair] of repairs.entries()) {
      expect(repair.readUInt32BE(8)).toBe(fec.ssrc);
      expect(repair[1]! & 0x7f).toBe(fec.payloadType);
      expect(repair[0]! & 0x10).toBe(0); // no extensions: no transport-wide number
      const clear = receiver.decrypt(Buffer.from(repair));
      const header = clear.subarray(12);
      expect(header.readUInt32BE(12)).toBe(MEDIA_SSRC);
      expect(header.readUInt16BE(16)).toBe(media[g * 5]!.readUInt16BE(2)); // SN base: the group's first
      expect(header.readUInt16BE(18)).toBe(0x8000 | (0x1f << 10)); // k0 + five packets
    }
    // Every datagram within the 1,200-byte budget's arithmetic: a repair packet of 900-byte payloads.
    expect(Math.max(...repairs.map((r) => r.length))).toBeLessThan(1200);
  });

  it('sends none where flexfec-03 was not negotiated, or before any NACK', () => {
    const { sender, wire, nackedASecondAgo } = fecSender(false);
    nackedASecondAgo();
    sender.sendFrame(frame(3, 2), 3000);
    expect(sender.repairPacketsSent).toBe(0);
    expect(wire.filter((p) => p.readUInt32BE(8) !== MEDIA_SSRC && (p[1]! & 0x7f) !== 102)).toHaveLength(0);
  });

  it('sends none while the estimate binds the encoder, though the rate sent so far is far under it', () => {
    // Configured at 9 Mbit/s (or unknown): at a 10 Mbit/s estimate the encoder takes 9 — no room for
    // repairs, though the few packets sent so far (the rate before a raise reaches the wire) are far under it.
    for (const configuredKbps of [9_000, 'unknown'] as const) {
      const { sender, nackedASecondAgo } = fecSender(true, configuredKbps);
      nackedASecondAgo();
      sender.sendFrame(frame(10, 2), 3000);
      expect(sender.repairPacketsSent).toBe(0);
    }
  });
});
