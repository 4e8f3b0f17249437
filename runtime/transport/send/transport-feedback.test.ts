import { describe, expect, it } from 'vitest';
import { RtcpHeader, TransportWideCC, type RTCRtpTransceiver } from 'werift';
import { RtpTrackSender } from './rtp-track-sender.ts';
import { SRTP_AEAD_AES_128_GCM } from './srtp-protector.ts';
import {
  existingTransportCongestion,
  feedbackStatuses,
  TRANSPORT_WIDE_CC_URI,
  TransportCongestion,
  TransportSendHistory,
  type TransportWideFeedback,
} from './transport-feedback.ts';
import { connectedTransport, extensionsOf, senderCounters } from '../../../test/support/werift-sender-stand-in.ts';

/** A transport-wide feedback packet's body (after the 4-byte RTCP header), parsed by werift as the runtime gets it. */
function feedback(base: number, count: number, referenceTime: number, chunks: number[], deltas: Buffer): TransportWideFeedback {
  const fixed = Buffer.alloc(16);
  fixed.writeUInt32BE(1, 0);
  fixed.writeUInt32BE(2, 4);
  fixed.writeUInt16BE(base, 8);
  fixed.writeUInt16BE(count, 10);
  fixed.writeUIntBE(referenceTime, 12, 3);
  fixed[15] = 0;
  const chunkBytes = Buffer.alloc(chunks.length * 2);
  chunks.forEach((c, i) => chunkBytes.writeUInt16BE(c, i * 2));
  const body = Buffer.concat([fixed, chunkBytes, deltas]);
  const padded = Buffer.concat([body, Buffer.alloc((4 - (body.length % 4)) % 4)]);
  return TransportWideCC.deSerialize(padded, new RtcpHeader({ type: 205, count: 15 })) as unknown as TransportWideFeedback;
}

describe('TransportSendHistory', () => {
  it('numbers packets with one 16-bit counter that wraps, and keeps each one’s send time and size', () => {
    const history = new TransportSendHistory(8, 65534);
    expect(history.send(1000, 1)).toBe(65534);
    expect(history.send(1100, 2)).toBe(65535);
    expect(history.send(1200, 3)).toBe(0);
    expect(history.unwrap(0)).toBe(65536);
    expect(history.unwrap(65535)).toBe(65535);
    expect(history.get(history.unwrap(0))).toEqual({ sentAtMs: 3, bytes: 1200 });
    expect(history.get(history.unwrap(65534))).toEqual({ sentAtMs: 1, bytes: 1000 });
  });

  it('is bounded: a slot reused forgets the older packet', () => {
    const history = new TransportSendHistory(4, 0);
    for (let i = 0; i < 6; i++) history.send(100 + i, i);
    expect(history.get(0)).toBeUndefined();
    expect(history.get(1)).toBeUndefined();
    expect(history.get(2)).toEqual({ sentAtMs: 2, bytes: 102 });
    expect(history.get(5)).toEqual({ sentAtMs: 5, bytes: 105 });
  });
});

describe('feedbackStatuses', () => {
  it('reads a status-vector chunk (which werift’s packetResults skips) across the 16-bit wrap', () => {
    // 2-bit symbols: small, lost, large, small, small (+2 padding symbols)
    const chunk = 0b1_1_01_00_10_01_01_00_00;
    const deltas = Buffer.from([16, 0xff, 0xf8, 4, 1]); // +4 ms, −2 ms, +1 ms, +0.25 ms
    const statuses = feedbackStatuses(feedback(65534, 5, 10, [chunk], deltas));
    expect(statuses).toEqual([
      { sequence16: 65534, arrivedAtUs: 644_000 },
      { sequence16: 65535, arrivedAtUs: undefined },
      { sequence16: 0, arrivedAtUs: 642_000 },
      { sequence16: 1, arrivedAtUs: 643_000 },
      { sequence16: 2, arrivedAtUs: 643_250 },
    ]);
  });

  it('reads run-length chunks', () => {
    const statuses = feedbackStatuses(feedback(100, 5, 1, [0b0_01_0000000000011, 0b0_00_0000000000010], Buffer.from([4, 4, 4])));
    expect(statuses.map((s) => s.arrivedAtUs)).toEqual([65_000, 66_000, 67_000, undefined, undefined]);
  });
});

