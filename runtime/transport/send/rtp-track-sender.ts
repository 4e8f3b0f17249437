/**
 * Writes one connection's RTP for one output track: the header, the playout-delay extension,
 * SRTP protection and the send history for NACKs, straight to the connection's ICE socket
 * (ice-datagram-writer.ts).
 *
 * This is the fan-out path — a session's frame is encoded and packetized once, then every
 * viewer's sender runs this — so it does per packet only what differs per viewer (header,
 * encryption, the socket write). werift's `RTCRtpSender.sendRtp` did the same job with a dozen
 * objects per packet (header copies, extension maps, a cipher and an HMAC object, an NTP time
 * from a float-to-string split, a sent-packet event) and made each extra viewer of a session
 * cost ~1 % of a core (docs/performance.md). werift still owns everything around it: the DTLS
 * handshake and SRTP keys, RTCP (sender reports read the counters kept here; PLI and NACK
 * arrive through its sender) and stats.
 *
 * NACKs, losses the connection's feedback reports, and picture-loss reports are answered by
 * retransmitter.ts (the loss-recovery rules of loss-recovery.ts; resends on the RTX stream of
 * rtx-sender.ts where the receiver negotiated RTX) from the send history kept here. In `smooth`
 * mode, a receiver that reports loss on a long path is asked for a playout delay that covers a
 * repair (rtp-header.ts, `smoothPlayoutDelay`).
 *
 * Where transport-wide congestion control is negotiated, every video packet carries the
 * connection's transport-wide sequence number, its send time and size are kept for the
 * receiver's feedback, which this sender hands to the connection's estimator
 * (transport-feedback.ts, congestion-controller.ts); while the path is the limit and queues, the
 * connection's pacer spreads the packets (packet-pacer.ts).
 *
 * ~470 lines: writing each packet, protecting it, the send history and transport-wide numbering
 * share per-stream state (SRTP streams, sequence numbers and rollover counters, the history); the
 * pure header pieces are in rtp-header.ts, the answers to loss in retransmitter.ts (which borrows
 * that state through `RetransmitterHost`), the RTX stream in rtx-sender.ts.
 */

import type { RTCDtlsTransport, RTCRtpSender, RTCRtpTransceiver } from 'werift';
import type { LatencyMode } from '../../../protocol/messages.ts';
import { IceDatagramWriter } from './ice-datagram-writer.ts';
import { noResendsFault, rtpLossFault } from '../../faults/peer-faults.ts';
import { PLAYOUT_DELAY_URI } from '../signalling/peer-factory.ts';
import { RtpSendHistory } from './rtp-send-history.ts';
import type { Clock, LossRecoveryRules, PathEstimate } from './loss-recovery.ts';
import {
  LOSS_MEMORY_MS,
  Retransmitter,
  type LossRecoveryCounts,
  type LossRepairCallbacks,
  type RetransmitterHost,
} from './retransmitter.ts';
import { createSrtpProtector, type SrtpStream } from './srtp-protector.ts';
import { RtxSender } from './rtx-sender.ts';
import { FlexfecSender } from './flexfec-sender.ts';
import type { FecProtected } from './flexfec.ts';
import { flexfecOf, type FlexfecStream } from '../signalling/flexfec-negotiation.ts';
import {
  RTPFB,
  TRANSPORT_WIDE_CC_URI,
  TRANSPORT_WIDE_FEEDBACK_FORMAT,
  existingTransportCongestion,
  transportCongestion,
  type TransportCongestion,
  type TransportWideFeedback,
} from './transport-feedback.ts';
import { RTP_HEADER_LENGTH } from '../rtp/packet-size.ts';
import {
  buildExtensionBlock,
  ntpTimestamp,
  PLAYOUT_DELAY_PAYLOAD,
  playoutDelayPayload,
  smoothPlayoutDelay,
  BaseRtt,
  SDES_MID_URI,
  type ExtensionBlock,
} from './rtp-header.ts';
import { nackedSequenceNumbers } from '../../quality/media-stats-reporter.ts';

