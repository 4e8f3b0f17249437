/**
 * Transport-wide congestion control's sending half (draft-holmer-rmcat-transport-wide-cc-extensions-01):
 * one 16-bit sequence number per connection (every track of a connection shares it under BUNDLE,
 * resends answering NACKs included), the send time and size of each numbered packet in a bounded
 * history, and the receiver's feedback (RTCP RTPFB, FMT 15) read back into per-packet
 * (sent, size, arrived | lost) for the congestion controller (congestion-controller.ts).
 *
 * werift parses the feedback's chunks and deltas; its own `packetResults` skips status-vector
 * chunks (Chromium sends them whenever statuses mix), so the statuses are walked here.
 *
 * The connection's state also runs its bandwidth probes (bandwidth-probe.ts decides when and how
 * a cluster reads) and shares its estimate among its video tracks. ~460 lines: the feedback
 * walk, the send history, pacing, probes and shares all key on the connection's one transport-wide
 * sequence; the next to move out, if it grows, is the probe's run (start, pad, end).
 */

import { evaluateCluster, ProbeScheduler, type ProbeOutcome, type ProbePacket, type ProbeRules } from './bandwidth-probe.ts';
import { CongestionController, type CongestionControllerOptions, type PacketFeedback } from './congestion-controller.ts';
import { PacketPacer } from './packet-pacer.ts';
import { ADAPTATION } from '../../media/video-bitrate-adaptation.ts';

export const TRANSPORT_WIDE_CC_URI = 'http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01';

/** RTCP transport-layer feedback (RTPFB, 205) and its transport-wide format. */
export const RTPFB = 205;
export const TRANSPORT_WIDE_FEEDBACK_FORMAT = 15;

/** Packets remembered: ~16 s at 4 Mbit/s of 1,200-byte packets. */
const HISTORY_SIZE = 8192;

/**
 * A sender whose media packets the receiver's feedback may report lost: it can resend them
 * without waiting for a NACK (which may itself be lost, and is not sent again for ~100 ms).
 */
export interface ReportedLossListener {
  /** Feedback reports these packets lost, each by its media sequence number and which copy was lost. */
  onReportedLoss(losses: readonly ReportedLoss[]): void;
}

export interface ReportedLoss {
  /** The media sequence number (of the original, for a lost resend). */
  readonly sequenceNumber: number;
  /** Which copy was lost: 0 the first, n its nth resend. */
  readonly copy: number;
}

/** The media packet a numbered packet carries, when its sender wants its loss reported. */
export interface CarriedPacket {
  readonly listener: ReportedLossListener;
  readonly sequenceNumber: number;
  readonly copy: number;
}

/** Send time and size of each numbered packet, by transport-wide sequence number (ring). */
export class TransportSendHistory {
  readonly #size: number;
  /** The full (unwrapped) sequence number in each slot, -1 for none. */
  readonly #sequence: Float64Array;
  readonly #sentAt: Float64Array;
  readonly #bytes: Uint32Array;
  /** Whose media packet each slot carries (undefined: nobody listens — padding, audio). */
  readonly #listener: (ReportedLossListener | undefined)[];
  readonly #mediaSequence: Uint16Array;
  readonly #copy: Uint8Array;
  /** Unwrapped: the next packet's number; its low 16 bits go on the wire. */
  #next: number;

  constructor(size: number = HISTORY_SIZE, start: number = Math.floor(Math.random() * 0x10000)) {
    this.#size = size;
    this.#sequence = new Float64Array(size).fill(-1);
    this.#sentAt = new Float64Array(size);
    this.#bytes = new Uint32Array(size);
    this.#listener = new Array<ReportedLossListener | undefined>(size).fill(undefined);
    this.#mediaSequence = new Uint16Array(size);
    this.#copy = new Uint8Array(size);
    this.#next = start;
  }

  /**
   * Numbers one packet leaving at `sentAtMs`; `listener` (when given) hears if it is reported lost,
   * as copy `copy` of its media packet `mediaSequence`. Returns the 16-bit sequence number to write into it.
   */
  send(bytes: number, sentAtMs: number, listener?: ReportedLossListener, mediaSequence: number = 0, copy: number = 0): number {
    const sequence = this.#next++;
    const slot = sequence % this.#size;
    this.#sequence[slot] = sequence;
    this.#sentAt[slot] = sentAtMs;
    this.#bytes[slot] = bytes;
    this.#listener[slot] = listener;
    this.#mediaSequence[slot] = mediaSequence;
    this.#copy[slot] = copy;
    return sequence & 0xffff;
  }

