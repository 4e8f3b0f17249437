/**
 * Losses the receiver's transport-wide feedback reports (transport-feedback.ts) and what a video
 * sender does with them (rtp-track-sender.ts): a packet reported lost is resent without waiting
 * for its NACK, a lost resend is resent again, and on a path that loses without queueing each
 * resend goes twice.
 */

import { describe, expect, it, vi } from 'vitest';
import { RtpTrackSender } from './rtp-track-sender.ts';
import { SRTP_AEAD_AES_128_GCM } from './srtp-protector.ts';
import {
  existingTransportCongestion,
  TRANSPORT_WIDE_CC_URI,
  TransportCongestion,
  TransportSendHistory,
  type ReportedLoss,
  type TransportWideFeedback,
} from './transport-feedback.ts';
import {
  connectedTransport,
  extensionsOf,
  rtpHeaderLengthOf,
  videoTransceiverStandIn,
} from '../../../test/support/werift-sender-stand-in.ts';

const RTX_SSRC = 0x0badf00d;
const TRANSPORT_WIDE_ID = 3;

/** Feedback on transport-wide numbers `from`… : `received[i]` says whether packet from + i arrived (1 ms apart). */
function feedbackOn(from: number, received: readonly boolean[]): TransportWideFeedback {
  return {
    baseSequenceNumber: from & 0xffff,
    packetStatusCount: received.length,
    referenceTime: 0,
    packetChunks: received.map((arrived) => ({ runLength: 1, packetStatus: arrived ? 1 : 0 })),
    recvDeltas: received.filter(Boolean).map(() => ({ delta: 1000 })),
  };
}

const transportSeqOf = (packet: Buffer): number => extensionsOf(packet).get(TRANSPORT_WIDE_ID)!.readUInt16BE(0);
const seqOf = (packet: Buffer): number => packet.readUInt16BE(2);

/** A connected video sender with RTX and transport-wide numbers; its timers run when the test says. */
function rtxSender() {
  const { transport, wire, receiver } = connectedTransport(SRTP_AEAD_AES_128_GCM);
  const { transceiver, nack } = videoTransceiverStandIn(transport, {
    ssrc: 0x12345678,
    rtxSsrc: RTX_SSRC,
    codec: { payloadType: 96, mimeType: 'video/H264' },
    headerExtensions: [{ id: TRANSPORT_WIDE_ID, uri: TRANSPORT_WIDE_CC_URI }],
    codecs: [
      { payloadType: 96, mimeType: 'video/H264' },
      { payloadType: 97, mimeType: 'video/rtx', parameters: 'apt=96' },
    ],
  });
  let now = 10_000;
  const timers: Array<{ at: number; fn: () => void }> = [];
  const sender = new RtpTrackSender(transceiver, {
    clock: () => now,
    latencyMode: () => 'realtime',
    setTimer: (fn, ms) => void timers.push({ at: now + ms, fn }),
  });
  /** The original (media SSRC) of an RTX packet, decrypted: its OSN. */
  const originalOf = (rtx: Buffer): number => {
    const clear = receiver.decrypt(Buffer.from(rtx));
    return clear.readUInt16BE(rtpHeaderLengthOf(rtx));
  };
  return {
    sender,
    wire,
    originalOf,
    nack,
    /** Feedback on the packets on the wire from `first` to `end` (indexes; default all), `lost` (indexes) missing. */
    report: (first: number, lost: readonly number[], end = wire.length) => {
      const packets = wire.slice(first, end);
      const from = transportSeqOf(packets[0]!);
      existingTransportCongestion(transport)!.onFeedback(
        feedbackOn(
          from,
          packets.map((_, i) => !lost.includes(first + i)),
        ),
      );
    },
    congestion: () => existingTransportCongestion(transport)!,
    advance: (ms: number) => {
      now += ms;
      for (const timer of timers.splice(0)) {
        if (timer.at <= now) timer.fn();
        else timers.push(timer);
      }
    },
  };
}

describe('TransportCongestion: losses reported to the senders', () => {
  it('tells each packet’s sender which of its media packets (and which copy) a feedback reports lost, once', () => {
    let now = 1000;
    const congestion = new TransportCongestion({ now: () => now, history: new TransportSendHistory(64, 100) });
    const heard: ReportedLoss[][] = [];
    const listener = { onReportedLoss: (losses: readonly ReportedLoss[]) => heard.push([...losses]) };
    congestion.send(1000, now, listener, 500); // 100
    congestion.send(1000, now, listener, 501); // 101: lost
    congestion.send(1000, now); // 102: padding (nobody listens), lost
    congestion.send(1000, now, listener, 500, 1); // 103: a resend of 500, lost
    congestion.send(1000, now, listener, 502); // 104
    now += 50;
    const report = feedbackOn(100, [true, false, false, false, true]);
    congestion.onFeedback(report);
    expect(heard).toEqual([
      [
        { sequenceNumber: 501, copy: 0 },
        { sequenceNumber: 500, copy: 1 },
      ],
    ]);
    congestion.onFeedback(report); // the same report again: nothing new
    expect(heard).toHaveLength(1);
  });
});