/** A reused entry of a frame's batch (srtp-protector.ts's UnprotectedPacket, writable). */
interface PacketEntry {
  packet: Buffer;
  headerLength: number;
  payload: Buffer;
  index: number;
  /** When it leaves (ms of the clock): now, or later when the connection's pacer spreads the frame. */
  at: number;
}

const EMPTY = Buffer.alloc(0);

/**
 * werift's `RTCRtpSender` fields that are private in its types but that its RTCP sender reports
 * and `getStats` are built from; this sender keeps them as werift's own `sendRtp` would.
 */
interface WeriftSenderCounters {
  ntpTimestamp: bigint;
  rtpTimestamp: number;
  timestamp?: number;
  sequenceNumber?: number;
  octetCount: number;
  packetCount: number;
  headerBytesSent: number;
  retransmittedPacketsSent: number;
  retransmittedBytesSent: number;
  /** Smoothed RTT from receiver reports (LSR/DLSR), seconds; undefined until one came. */
  readonly rtt?: number;
  /** Random per-sender offset werift adds to RTP timestamps (RFC 3550 §5.1). */
  readonly timestampOffset: number;
}

/** werift's DTLS transport counters (transport stats) and its SRTP session. */
interface WeriftTransportCounters {
  bytesSent: number;
  packetsSent: number;
}

/**
 * Repair packets wait until loss has gone on this long without the path's delay saying "queue"
 * (a delay-based decrease), ms: a bottleneck's first drops (a capacity step) are NACKed before
 * the estimate falls, and repair packets then would add to the queue that drops.
 */
const FEC_AFTER_MS = 1_000;
/**
 * Repair packets go only while the estimate is this many times the media's rate: a frame of 3
 * packets gets one (+33 %), a large one one per 8 (+12.5 %).
 */
const FEC_HEADROOM = 1.4;
/**
 * The codecs repair packets go with: H.264 and H.265, which browsers receive. Not VP8: libwebrtc
 * protects VP8 with ULPFEC itself, and the VP8 receiver measured here (the libwebrtc in
 * @roamhq/wrtc, which offers flexfec-03) lost frames with it — its estimate fell from 10 Mbit/s
 * to ~0.2 and the send budget held the model for seconds (docs/performance.md, "FlexFEC").
 */
const FEC_CODECS: ReadonlySet<string> = new Set(['h264', 'h265']);

/** Loss repair's callbacks (retransmitter.ts) are for metrics. */
export interface RtpTrackSenderOptions extends LossRepairCallbacks {
  /** Read per frame, so a session's mode change applies at once. Default `smooth`. */
  readonly latencyMode?: () => LatencyMode;
  /**
   * This track's weight in its connection's estimate when the connection carries several video
   * tracks (its configured rate, kbit/s): each gets estimate × its weight over theirs; it also
   * bounds how high the connection's bandwidth probes look. Default: an even share, no bound.
   */
  readonly shareWeight?: number;
  /** Called with the number of FlexFEC repair packets sent after a frame (for metrics). */
  readonly onRepairPackets?: (packets: number) => void;
  /**
   * Called after every frame handed to `sendFrame`, sent or not (not connected yet, closed):
   * a connection counts these for `media_stats` (frames sent to the client).
   */
  readonly onFrameSent?: () => void;
  /** The loss-recovery rules (default LOSS_RECOVERY) and their clock (default `performance.now()`); for tests. */
  readonly lossRecovery?: LossRecoveryRules;
  readonly clock?: Clock;
  /** Timers (a resend's second copy); default setTimeout. For tests. */
  readonly setTimer?: (fn: () => void, ms: number) => void;
}