describe('TransportCongestion', () => {
  it('joins feedback with the send history and counts a repeated report once', () => {
    let now = 1000;
    const congestion = new TransportCongestion({ now: () => now, history: new TransportSendHistory(64, 100) });
    expect(congestion.active()).toBe(false);
    for (let i = 0; i < 5; i++) congestion.send(1000);
    now += 50;
    const report = feedback(100, 5, 1, [0b0_01_0000000000011, 0b0_00_0000000000010], Buffer.from([4, 4, 4]));
    congestion.onFeedback(report);
    expect(congestion.active()).toBe(true);
    expect(congestion.controller.feedbacks).toBe(1);
    congestion.onFeedback(report); // the same packets again: nothing new
    expect(congestion.controller.feedbacks).toBe(1);
    now += 6000;
    expect(congestion.active()).toBe(false); // no feedback for 5 s: REMB again
  });
});

describe('RtpTrackSender with transport-wide sequence numbers', () => {
  it('numbers every packet of every track of a connection from one counter, and feeds feedback to the connection', () => {
    const { transport, wire, receiver } = connectedTransport(SRTP_AEAD_AES_128_GCM);
    const rtcpListeners: Array<(packet: unknown) => void> = [];
    const transceiver = (ssrc: number, mid: string) =>
      ({
        sender: {
          kind: 'video',
          ssrc,
          codec: { payloadType: 96, mimeType: 'video/H264' },
          dtlsTransport: transport,
          onGenericNack: { subscribe: () => ({ unSubscribe: () => {} }) },
          onRtcp: {
            subscribe: (listener: (packet: unknown) => void) => {
              rtcpListeners.push(listener);
              return { unSubscribe: () => {} };
            },
          },
          ...senderCounters(),
        },
        headerExtensions: [
          { id: 4, uri: 'http://www.webrtc.org/experiments/rtp-hdrext/playout-delay' },
          { id: 5, uri: TRANSPORT_WIDE_CC_URI },
        ],
        mid,
        codecs: [],
      }) as unknown as RTCRtpTransceiver;
    const a = new RtpTrackSender(transceiver(0x1111, '0'), { latencyMode: () => 'realtime' });
    const b = new RtpTrackSender(transceiver(0x2222, '1'), { latencyMode: () => 'realtime' });
    a.sendFrame([Buffer.alloc(900, 1), Buffer.alloc(900, 2), Buffer.alloc(900, 3)], 0);
    b.sendFrame([Buffer.alloc(500, 4), Buffer.alloc(500, 5)], 0);
    a.sendFrame([Buffer.alloc(300, 6)], 3000);
    expect(wire).toHaveLength(6);
    const sequences = wire.map((packet) => {
      const clear = receiver.decrypt(Buffer.from(packet));
      expect(clear.readUInt16BE(12)).toBe(0xbede); // every packet has the one-byte extension block
      return extensionsOf(clear).get(5)!.readUInt16BE(0);
    });
    for (let i = 1; i < sequences.length; i++) expect(sequences[i]).toBe((sequences[0]! + i) & 0xffff);
    // Feedback on any of the connection's senders reaches the connection's controller.
    const congestion = existingTransportCongestion(transport)!;
    expect(congestion.active()).toBe(false);
    const report = feedback(sequences[0]!, 6, 1, [0b0_01_0000000000110], Buffer.from([4, 4, 4, 4, 4, 4]));
    rtcpListeners[1]!({ type: 205, feedback: report });
    expect(congestion.active()).toBe(true);
    expect(congestion.controller.feedbacks).toBe(1);
    a.close();
    b.close();
  });
});

describe('TransportCongestion: one estimate, several video tracks', () => {
  it('shares the estimate by the tracks’ weights among those sending, and gives a quiet one’s share back', () => {
    let now = 0;
    const congestion = new TransportCongestion({ now: () => now });
    const main = {};
    const depth = {};
    expect(congestion.shareOf(main)).toBe(1); // not sending yet: all of it, never 0
    congestion.noteSender(main, 2500);
    expect(congestion.shareOf(main)).toBe(1);
    congestion.noteSender(depth, 500);
    expect(congestion.shareOf(main)).toBeCloseTo(2500 / 3000);
    expect(congestion.shareOf(depth)).toBeCloseTo(500 / 3000);
    // depth is paused: after a second without a frame its share goes back to main.
    now = 1_500;
    congestion.noteSender(main, 2500);
    expect(congestion.shareOf(main)).toBe(1);
    congestion.forgetSender(main);
    expect(congestion.shareOf(depth)).toBe(1);
  });
});
