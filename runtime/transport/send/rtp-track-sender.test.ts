import { describe, expect, it } from 'vitest';
import type { RTCRtpTransceiver } from 'werift';
import { BaseRtt, ntpTimestamp } from './rtp-header.ts';
import { RtpTrackSender } from './rtp-track-sender.ts';
import { SRTP_AEAD_AES_128_GCM, SRTP_AES128_CM_HMAC_SHA1_80 } from './srtp-protector.ts';
import { TRANSPORT_WIDE_CC_URI } from './transport-feedback.ts';
import { connectedTransport, extensionsOf, rtpHeaderLengthOf, senderCounters } from '../../../test/support/werift-sender-stand-in.ts';

describe('ntpTimestamp', () => {
  it('is seconds since 1900 and a binary fraction of the second', () => {
    const atMs = 1234.5;
    const unixMs = performance.timeOrigin + atMs;
    const ntp = ntpTimestamp(atMs);
    const seconds = Number(ntp >> 32n);
    const fraction = Number(ntp & 0xffffffffn) / 2 ** 32;
    expect(seconds).toBe(Math.floor(unixMs / 1000) + 2_208_988_800);
    expect((seconds - 2_208_988_800 + fraction) * 1000).toBeCloseTo(unixMs, 3);
  });

  it('keeps sub-millisecond steps (werift 0.24.4 had whole seconds)', () => {
    const a = ntpTimestamp(10_000);
    const b = ntpTimestamp(10_020);
    const stepMs = (Number(b - a) / 2 ** 32) * 1000;
    expect(stepMs).toBeCloseTo(20, 3);
  });
});

describe('RtpTrackSender frame hook', () => {
  /** A negotiated transceiver whose DTLS is not up yet: what the constructor and sendFrame read. */
  function unconnectedTransceiver(): RTCRtpTransceiver {
    return {
      sender: {
        kind: 'video',
        ssrc: 1234,
        codec: { payloadType: 96, mimeType: 'video/H264' },
        dtlsTransport: { state: 'connecting', srtpStarted: false },
        onGenericNack: { subscribe: () => ({ unSubscribe: () => {} }) },
      },
      headerExtensions: [],
      mid: '0',
      codecs: [],
    } as unknown as RTCRtpTransceiver;
  }

  it('reports every frame handed to sendFrame, sent or not (what media_stats counts), after it is handled', () => {
    let frames = 0;
    const sender = new RtpTrackSender(unconnectedTransceiver(), { onFrameSent: () => frames++ });
    expect(sender.sendFrame([Buffer.alloc(10)], 0)).toBeUndefined();
    expect(sender.sendFrame([], 3000)).toBeUndefined();
    expect(frames).toBe(2);
    sender.close();
    expect(sender.sendFrame([Buffer.alloc(10)], 6000)).toBeUndefined();
    expect(frames).toBe(3);
  });
});