export class RtpTrackSender {
  readonly #transceiver: RTCRtpTransceiver;
  readonly #sender: RTCRtpSender;
  readonly #counters: WeriftSenderCounters;
  #sequenceNumber = Math.floor(Math.random() * 0x10000);
  /** SRTP rollover counter: how many times the sequence number has wrapped (RFC 3711 §3.3.1). */
  #rolloverCounter = 0;
  readonly #playoutDelayId: number | undefined;
  readonly #mid: { readonly id: number; readonly value: Buffer } | undefined;
  /** The first packet's extension block per latency mode (and smooth mode's delay), built once each. */
  readonly #extensionBlocks = new Map<string, ExtensionBlock | undefined>();
  /** The path's RTT without a bottleneck's queue (the lowest over 15 s). */
  readonly #baseRtt = new BaseRtt();
  /** The transport-wide sequence number's extension id, when negotiated (every packet carries it). */
  readonly #transportWideId: number | undefined;
  /** The block of every packet after a frame's first: the transport-wide sequence number alone. */
  readonly #sequenceOnlyBlock: ExtensionBlock | undefined;
  readonly #latencyMode: () => LatencyMode;
  readonly #options: RtpTrackSenderOptions;
  readonly #now: Clock;
  /** One frame's packets on their way to SRTP, reused frame after frame (no objects per packet). */
  readonly #batch: PacketEntry[] = [];
  /** Video only (NACK is negotiated for video codecs, not Opus); allocated on the first send. */
  #history: RtpSendHistory | undefined;
  readonly #socket = new IceDatagramWriter();
  #stream: SrtpStream | undefined;
  readonly #stopNacks: () => void;
  readonly #stopFeedback: () => void;
  #closed = false;
  /** Where NACKed packets are resent, and probes padded, when the receiver negotiated RTX. */
  readonly #rtx: RtxSender;
  /** Answers loss reports: resends, keyframes for loss, probe padding (retransmitter.ts). */
  readonly #repair: Retransmitter;
  /** Repair packets (FlexFEC) where the client negotiated them (flexfec-sender.ts). */
  readonly #fec: FlexfecSender;