  /** The media packet a kept numbered packet carries, if its sender listens for its loss. */
  carried(sequence: number): CarriedPacket | undefined {
    if (sequence < 0) return undefined;
    const slot = sequence % this.#size;
    const listener = this.#listener[slot];
    if (this.#sequence[slot] !== sequence || listener === undefined) return undefined;
    return { listener, sequenceNumber: this.#mediaSequence[slot]!, copy: this.#copy[slot]! };
  }

  /** The unwrapped number of a 16-bit one, taken as the nearest to the newest sent. */
  unwrap(sequence16: number): number {
    const newest = this.#next - 1;
    let diff = (sequence16 - (newest & 0xffff)) & 0xffff;
    if (diff >= 0x8000) diff -= 0x10000;
    return newest + diff;
  }

  /** The number the next packet will take (unwrapped). */
  get nextSequence(): number {
    return this.#next;
  }

  /** The packet's send time and size, if still kept. */
  get(sequence: number): { sentAtMs: number; bytes: number } | undefined {
    if (sequence < 0) return undefined;
    const slot = sequence % this.#size;
    if (this.#sequence[slot] !== sequence) return undefined;
    return { sentAtMs: this.#sentAt[slot]!, bytes: this.#bytes[slot]! };
  }
}

/** The parts of werift's parsed `TransportWideCC` read here. */
export interface TransportWideFeedback {
  readonly baseSequenceNumber: number;
  readonly packetStatusCount: number;
  /** 24-bit, multiples of 64 ms. */
  readonly referenceTime: number;
  readonly packetChunks: readonly (
    { readonly runLength: number; readonly packetStatus: number } | { readonly symbolSize: number; readonly symbolList: readonly number[] }
  )[];
  /** µs each (werift's `RecvDelta.delta`). */
  readonly recvDeltas: readonly { readonly delta: number }[];
}

/** One packet's fate in a feedback: arrival in µs of the receiver's clock (reference + deltas), or lost. */
export interface FeedbackStatus {
  readonly sequence16: number;
  readonly arrivedAtUs: number | undefined;
}

const NOT_RECEIVED = 0;
const SMALL_DELTA = 1;
const LARGE_DELTA = 2;

/** The statuses of a feedback, in sequence order (a malformed one yields what it could read). */
export function feedbackStatuses(feedback: TransportWideFeedback): FeedbackStatus[] {
  const statuses: number[] = [];
  const count = feedback.packetStatusCount;
  for (const chunk of feedback.packetChunks) {
    if (statuses.length >= count) break;
    if ('runLength' in chunk) {
      for (let i = 0; i < chunk.runLength && statuses.length < count; i++) statuses.push(chunk.packetStatus);
    } else {
      for (const symbol of chunk.symbolList) {
        if (statuses.length >= count) break;
        statuses.push(symbol);
      }
    }
  }
  const out: FeedbackStatus[] = [];
  let arrivedAtUs = feedback.referenceTime * 64_000;
  let deltaIndex = 0;
  for (let i = 0; i < statuses.length; i++) {
    const sequence16 = (feedback.baseSequenceNumber + i) & 0xffff;
    const status = statuses[i];
    if (status === SMALL_DELTA || status === LARGE_DELTA) {
      const delta = feedback.recvDeltas[deltaIndex++];
      if (delta === undefined) break;
      arrivedAtUs += delta.delta;
      out.push({ sequence16, arrivedAtUs });
    } else if (status === NOT_RECEIVED) {
      out.push({ sequence16, arrivedAtUs: undefined });
    } else {
      // 3: received without a delta (reserved in -01): counted as received at the last time.
      out.push({ sequence16, arrivedAtUs });
    }
  }
  return out;
}

/** The 24-bit reference time wraps every ~12 days; feedback times are unwrapped against the previous one. */
const REFERENCE_WRAP_US = 2 ** 24 * 64_000;

/**
 * One connection's congestion control: its transport-wide sequence, the send history and the
 * controller that reads the receiver's feedback.
 */
/**
 * Pacing: 2.5 × the target, when the target is under 1.2 × the rate sent over the last second —
 * unless a probe got through since the path last queued (pacingRateBps).
 */
export const PACING = { factor: 2.5, constrainedBelow: 1.2, rateWindowMs: 1_000 } as const;

/**
 * What sends a probe's padding (bandwidth-probe.ts): one of the connection's video senders with
 * RTX negotiated, which resends a recent packet on its RTX stream.
 */
export interface PaddingSource {
  /** Sends one padding packet now, numbered on this connection; its size on the wire, or 0 if it could not. */
  sendPadding(): number;
  /** A probe it padded ended so (metrics). */
  onProbe?(outcome: ProbeOutcome): void;
}

/** A probe under way: its padding's numbers (unwrapped), and the feedback on them so far. */
interface ProbeCluster {
  readonly firstSequence: number;
  /** Set when the padding is all sent. */
  lastSequence: number | undefined;
  readonly packets: ProbePacket[];
  readonly source: PaddingSource;
  /** Given up (outcome `lost`) if its feedback is not all back by then. */
  deadlineMs: number;
}

export interface TransportCongestionOptions extends CongestionControllerOptions {
  readonly now?: () => number;
  readonly history?: TransportSendHistory;
  readonly probe?: ProbeRules;
  /** Timers for the probe's padding (tests); default setTimeout. */
  readonly setTimer?: (fn: () => void, ms: number) => void;
}

export class TransportCongestion {
  readonly history: TransportSendHistory;
  readonly controller: CongestionController;
  readonly pacer: PacketPacer;
  readonly #now: () => number;
  readonly #setTimer: (fn: () => void, ms: number) => void;
  readonly #probes: ProbeScheduler;
  #padding: PaddingSource | undefined;
  #cluster: ProbeCluster | undefined;
  /** The connection's video senders: each one's weight (its track's configured rate, kbit/s; undefined: not known) and last frame. */
  readonly #senders = new Map<object, { weight: number | undefined; lastSentMs: number }>();
  /** Bytes numbered per 100 ms slot over the last second (the rate sent). */
  readonly #sentSlots = new Float64Array(10);
  #sentSlot = 0;
  #sentSlotAt = 0;
  /** When the last feedback came (sender's clock), or undefined. */
  #feedbackAtMs: number | undefined;
  #referenceOffsetUs = 0;
  #lastReferenceUs: number | undefined;
  /** When a probe last got through (its cluster arrived as fast as it left), ms; -Infinity: never. */
  #probeThroughMs = -Infinity;
  /** The highest sequence number reported so far (unwrapped): a repeated report counts once. */
  #highestReported = -1;

  constructor(options: TransportCongestionOptions = {}) {
    this.history = options.history ?? new TransportSendHistory();
    this.controller = new CongestionController(options);
    this.#now = options.now ?? (() => performance.now());
    this.#setTimer = options.setTimer ?? ((fn, ms) => void setTimeout(fn, ms));
    this.#probes = new ProbeScheduler(options.probe);
    this.pacer = new PacketPacer({ now: this.#now });
  }

  /**
   * A video sender of the connection sends a frame now; its share of the estimate is weighted by
   * `weightKbps`, its track's configured rate (undefined: an even share), which also bounds how
   * high probes look.
   */
  noteSender(key: object, weightKbps: number | undefined): void {
    const weight = weightKbps !== undefined && weightKbps > 0 ? weightKbps : undefined;
    const now = this.#now();
    const entry = this.#senders.get(key);
    if (entry === undefined) this.#senders.set(key, { weight, lastSentMs: now });
    else {
      entry.weight = weight;
      entry.lastSentMs = now;
    }
  }

  /** The sender closed. */
  forgetSender(key: object): void {
    this.#senders.delete(key);
  }

  /**
   * `key`'s share of the connection's estimate: its weight over the weights of the video senders
   * that sent within the last second, itself included (1 alone). Two tracks on one link share it
   * by their configured rates instead of each taking all of it; a paused one gives its share back.
   */
  shareOf(key: object): number {
    const now = this.#now();
    let total = 0;
    let own: number | undefined;
    for (const [k, entry] of this.#senders) {
      if (k === key) own = entry.weight ?? 1;
      else if (now - entry.lastSentMs <= SHARE_WINDOW_MS) total += entry.weight ?? 1;
    }
    // Not yet sending (or no weight): all of it, until its first frame says otherwise — a share of
    // 0 would hold that first frame back (the send budget) for good.
    if (own === undefined || !(own > 0)) return 1;
    return own / (own + total);
  }

  /** A sender that can pad probes offers itself; the first one offered is kept until withdrawn. */
  offerPadding(source: PaddingSource): void {
    this.#padding ??= source;
  }

  /** The sender closes: it pads no more probes (one under way stops sending). */
  withdrawPadding(source: PaddingSource): void {
    if (this.#padding === source) this.#padding = undefined;
  }

  /**
   * Numbers a packet leaving at `atMs` (default now; later when paced), carrying copy `copy` of
   * media packet `mediaSequence` of `listener` (which hears if feedback reports it lost); returns
   * the 16-bit number for its extension.
   */
  send(bytes: number, atMs: number = this.#now(), listener?: ReportedLossListener, mediaSequence?: number, copy?: number): number {
    this.#countSent(bytes);
    return this.history.send(bytes, atMs, listener, mediaSequence, copy);
  }

  /** The rate sent over the last second, bit/s. */
  sentBps(): number {
    this.#countSent(0);
    let bytes = 0;
    for (const slot of this.#sentSlots) bytes += slot;
    return (bytes * 8 * 1000) / PACING.rateWindowMs;
  }

  /**
   * The pacing rate, bit/s, or undefined when packets go at once: they are paced when the
   * receiver sends feedback, the path's estimate is near (under 1.2 ×) what is being sent, and
   * the path queues — its last word on delay was a decrease, not a probe that got through. A path
   * that only loses packets (or whose estimate fell once on a delay spike and was probed back) has
   * room for a frame's burst: pacing a keyframe there at 2.5 × an estimate near the media rate
   * holds it and every frame behind it ~100 ms, and with a repair on top the picture stalls for
   * over 200 ms (docs/performance.md, 2 % loss).
   */
  pacingRateBps(): number | undefined {
    if (!this.active()) return undefined;
    if (this.#probeThroughMs > this.controller.lastDecreaseMs) return undefined;
    const target = this.controller.targetBps;
    return target < PACING.constrainedBelow * this.sentBps() ? PACING.factor * target : undefined;
  }

  #countSent(bytes: number): void {
    const slotMs = PACING.rateWindowMs / this.#sentSlots.length;
    const now = Math.floor(this.#now() / slotMs);
    if (now !== this.#sentSlotAt) {
      const steps = Math.min(this.#sentSlots.length, now - this.#sentSlotAt);
      for (let i = 0; i < steps; i++) {
        this.#sentSlot = (this.#sentSlot + 1) % this.#sentSlots.length;
        this.#sentSlots[this.#sentSlot] = 0;
      }
      this.#sentSlotAt = now;
    }
    this.#sentSlots[this.#sentSlot]! += bytes;
  }

  /** The receiver sent feedback within `withinMs`: its estimate is what the path says. */
  active(withinMs: number = 5_000): boolean {
    return this.#feedbackAtMs !== undefined && this.#now() - this.#feedbackAtMs <= withinMs;
  }

  /**
   * The receiver's feedback is current and the path does not queue (packets are not paced): room
   * for redundancy — a resend's second copy, FlexFEC repair packets — that would only add to a
   * queue that drops.
   */
  pathClear(): boolean {
    return this.active() && this.pacingRateBps() === undefined;
  }

  /** Takes one feedback report; returns the new target (bit/s). */
  onFeedback(feedback: TransportWideFeedback, rttMs?: number): number {
    const now = this.#now();
    this.#feedbackAtMs = now;
    const statuses = feedbackStatuses(feedback);
    const reference = feedback.referenceTime * 64_000;
    if (this.#lastReferenceUs !== undefined && reference < this.#lastReferenceUs - REFERENCE_WRAP_US / 2) {
      this.#referenceOffsetUs += REFERENCE_WRAP_US;
    }
    this.#lastReferenceUs = reference;
    const packets: PacketFeedback[] = [];
    const cluster = this.#cluster;
    let losses: Map<ReportedLossListener, ReportedLoss[]> | undefined;
    for (const status of statuses) {
      const sequence = this.history.unwrap(status.sequence16);
      if (sequence <= this.#highestReported) continue; // reported before (feedback may overlap)
      const sent = this.history.get(sequence);
      if (sent === undefined) continue;
      this.#highestReported = sequence;
      const packet: PacketFeedback = {
        sentAtMs: sent.sentAtMs,
        bytes: sent.bytes,
        arrivedAtMs: status.arrivedAtUs === undefined ? undefined : (status.arrivedAtUs + this.#referenceOffsetUs) / 1000,
      };
      packets.push(packet);
      if (cluster !== undefined && sequence >= cluster.firstSequence && sequence <= (cluster.lastSequence ?? Infinity)) {
        cluster.packets.push(packet);
      }
      if (packet.arrivedAtMs === undefined) {
        const carried = this.history.carried(sequence);
        if (carried !== undefined) {
          losses ??= new Map();
          let list = losses.get(carried.listener);
          if (list === undefined) losses.set(carried.listener, (list = []));
          list.push({ sequenceNumber: carried.sequenceNumber, copy: carried.copy });
        }
      }
    }
    this.controller.onFeedback(packets, now, rttMs);
    // After the estimate took the report: a resend is paced (and budgeted) at the new target.
    if (losses !== undefined) for (const [listener, list] of losses) listener.onReportedLoss(list);
    this.#probe(now);
    return this.controller.targetBps;
  }

  /** Ends a probe whose feedback is all back (or overdue), then starts the next one if due. */
  #probe(now: number): void {
    const cluster = this.#cluster;
    if (cluster !== undefined && cluster.lastSequence !== undefined) {
      if (this.#highestReported >= cluster.lastSequence) this.#endProbe(cluster, now);
      else if (now > cluster.deadlineMs) this.#endProbe(cluster, now, 'lost');
    }
    const source = this.#padding;
    if (source === undefined || this.#cluster !== undefined) return;
    const controller = this.controller;
    const sentBps = this.sentBps();
    const rate = this.#probes.due(now, {
      targetBps: controller.targetBps,
      ceilingBps: this.#probeCeilingBps(now),
      sentBps,
      lastDecreaseMs: controller.lastDecreaseMs,
    });
    if (rate !== undefined) this.#startProbe(source, rate, sentBps, now);
  }

  /**
   * How high probes look: what the connection's video tracks could use — their configured rates
   * over the encoders' headroom (× 0.9), and a tenth more — where every sending track's rate is
   * known, else the estimate's own bound. An estimate there needs no probing: nothing would send
   * more.
   */
  #probeCeilingBps(now: number): number {
    const demandKbps = this.#demandKbps(now);
    if (demandKbps === undefined) return this.controller.maxBps;
    return Math.min(this.controller.maxBps, ((demandKbps * 1000) / ENCODER_HEADROOM) * 1.1);
  }

  /**
   * The configured rates of the video tracks that sent within the last second, kbit/s; undefined
   * when one of them has none (or none sent).
   */
  #demandKbps(now: number): number | undefined {
    let demandKbps = 0;
    for (const entry of this.#senders.values()) {
      if (now - entry.lastSentMs > SHARE_WINDOW_MS) continue;
      if (entry.weight === undefined) return undefined;
      demandKbps += entry.weight;
    }
    return demandKbps === 0 ? undefined : demandKbps;
  }

  /**
   * What the media will send at the current estimate, bit/s: the encoders' share of it (× 0.9,
   * video-bitrate-adaptation.ts), or the tracks' configured rates where those are lower. Ahead of
   * `sentBps()`, which lags a raise by up to a second: room for repair packets is judged on this.
   */
  mediaRateBps(): number {
    const estimate = ENCODER_HEADROOM * this.controller.targetBps;
    const demandKbps = this.#demandKbps(this.#now());
    return demandKbps === undefined ? estimate : Math.min(estimate, demandKbps * 1000);
  }

  /**
   * Pads the link up to `rateBps` (the media keeps flowing beside it) for the cluster's duration:
   * a packet whenever the padding falls behind its share, checked every few ms.
   */
  #startProbe(source: PaddingSource, rateBps: number, sentBps: number, startMs: number): void {
    const rules = this.#probes.rules;
    // The media's share is what was sent over the last second; the padding makes up the rest,
    // and at least enough for `minPackets` packets.
    const paddingBps = Math.max(rateBps - sentBps, (rules.minPackets * rules.packetBytes * 8 * 1000) / rules.durationMs);
    const cluster: ProbeCluster = {
      firstSequence: this.history.nextSequence,
      lastSequence: undefined,
      packets: [],
      source,
      deadlineMs: Infinity,
    };
    this.#cluster = cluster;
    // Until the cluster's feedback is read (and the queue it built has drained), its delay is no
    // reason to lower the estimate.
    this.controller.holdDecreases(Infinity);
    let paddedBytes = 0;
    const pad = (): void => {
      if (this.#cluster !== cluster) return;
      const now = this.#now();
      const elapsed = Math.min(now - startMs, rules.durationMs);
      const owed = (paddingBps * elapsed) / 8000;
      while (paddedBytes < owed && this.#padding === source) {
        const bytes = source.sendPadding();
        if (bytes === 0) break;
        paddedBytes += bytes;
      }
      if (elapsed < rules.durationMs && this.#padding === source) {
        this.#setTimer(pad, PROBE_TICK_MS);
        return;
      }
      cluster.lastSequence = this.history.nextSequence - 1;
      cluster.deadlineMs = now + rules.timeoutMs;
      if (cluster.lastSequence < cluster.firstSequence) this.#endProbe(cluster, now, 'lost');
    };
    // The first packet goes now: the cluster's send span starts with it.
    paddedBytes += source.sendPadding();
    this.#setTimer(pad, PROBE_TICK_MS);
  }

  #endProbe(cluster: ProbeCluster, now: number, forced?: ProbeOutcome): void {
    this.#cluster = undefined;
    this.controller.holdDecreases(now + PROBE_DRAIN_MS);
    let outcome: ProbeOutcome = forced ?? 'lost';
    if (forced === undefined) {
      const result = evaluateCluster(cluster.packets, this.#probes.rules);
      // A full link measured its capacity: the estimate moves toward it (0.95 × it at least, its
      // upper bound at most; congestion-controller.ts). Not held at the link's edge: for 5 s after
      // the measurement an increase stops at the capacity, so the encoder (0.9 × the estimate)
      // stays under it. For the schedule it stays 'saturated' (the link is full) unless it lifted
      // the target far (WIDER_LINK).
      if (result.bps === undefined) outcome = 'lost';
      else if (result.saturated) {
        // Full, and far wider than the estimate said (a cap lifted; the cluster's own rate may be
        // what filled it, not the link): probe again soon, as after a raise, for the real width.
        const before = this.controller.targetBps;
        this.controller.onSaturatedProbe(result.bps, now);
        outcome = this.controller.targetBps >= WIDER_LINK * before ? 'raised' : 'saturated';
      } else outcome = this.controller.onProbeResult(result.bps, now) ? 'raised' : 'no_gain';
      if (outcome === 'raised' || outcome === 'no_gain') this.#probeThroughMs = now;
    }
    this.#probes.finished(now, outcome);
    cluster.source.onProbe?.(outcome);
  }
}

/** The encoders' share of an estimate: what video-bitrate-adaptation.ts sets them to. */
const ENCODER_HEADROOM = ADAPTATION.headroom;
/** A video sender counts in the others' shares while it sent a frame within this, ms. */
const SHARE_WINDOW_MS = 1_000;
/** How often a probe's padding is topped up, ms. */
const PROBE_TICK_MS = 5;
/**
 * A probe that found the link full but raised the target by this factor or more counts as a raise
 * (the next probe soon, at twice the estimate): under a steady cap, one after an overuse lifts it by
 * 0.95 / 0.85 ≈ 1.12 at most.
 */
const WIDER_LINK = 1.25;
/** After a probe's result, how long its queue is given to drain before overuse lowers the estimate again, ms. */
const PROBE_DRAIN_MS = 250;

/**
 * The congestion state of each connection, keyed by its DTLS transport (one per connection under
 * BUNDLE), made on first use by whichever of its senders numbers a packet first.
 */
const byTransport = new WeakMap<object, TransportCongestion>();

export function transportCongestion(transport: object): TransportCongestion {
  let state = byTransport.get(transport);
  if (state === undefined) {
    state = new TransportCongestion();
    byTransport.set(transport, state);
  }
  return state;
}

/** The connection's state if one was made (a sender numbered packets on it). */
export function existingTransportCongestion(transport: object | undefined): TransportCongestion | undefined {
  return transport === undefined ? undefined : byTransport.get(transport);
}