describe('RtpTrackSender packets on the wire (pooled: the send history slab, one reused batch)', () => {
  /** A connected video sender whose packets go to `wire` (copied as they leave) and whose NACKs `nack` delivers. */
  function connectedSender(
    profile: number,
    { rtx = false, latency = 'realtime' }: { rtx?: boolean; latency?: 'realtime' | 'smooth' } = {},
  ) {
    const { transport, wire, receiver } = connectedTransport(profile);
    let onNack: ((nack: { header: { length?: number }; lost: number[] }) => void) | undefined;
    const transceiver = {
      sender: {
        kind: 'video',
        ssrc: 0x12345678,
        codec: { payloadType: 96, mimeType: 'video/H264' },
        dtlsTransport: transport,
        onGenericNack: {
          subscribe: (listener: typeof onNack) => {
            onNack = listener;
            return { unSubscribe: () => {} };
          },
        },
        ...senderCounters(),
      },
      headerExtensions: [
        { id: 4, uri: 'http://www.webrtc.org/experiments/rtp-hdrext/playout-delay' },
        ...(rtx
          ? [
              { id: 1, uri: 'urn:ietf:params:rtp-hdrext:sdes:mid' },
              { id: 3, uri: TRANSPORT_WIDE_CC_URI },
            ]
          : []),
      ],
      mid: '0',
      // As werift negotiated them from an offer with RTX: rtx/90000 with apt= the codec's type.
      codecs: rtx
        ? [
            { payloadType: 96, mimeType: 'video/H264' },
            { payloadType: 97, mimeType: 'video/rtx', parameters: 'apt=96' },
          ]
        : [],
    } as unknown as RTCRtpTransceiver;
    if (rtx) Object.assign(transceiver.sender, { rtxSsrc: RTX_SSRC });
    let now = 10_000;
    const sender = new RtpTrackSender(transceiver, { clock: () => now, latencyMode: () => latency });
    return {
      sender,
      /** werift's RTT from receiver reports, seconds. */
      setRtt: (seconds: number) => Object.assign(transceiver.sender, { rtt: seconds }),
      wire,
      receiver,
      nack: (sequenceNumbers: number[]) => onNack!({ header: {}, lost: sequenceNumbers }),
      advance: (ms: number) => void (now += ms),
    };
  }

  const seqOf = (packet: Buffer): number => packet.readUInt16BE(2);
  const RTX_SSRC = 0x0badf00d;
  const transportSeqOf = (packet: Buffer): number => extensionsOf(packet).get(3)!.readUInt16BE(0);

  describe.each([
    ['AES_CM_128_HMAC_SHA1_80', SRTP_AES128_CM_HMAC_SHA1_80],
    ['AEAD_AES_128_GCM', SRTP_AEAD_AES_128_GCM],
  ])('%s', (_name, profile) => {
    it('resends a NACKed packet byte for byte after later frames reused the batch and the caller reused its payload buffers', () => {
      const { sender, wire, receiver, nack, advance } = connectedSender(profile);
      // One buffer the caller refills for every frame (as a pooled packetizer or encoder would).
      const scratch = Buffer.alloc(5 * 1100);
      const frame = (fill: number, count: number): Buffer[] => {
        scratch.fill(fill);
        return Array.from({ length: count }, (_, i) => scratch.subarray(i * 1100, i * 1100 + 1000 + i));
      };
      sender.sendFrame(frame(0xa1, 5), 0);
      const first = wire.slice();
      expect(first).toHaveLength(5);
      // Later frames: fewer packets than the reused batch holds, then more.
      for (let f = 1; f <= 20; f++) sender.sendFrame(frame(0xb0 + f, f % 2 === 0 ? 2 : 4), f * 3000);
      advance(300);
      wire.length = 0;
      nack([seqOf(first[3]!), seqOf(first[4]!)]);
      expect(wire).toHaveLength(2);
      expect(wire[0]!.equals(first[3]!)).toBe(true);
      expect(wire[1]!.equals(first[4]!)).toBe(true);
      const decrypted = receiver.decrypt(Buffer.from(wire[1]!));
      // The frame's payload bytes as they were when it was sent (the extension block is on its first packet only).
      expect(decrypted.subarray(12).equals(Buffer.alloc(1004, 0xa1))).toBe(true);
      expect(sender.lossRecovery.retransmittedPackets).toBe(2);
    });

    it('answers a NACK with RTX packets where RTX is negotiated (RFC 4588): own SSRC, payload type, sequence numbers, SRTP index and transport-wide numbers; OSN + the original payload', () => {
      const { sender, wire, receiver, nack, advance } = connectedSender(profile, { rtx: true });
      const scratch = Buffer.alloc(3 * 1100);
      const frame = (fill: number, count: number): Buffer[] => {
        scratch.fill(fill);
        return Array.from({ length: count }, (_, i) => scratch.subarray(i * 1100, i * 1100 + 1000 + i));
      };
      sender.sendFrame(frame(0xa1, 3), 0);
      const first = wire.slice();
      for (let f = 1; f <= 10; f++) sender.sendFrame(frame(0xb0 + f, 2), f * 3000);
      const sent = wire.slice();
      const highestTransportSeq = transportSeqOf(sent[sent.length - 1]!);
      advance(300);
      wire.length = 0;
      nack([seqOf(first[0]!), seqOf(first[2]!)]);
      advance(300); // past the once-per-RTT rule
      nack([seqOf(first[0]!)]);
      expect(wire).toHaveLength(3);
      const originals = [first[0]!, first[2]!, first[0]!];
      const rtxSeq0 = seqOf(wire[0]!);
      wire.forEach((rtxPacket, i) => {
        const original = originals[i]!;
        expect(rtxPacket.readUInt32BE(8)).toBe(RTX_SSRC);
        expect(rtxPacket[1]! & 0x7f).toBe(97);
        expect(rtxPacket[1]! & 0x80).toBe(original[1]! & 0x80); // the marker as the original's
        expect(seqOf(rtxPacket)).toBe((rtxSeq0 + i) & 0xffff);
        expect(rtxPacket.readUInt32BE(4)).toBe(original.readUInt32BE(4)); // same timestamp
        // A transport-wide number of its own, after every one used before.
        expect(transportSeqOf(rtxPacket)).toBe((highestTransportSeq + 1 + i) & 0xffff);
        // The same extensions otherwise (mid, playout-delay on the frame's first packet).
        const ext = extensionsOf(rtxPacket);
        const originalExt = extensionsOf(original);
        expect([...ext.keys()].sort()).toEqual([...originalExt.keys()].sort());
        expect(ext.get(1)?.toString()).toBe(originalExt.get(1)?.toString());
        // Decrypted under the RTX SSRC: the original sequence number, then the original's payload.
        const decrypted = receiver.decrypt(Buffer.from(rtxPacket));
        const payload = decrypted.subarray(rtpHeaderLengthOf(rtxPacket));
        expect(payload.readUInt16BE(0)).toBe(seqOf(original));
        const originalPayload = receiver.decrypt(Buffer.from(original)).subarray(rtpHeaderLengthOf(original));
        expect(payload.subarray(2).equals(originalPayload)).toBe(true);
        expect(originalPayload.equals(Buffer.alloc(original === first[0] ? 1000 : 1002, 0xa1))).toBe(true);
      });
      expect(sender.lossRecovery.retransmittedPackets).toBe(3);
      expect(sender.lossRecovery.retransmittedBytes).toBe(wire.reduce((sum, p) => sum + p.length, 0));
    });

    it('in smooth mode, asks for a playout delay that covers a repair once a long path reports loss, and forgets it 10 s later', () => {
      const delayOf = (wire: Buffer[]): string => {
        const payload = extensionsOf(wire.at(-1)!).get(4)!;
        const min = ((payload[0]! << 4) | (payload[1]! >> 4)) * 10;
        const max = (((payload[1]! & 0x0f) << 8) | payload[2]!) * 10;
        return `${min}/${max}`;
      };
      // A short path: a repair lands in time anyway.
      const short = connectedSender(profile, { latency: 'smooth' });
      short.setRtt(0.06);
      short.sender.sendFrame([Buffer.alloc(500, 1)], 0);
      short.nack([seqOf(short.wire[0]!)]);
      short.sender.sendFrame([Buffer.alloc(500, 1)], 3000);
      expect(delayOf(short.wire)).toBe('0/200');
      // A 200 ms path.
      const { sender, wire, nack, setRtt, advance } = connectedSender(profile, { latency: 'smooth' });
      setRtt(0.2);
      sender.sendFrame([Buffer.alloc(500, 1)], 0);
      expect(delayOf(wire)).toBe('0/200'); // no loss reported yet
      nack([seqOf(wire[0]!)]);
      sender.sendFrame([Buffer.alloc(500, 1)], 3000);
      expect(delayOf(wire)).toBe('270/370'); // 1.25 × 200 + 20
      // A bottleneck's queue inflates the RTT: the base RTT (the lowest over 15 s) still rules.
      setRtt(0.5);
      advance(1_000);
      sender.sendFrame([Buffer.alloc(500, 1)], 6000);
      expect(delayOf(wire)).toBe('270/370');
      // 10 s without a NACK: the plain bounds again.
      advance(10_001);
      sender.sendFrame([Buffer.alloc(500, 1)], 9000);
      expect(delayOf(wire)).toBe('0/200');
    });

    it('takes the base RTT as the lowest over 15 s, so a longer path is learnt', () => {
      const base = new BaseRtt();
      expect(base.note(0, undefined)).toBeUndefined();
      expect(base.note(0, 200)).toBe(200);
      expect(base.note(5_000, 450)).toBe(200);
      expect(base.note(16_000, 450)).toBe(450); // the 200 ms sample is older than 15 s
    });

    it('sends exactly the frame’s packets when the reused batch is longer than the frame', () => {
      const { sender, wire, receiver } = connectedSender(profile);
      sender.sendFrame([Buffer.alloc(900, 1), Buffer.alloc(900, 2), Buffer.alloc(900, 3)], 0);
      wire.length = 0;
      sender.sendFrame([Buffer.alloc(700, 9)], 3000);
      expect(wire).toHaveLength(1);
      expect(wire[0]![1]! & 0x80).toBe(0x80); // the marker: the frame's last (only) packet
      const decrypted = receiver.decrypt(Buffer.from(wire[0]!));
      expect(decrypted.subarray(decrypted.length - 700).equals(Buffer.alloc(700, 9))).toBe(true);
    });
  });
});