  constructor(transceiver: RTCRtpTransceiver, options: RtpTrackSenderOptions = {}) {
    this.#transceiver = transceiver;
    this.#sender = transceiver.sender;
    this.#counters = transceiver.sender as unknown as WeriftSenderCounters;
    this.#latencyMode = options.latencyMode ?? (() => 'smooth');
    this.#options = options;
    this.#now = options.clock ?? (() => performance.now());
    this.#playoutDelayId = transceiver.headerExtensions.find((e) => e.uri === PLAYOUT_DELAY_URI)?.id;
    this.#transportWideId = transceiver.headerExtensions.find((e) => e.uri === TRANSPORT_WIDE_CC_URI)?.id;
    this.#sequenceOnlyBlock = this.#transportWideId === undefined ? undefined : buildExtensionBlock([], this.#transportWideId);
    this.#rtx = new RtxSender(transceiver, { transportWideId: this.#transportWideId, write: this.#writeLater });
    this.#fec = new FlexfecSender({ write: this.#writeLater });
    this.#repair = new Retransmitter(this.#repairHost, this.#rtx, {
      ...options,
      ...(options.lossRecovery ? { rules: options.lossRecovery } : {}),
      now: this.#now,
      setTimer: options.setTimer ?? ((fn, ms) => void setTimeout(fn, ms)),
    });
    const midId = transceiver.headerExtensions.find((e) => e.uri === SDES_MID_URI)?.id;
    // A mid longer than the one-byte form carries (16 bytes; never seen: browsers use "0", "1", …)
    // is left out rather than breaking the packet-size budget above.
    this.#mid =
      midId !== undefined && transceiver.mid && Buffer.byteLength(transceiver.mid) <= 16
        ? { id: midId, value: Buffer.from(transceiver.mid) }
        : undefined;
    // werift's own NACK handler finds nothing in its (unused) cache; the history here answers.
    // werift's parse runs past the NACK into the rest of the compound RTCP packet (a REMB's
    // bytes become "lost" numbers) and does not wrap at 65536: only the NACK's own entries count.
    const { unSubscribe } = this.#sender.onGenericNack.subscribe((nack) =>
      this.#repair.nack(nackedSequenceNumbers({ header: nack.header, feedback: nack })),
    );
    this.#stopNacks = unSubscribe;
    // Transport-wide feedback is routed to the sender whose SSRC it names; the connection's
    // controller takes it whichever of its senders that is.
    const onRtcp = this.#sender.onRtcp as RTCRtpSender['onRtcp'] | undefined; // absent in tests' stand-ins
    this.#stopFeedback =
      onRtcp?.subscribe((packet) => {
        const rtcp = packet as { type?: number; feedback?: { count?: number } };
        if (rtcp.type !== RTPFB || rtcp.feedback?.count !== TRANSPORT_WIDE_FEEDBACK_FORMAT || this.#closed) return;
        const transport = this.#sender.dtlsTransport as RTCDtlsTransport | undefined;
        if (transport === undefined) return;
        const rtt = this.#counters.rtt;
        transportCongestion(transport).onFeedback(
          rtcp.feedback as unknown as TransportWideFeedback,
          rtt === undefined ? undefined : rtt * 1000,
        );
      }).unSubscribe ?? (() => {});
  }

  /** Negotiated codec, lower-case short name (`h264`, `vp8`, `opus`), or undefined before negotiation. */
  get codec(): string | undefined {
    const mime = this.#sender.codec?.mimeType ?? this.#transceiver.codecs[0]?.mimeType;
    return mime?.split('/')[1]?.toLowerCase();
  }

  /** What this sender did with loss reports so far. */
  get lossRecovery(): Readonly<LossRecoveryCounts> {
    return this.#repair.counts;
  }

  /**
   * A receiver reported picture loss (PLI, FIR): true if a keyframe should be made for it, false
   * if one was asked for less than max(300 ms, RTT) ago (that one answers this report too).
   */
  pictureLost(): boolean {
    return this.#repair.pictureLost();
  }

  /** Who makes a keyframe when this sender leaves a NACKed loss unrepaired (throttled here). */
  onKeyframeNeeded(listener: (() => void) | undefined): void {
    this.#repair.onKeyframeNeeded(listener);
  }

  /**
   * Sends one frame's payloads; the marker bit goes on the last one. Returns the RTP timestamp
   * as the client sees it (with werift's per-sender random offset), or undefined when nothing
   * could be sent (not connected yet, or closed).
   *
   * `mediaTimeMs` (ms of `performance.now()`) is the moment `rtpTimestamp` stands for — when the
   * frame was taken from the model's queue (video) or is due to play (audio). It goes into this
   * stream's RTCP sender reports, which is how a receiver lines audio up with video: every
   * track of a session maps its RTP clock to this one wall clock. (werift 0.24.4's own NTP time
   * has whole-second resolution, so lip-sync could be off by up to a second.)
   */
  sendFrame(payloads: readonly Buffer[], rtpTimestamp: number, mediaTimeMs: number = performance.now()): number | undefined {
    const wireTimestamp = this.#sendFrame(payloads, rtpTimestamp, mediaTimeMs);
    this.#options.onFrameSent?.();
    return wireTimestamp;
  }

  #sendFrame(payloads: readonly Buffer[], rtpTimestamp: number, mediaTimeMs: number): number | undefined {
    const codec = this.#sender.codec;
    const stream = this.#closed || codec === undefined ? undefined : this.#srtpStream();
    if (stream === undefined || codec === undefined || payloads.length === 0) return undefined;
    const counters = this.#counters;
    const ssrc = this.#sender.ssrc;
    const timestamp = (rtpTimestamp + counters.timestampOffset) >>> 0;
    const mode = this.#latencyMode();
    const firstBlock = this.#firstExtensionBlock(mode);
    const otherBlock = this.#sequenceOnlyBlock;
    const congestion: TransportCongestion | undefined =
      this.#transportWideId === undefined ? undefined : transportCongestion(stream.transport);
    const tagLength = stream.protector.tagLength;
    if (this.#history === undefined && this.#sender.kind === 'video') this.#history = new RtpSendHistory();
    const history = this.#history;
    if (congestion && history) {
      congestion.noteSender(this.#sender, this.#options.shareWeight);
      if (this.#rtx.stream()) congestion.offerPadding(this.#repair.padding);
    }
    const sentAt = history ? this.#now() : 0;
    const batch = this.#batch;
    while (batch.length < payloads.length) batch.push({ packet: EMPTY, headerLength: 0, payload: EMPTY, index: 0, at: 0 });
    // Paced (packet-pacer.ts) only while the path is constrained; else every packet leaves now.
    const pacingRate = congestion?.pacingRateBps();
    // Video's packets are kept for resends: the connection's feedback says which were lost.
    const lossListener = history ? this.#repair.lossListener : undefined;
    // Repair packets for the frame (FlexFEC), where negotiated and the path loses without queueing.
    const fec = history ? this.#fecStream(congestion) : undefined;
    const protectedPackets: FecProtected[] | undefined = fec ? [] : undefined;
    let payloadBytes = 0;
    let headerBytes = 0;
    for (let i = 0; i < payloads.length; i++) {
      const payload = payloads[i]!;
      const ext = i === 0 ? firstBlock : otherBlock;
      const headerLength = RTP_HEADER_LENGTH + (ext?.bytes.length ?? 0);
      const size = headerLength + payload.length + tagLength;
      const packet = history ? history.allocate(this.#sequenceNumber, size, sentAt) : Buffer.allocUnsafe(size);
      packet[0] = ext ? 0x90 : 0x80; // version 2, extension bit
      packet[1] = (i === payloads.length - 1 ? 0x80 : 0) | codec.payloadType;
      packet.writeUInt16BE(this.#sequenceNumber, 2);
      packet.writeUInt32BE(timestamp, 4);
      packet.writeUInt32BE(ssrc, 8);
      const entry = batch[i]!;
      if (ext) {
        ext.bytes.copy(packet, RTP_HEADER_LENGTH);
        // Numbered in the order the packets leave (the pacer keeps that order), with when they leave.
        if (congestion && ext.sequenceAt !== undefined) {
          entry.at = congestion.pacer.reserve(size, pacingRate);
          packet.writeUInt16BE(congestion.send(size, entry.at, lossListener, this.#sequenceNumber), RTP_HEADER_LENGTH + ext.sequenceAt);
        }
      }
      entry.packet = packet;
      entry.headerLength = headerLength;
      entry.payload = payload;
      // What the receiver XORs it as: its transport-wide number zeroed (it is rewritten per copy).
      protectedPackets?.push({
        sequenceNumber: this.#sequenceNumber,
        header: packet.subarray(0, headerLength),
        payload,
        ...(ext?.sequenceAt !== undefined ? { zeroAt: RTP_HEADER_LENGTH + ext.sequenceAt, zeroLength: 2 } : {}),
      });
      entry.index = this.#rolloverCounter * 0x10000 + this.#sequenceNumber;
      payloadBytes += payload.length;
      headerBytes += headerLength;
      this.#sequenceNumber = (this.#sequenceNumber + 1) & 0xffff;
      if (this.#sequenceNumber === 0) this.#rolloverCounter = (this.#rolloverCounter + 1) >>> 0;
    }
    // Computed before SRTP (the XOR is of the clear packets), sent after the frame.
    const repairs = fec && protectedPackets ? this.#fec.repairs(ssrc, protectedPackets) : undefined;
    stream.protector.protect(ssrc, batch, payloads.length);
    const drop = rtpLossFault(stream.transport);
    const pacer = congestion?.pacer;
    const now = pacer ? this.#now() : 0;
    let wireBytes = 0;
    for (let i = 0; i < payloads.length; i++) {
      const entry = batch[i]!;
      const packet = entry.packet;
      wireBytes += packet.length;
      // A paced packet (or one behind paced ones) waits its turn; it is a send-history buffer (video), kept 512 packets.
      if (pacer && (entry.at > now || pacer.queued > 0)) pacer.dispatch(entry.at, packet, this.#writeLater);
      else if (drop?.() !== true) this.#write(stream.transport, packet);
      // Nothing of the frame is kept past this call: the caller's payloads, and (audio) the packet.
      entry.packet = EMPTY;
      entry.payload = EMPTY;
    }
    if (fec && repairs) {
      this.#fec.send(stream, fec, repairs, timestamp);
      this.#options.onRepairPackets?.(repairs.length);
    }
    if (history) {
      this.#repair.noteMediaSent(wireBytes);
    }
    counters.timestamp = timestamp;
    counters.sequenceNumber = (this.#sequenceNumber + 0xffff) & 0xffff;
    counters.rtpTimestamp = timestamp;
    counters.ntpTimestamp = ntpTimestamp(mediaTimeMs);
    counters.octetCount = (counters.octetCount + payloadBytes) >>> 0;
    counters.packetCount = (counters.packetCount + payloads.length) >>> 0;
    counters.headerBytesSent += headerBytes;
    // Starts werift's sender-report loop on the first frame; a no-op after.
    if (!this.#sender.rtcpRunning) void this.#sender.runRtcp();
    return timestamp;
  }

  /** The media stream as the loss repair sees it. */
  readonly #repairHost: RetransmitterHost = {
    stream: () => (this.#closed ? undefined : this.#srtpStream()),
    history: () => this.#history,
    srtpIndexOf: (sequenceNumber) => this.#srtpIndexOf(sequenceNumber),
    lastSequenceNumber: () => (this.#sequenceNumber + 0xffff) & 0xffff,
    path: () => this.#path(),
    writeAgain: (stream, packet) => this.#writeUnlessDropped(stream.transport, packet),
    resendsOff: (stream) => noResendsFault(stream.transport),
    countResent: (packets, bytes) => {
      this.#counters.retransmittedPacketsSent += packets;
      this.#counters.retransmittedBytesSent += bytes;
    },
  };

  /** Writes a packet the pacer held back, unless the sender closed or lost its transport meanwhile. */
  readonly #writeLater = (packet: Buffer): void => {
    const stream = this.#stream;
    if (this.#closed || stream === undefined) return;
    this.#writeUnlessDropped(stream.transport, packet);
  };

  /** Writes a packet unless the test-only RTP loss fault drops it. */
  #writeUnlessDropped(transport: RTCDtlsTransport, packet: Buffer): void {
    if (rtpLossFault(transport)?.() !== true) this.#write(transport, packet);
  }

  close(): void {
    this.#closed = true;
    const congestion = existingTransportCongestion(this.#stream?.transport);
    congestion?.withdrawPadding(this.#repair.padding);
    congestion?.forgetSender(this.#sender);
    this.#stopNacks();
    this.#stopFeedback();
    this.#repair.onKeyframeNeeded(undefined);
    this.#history?.clear();
  }

  /** The connection's SRTP state once DTLS is up; rebuilt if werift replaced the transport. */
  #srtpStream(): SrtpStream | undefined {
    const transport = this.#sender.dtlsTransport;
    if (transport?.state !== 'connected' || !transport.srtpStarted) return undefined;
    const srtp = transport.srtp;
    if (this.#stream?.transport === transport && this.#stream.srtp === srtp) return this.#stream;
    const context = srtp.localContext;
    const protector = createSrtpProtector({
      profile: context.profile,
      key: context.srtpSessionKey,
      salt: context.srtpSessionSalt,
      authKey: context.srtpSessionAuthTag,
    });
    this.#stream = { transport, srtp, protector };
    return this.#stream;
  }

  /** The first packet's header extensions (one-byte form, RFC 8285), or undefined for none. */
  #extensionBlock(playoutDelay: Buffer): ExtensionBlock | undefined {
    const elements: Array<[number, Buffer]> = [];
    if (this.#mid) elements.push([this.#mid.id, this.#mid.value]);
    if (this.#playoutDelayId !== undefined) elements.push([this.#playoutDelayId, playoutDelay]);
    return buildExtensionBlock(elements, this.#transportWideId);
  }

  /**
   * A frame's first packet's extensions: the latency mode's playout delay, or in smooth mode on a
   * long path whose receiver reported loss in the last 10 s, a minimum that covers a repair
   * (rtp-header.ts, `smoothPlayoutDelay`; the base RTT: the lowest from receiver reports over 15 s).
   */
  #firstExtensionBlock(mode: LatencyMode): ExtensionBlock | undefined {
    let key: string = mode;
    let payload = PLAYOUT_DELAY_PAYLOAD[mode];
    const now = this.#now();
    const rtt = this.#counters.rtt;
    // Noted every frame, so the base is known before a congested queue inflates the RTT.
    const baseRttMs = this.#baseRtt.note(now, rtt === undefined ? undefined : rtt * 1000);
    if (mode === 'smooth' && now - this.#repair.nackedAtMs < LOSS_MEMORY_MS) {
      const delay = smoothPlayoutDelay(baseRttMs);
      if (delay !== undefined) {
        key = `smooth:${delay.minMs}:${delay.maxMs}`;
        payload = playoutDelayPayload(delay.minMs, delay.maxMs);
      }
    }
    let block = this.#extensionBlocks.get(key);
    if (block === undefined && !this.#extensionBlocks.has(key)) {
      block = this.#extensionBlock(payload);
      this.#extensionBlocks.set(key, block);
    }
    return block;
  }

  /**
   * The FlexFEC stream to send repair packets on for this frame, if any: negotiated
   * (signalling/flexfec-negotiation.ts), the receiver NACKed within the last 10 s and has for
   * FEC_AFTER_MS with no delay-based decrease in that time, the path loses
   * without queueing (transport-cc active, not paced: on a queueing path repair packets add to
   * the queue that drops), and the estimate has room for them over the media — over what was
   * sent and over what the encoders will send at this estimate (an estimate that binds the
   * encoders leaves none: a raise reaches the encoder before the rate sent shows it) —
   * (FEC_HEADROOM: the controller does not see their bytes, flexfec-sender.ts), for H.264 and
   * H.265 (FEC_CODECS).
   */
  #fecStream(congestion: TransportCongestion | undefined): FlexfecStream | undefined {
    if (congestion === undefined || !congestion.pathClear()) return undefined;
    const now = this.#now();
    if (now - this.#repair.nackedAtMs >= LOSS_MEMORY_MS) return undefined;
    if (now - Math.max(this.#repair.nackingSinceMs, congestion.controller.lastDecreaseMs) < FEC_AFTER_MS) return undefined;
    if (congestion.controller.targetBps < FEC_HEADROOM * Math.max(congestion.sentBps(), congestion.mediaRateBps())) return undefined;
    if (!FEC_CODECS.has(this.codec ?? '')) return undefined;
    return flexfecOf(this.#transceiver);
  }

  /** Repair packets sent so far (FlexFEC). */
  get repairPacketsSent(): number {
    return this.#fec.sent;
  }

  /**
   * RTT (RTCP) and the path's estimate: the connection's transport-wide congestion controller's
   * target where the receiver sends that feedback, else its REMB, as werift last read it.
   */
  #path(): PathEstimate {
    const rttSeconds = this.#counters.rtt;
    const remb = this.#sender.receiverEstimatedMaxBitrate;
    const congestion = existingTransportCongestion(this.#stream?.transport);
    return {
      rttMs: rttSeconds === undefined ? undefined : rttSeconds * 1000,
      receiverEstimateBps: congestion?.active()
        ? congestion.controller.targetBps
        : typeof remb === 'bigint' && remb > 0n
          ? Number(remb)
          : undefined,
    };
  }

  /**
   * The SRTP index a kept packet was protected under: its sequence number under this rollover
   * counter, or the one before if it was sent before the last wrap (the history holds 512
   * packets, far less than 2^15).
   */
  #srtpIndexOf(sequenceNumber: number): number {
    const lastSent = (this.#sequenceNumber + 0xffff) & 0xffff;
    const rollover = sequenceNumber <= lastSent ? this.#rolloverCounter : Math.max(0, this.#rolloverCounter - 1);
    return rollover * 0x10000 + sequenceNumber;
  }

  #write(transport: RTCDtlsTransport, packet: Buffer): void {
    const counters = transport as unknown as WeriftTransportCounters;
    counters.bytesSent += packet.length;
    counters.packetsSent++;
    this.#socket.write(transport, packet);
  }
}