describe('RtpTrackSender: losses its connection’s feedback reports', () => {
  it('resends a packet reported lost without waiting for its NACK, and the NACK that follows within an RTT is not answered twice', () => {
    const { sender, wire, originalOf, report, nack, advance } = rtxSender();
    sender.sendFrame([Buffer.alloc(900, 1), Buffer.alloc(900, 2), Buffer.alloc(900, 3)], 0);
    sender.sendFrame([Buffer.alloc(900, 4)], 3000);
    const lost = seqOf(wire[1]!);
    advance(40);
    report(0, [1]); // the packet's NACK was lost: the feedback says it anyway
    expect(wire).toHaveLength(5);
    expect(wire[4]!.readUInt32BE(8)).toBe(RTX_SSRC);
    expect(originalOf(wire[4]!)).toBe(lost);
    expect(sender.lossRecovery.repairedFromFeedback).toBe(1);
    advance(5);
    nack([lost]); // a NACK that did get through, late
    expect(wire).toHaveLength(5);
    expect(sender.lossRecovery.refused.within_rtt).toBe(1);
  });

  it('does not resend a reported loss whose NACK was answered since; does resend a lost resend at once, even within an RTT', () => {
    const { sender, wire, originalOf, report, nack, advance } = rtxSender();
    sender.sendFrame([Buffer.alloc(900, 1), Buffer.alloc(900, 2)], 0);
    sender.sendFrame([Buffer.alloc(900, 3)], 3000);
    const lost = seqOf(wire[0]!);
    advance(40);
    nack([lost]); // the NACK came first: RTX copy 1
    expect(wire).toHaveLength(4);
    report(0, [0], 3); // then the feedback on the original: answered already
    expect(wire).toHaveLength(4);
    sender.sendFrame([Buffer.alloc(900, 4)], 6000);
    advance(20);
    report(3, [3]); // the resend was lost (its feedback: the resend and the frame after it)
    expect(wire).toHaveLength(6);
    expect(originalOf(wire[5]!)).toBe(lost);
    expect(sender.lossRecovery.retransmittedPackets).toBe(2);
    expect(sender.lossRecovery.refused.within_rtt).toBe(0);
  });

  it('on a path that loses without queueing, sends each resend twice, 10 ms apart, unless it was resent again meanwhile', () => {
    const { sender, wire, originalOf, report, nack, advance, congestion } = rtxSender();
    sender.sendFrame([Buffer.alloc(900, 1), Buffer.alloc(900, 2)], 0);
    sender.sendFrame([Buffer.alloc(900, 3)], 3000);
    advance(20);
    report(0, []); // feedback makes the connection's estimate count; nothing lost
    expect(congestion().pacingRateBps()).toBeUndefined(); // not queueing: the estimate is far above the rate sent
    const lost = seqOf(wire[1]!);
    nack([lost]);
    expect(wire).toHaveLength(4);
    advance(9);
    expect(wire).toHaveLength(4);
    advance(1);
    expect(wire).toHaveLength(5);
    expect(originalOf(wire[3]!)).toBe(lost);
    expect(originalOf(wire[4]!)).toBe(lost);
    expect(sender.lossRecovery.secondCopies).toBe(1);
    // The first copy reported lost after the second left: nothing more (the second is the newest).
    report(3, [3]);
    expect(wire).toHaveLength(5);
    // Another loss; its first copy is reported lost before its second is due: resent at once
    // (with a second copy of its own, 10 ms later), and the first's second copy is not sent.
    const other = seqOf(wire[0]!);
    nack([other]);
    expect(wire).toHaveLength(6);
    advance(5);
    report(5, [5]);
    expect(wire).toHaveLength(7);
    advance(5); // the first resend's second copy was due: skipped
    expect(wire).toHaveLength(7);
    advance(5);
    expect(wire).toHaveLength(8);
    expect(wire.slice(5).map(originalOf)).toEqual([other, other, other]);
    expect(sender.lossRecovery.secondCopies).toBe(2);
    expect(sender.lossRecovery.repairedFromFeedback).toBe(1);
  });

  it('sends a resend once where the path queues (the connection paces)', () => {
    const { sender, wire, report, nack, advance, congestion } = rtxSender();
    sender.sendFrame([Buffer.alloc(900, 1), Buffer.alloc(900, 2)], 0);
    sender.sendFrame([Buffer.alloc(900, 3)], 3000);
    advance(20);
    report(0, []);
    // A queueing path, as the connection's pacing rule would say after a delay-based decrease
    // (transport-feedback.ts's pacingRateBps; the rule itself: bandwidth-probe.test.ts).
    vi.spyOn(congestion(), 'pacingRateBps').mockReturnValue(1_000_000_000); // a rate that holds nothing back here
    nack([seqOf(wire[1]!)]);
    advance(50);
    expect(wire).toHaveLength(4);
    expect(sender.lossRecovery.secondCopies).toBe(0);
  });
});
