/**
 * One video sender's answers to loss (issue 25 part 4): NACKed packets resent within the
 * loss-recovery rules (loss-recovery.ts: a budget, once per RTT, nothing too old), packets the
 * connection's transport-wide feedback reports lost resent without waiting for a NACK, a second
 * copy of each resend on a path that loses without queueing, keyframes asked for when a NACKed
 * loss is left unrepaired or a receiver reports picture loss (throttled), and the padding of the
 * connection's bandwidth probes (RTX copies of recent packets). Resends go out on the RTX stream
 * where the receiver negotiated it (rtx-sender.ts), else as the kept packet.
 *
 * Why resends without a NACK: a libwebrtc receiver NACKs a packet once when it sees the gap and
 * again only a round trip later — with its default RTT, 100 ms, where it has measured none (a
 * receive-only peer) — so a lost NACK or a lost resend cost the picture ~100 ms more: on a 40 ms
 * path at 2 % loss, the 180–220 ms gaps left (docs/performance.md, "Repairs that wait for no NACK").
 *
 * Split from rtp-track-sender.ts, which owns the media stream (its sequence numbers, SRTP index
 * and send history) and lends it here through `RetransmitterHost`.
 */

import type { ProbeOutcome } from './bandwidth-probe.ts';
import {
  KeyframeRequestThrottle,
  LOSS_RECOVERY,
  RetransmissionBudget,
  type Clock,
  type LossRecoveryRules,
  type PathEstimate,
  type RetransmissionRefusal,
  type UnaskedResend,
} from './loss-recovery.ts';
import type { RtpSendHistory } from './rtp-send-history.ts';
import { RTX_OSN_BYTES, type RtxSender } from './rtx-sender.ts';
import type { SrtpStream } from './srtp-protector.ts';
import { existingTransportCongestion, type PaddingSource, type ReportedLoss, type ReportedLossListener } from './transport-feedback.ts';

/** What a sender reports of its loss repair (for metrics). */
export interface LossRepairCallbacks {
  /** Called with the number of packets (and their bytes) resent, for a NACK or unasked. */
  readonly onRetransmit?: (packets: number, bytes: number) => void;
  /**
   * Called with the number of packets resent that no NACK asked for (also counted in
   * `onRetransmit`): `feedback_loss`, the connection's transport-wide feedback reported them lost
   * first; `second_copy`, a resend's second copy.
   */
  readonly onUnaskedResends?: (reason: UnaskedResend, packets: number) => void;
  /** Called with the NACKed packets not resent, by reason. */
  readonly onRetransmissionsRefused?: (reason: RetransmissionRefusal, packets: number) => void;
  /** Called when a picture-loss report is ignored: a keyframe was asked for too recently. */
  readonly onKeyframeRequestThrottled?: () => void;
  /** Called when a bandwidth probe this sender padded ended (bandwidth-probe.ts). */
  readonly onProbe?: (outcome: ProbeOutcome) => void;
}

export interface RetransmitterOptions extends LossRepairCallbacks {
  /** The loss-recovery rules; default LOSS_RECOVERY. */
  readonly rules?: LossRecoveryRules;
  readonly now: Clock;
  /** Timers (a resend's second copy). */
  readonly setTimer: (fn: () => void, ms: number) => void;
}

/** The media stream a Retransmitter resends from (rtp-track-sender.ts). */
export interface RetransmitterHost {
  /** The connection's SRTP stream, or undefined (closed, not connected yet). */
  stream(): SrtpStream | undefined;
  /** The kept packets (video, once its first frame went), or undefined. */
  history(): RtpSendHistory | undefined;
  /** The SRTP index a kept packet was protected under. */
  srtpIndexOf(sequenceNumber: number): number;
  /** The sequence number the newest media packet took. */
  lastSequenceNumber(): number;
  /** RTT and the path's estimate, as the rules read them. */
  path(): PathEstimate;
  /** Writes a kept packet again as it left (no RTX negotiated). */
  writeAgain(stream: SrtpStream, packet: Buffer): void;
  /** Tests only (the `noResends` peer fault): nothing is to be resent on this stream. */
  resendsOff(stream: SrtpStream): boolean;
  /** Counts resent packets in werift's counters, which its stats read. */
  countResent(packets: number, bytes: number): void;
}

/** What one sender did with loss reports so far (tests, diagnostics). */
export interface LossRecoveryCounts {
  retransmittedPackets: number;
  retransmittedBytes: number;
  /** Of those, resent because transport-wide feedback reported them lost before a NACK came. */
  repairedFromFeedback: number;
  /** Of those, second copies of a resend (a path that loses without queueing). */
  secondCopies: number;
  /** Media bytes sent (not resends), for comparison with the budget. */
  mediaBytes: number;
  refused: Record<RetransmissionRefusal, number>;
  keyframeRequestsThrottled: number;
  /** Keyframes the sender asked for itself because it left a loss unrepaired. */
  keyframesForLoss: number;
}

/** NACKs this far apart are two stretches of loss, ms (a stretch starts with its first NACK). */
export const LOSS_MEMORY_MS = 10_000;
/** A resend's second copy leaves this long after the first, ms: past a short burst of loss. */
const SECOND_COPY_AFTER_MS = 10;
/** Probe padding copies one of this many newest packets. */
const PADDING_REACH = 32;

export class Retransmitter {
  readonly #host: RetransmitterHost;
  readonly #rtx: RtxSender;
  readonly #options: RetransmitterOptions;
  readonly #now: Clock;
  readonly #budget: RetransmissionBudget;
  readonly #keyframes: KeyframeRequestThrottle;
  #keyframeNeeded: (() => void) | undefined;
  readonly #counts: LossRecoveryCounts = {
    retransmittedPackets: 0,
    retransmittedBytes: 0,
    repairedFromFeedback: 0,
    secondCopies: 0,
    mediaBytes: 0,
    refused: { not_in_history: 0, too_old: 0, within_rtt: 0, budget: 0 },
    keyframeRequestsThrottled: 0,
    keyframesForLoss: 0,
  };
  /** When the receiver last NACKed, ms of the clock (-Infinity: never). */
  #nackedAtMs = -Infinity;
  /** When the current stretch of NACKs began (its first NACK, none LOSS_MEMORY_MS before it). */
  #nackingSinceMs = -Infinity;
  /** How far back the last padding packet reached (cycles over the newest packets). */
  #paddingBack = 0;
  /** Hears which of the sender's packets the connection's feedback reports lost. */
  readonly lossListener: ReportedLossListener = { onReportedLoss: (losses) => this.#repairReportedLoss(losses) };
  /** What the connection's bandwidth probes pad with: RTX copies of the sender's recent packets. */
  readonly padding: PaddingSource = {
    sendPadding: () => this.#sendPadding(),
    onProbe: (outcome) => this.#options.onProbe?.(outcome),
  };

  constructor(host: RetransmitterHost, rtx: RtxSender, options: RetransmitterOptions) {
    this.#host = host;
    this.#rtx = rtx;
    this.#options = options;
    this.#now = options.now;
    const rules = options.rules ?? LOSS_RECOVERY;
    this.#budget = new RetransmissionBudget(rules, this.#now);
    this.#keyframes = new KeyframeRequestThrottle(rules, this.#now);
  }

  get counts(): Readonly<LossRecoveryCounts> {
    return this.#counts;
  }

  /** When the receiver last NACKed (ms of the clock; -Infinity: never): smooth mode's delay follows it. */
  get nackedAtMs(): number {
    return this.#nackedAtMs;
  }

  /** When the receiver's current stretch of NACKs began (ms of the clock; -Infinity: never). */
  get nackingSinceMs(): number {
    return this.#nackingSinceMs;
  }

  /** Who makes a keyframe when a NACKed loss is left unrepaired (throttled here); undefined: nobody. */
  onKeyframeNeeded(listener: (() => void) | undefined): void {
    this.#keyframeNeeded = listener;
  }

  /** The sender sent `bytes` of media: the budget's share grows with it. */
  noteMediaSent(bytes: number): void {
    this.#budget.noteMediaSent(bytes);
    this.#counts.mediaBytes += bytes;
  }

  /**
   * A receiver reported picture loss (PLI, FIR): true if a keyframe should be made for it, false
   * if one was asked for less than max(300 ms, RTT) ago (that one answers this report too).
   */
  pictureLost(): boolean {
    if (this.#keyframes.pictureLost(this.#budget.rttMs(this.#host.path()))) return true;
    this.#counts.keyframeRequestsThrottled++;
    this.#options.onKeyframeRequestThrottled?.();
    return false;
  }

  /** The receiver NACKed these media sequence numbers. */
  nack(sequenceNumbers: readonly number[]): void {
    const now = this.#now();
    if (now - this.#nackedAtMs >= LOSS_MEMORY_MS) this.#nackingSinceMs = now;
    this.#nackedAtMs = now;
    this.#resend(sequenceNumbers, 'nack');
  }

  /**
   * The connection's transport-wide feedback reports packets of this sender lost: each is resent
   * now if the lost copy was its newest (else a NACK, or a second copy, already answered it).
   */
  #repairReportedLoss(losses: readonly ReportedLoss[]): void {
    const history = this.#host.history();
    if (history === undefined) return;
    let sequenceNumbers: number[] | undefined;
    for (const loss of losses) {
      if (history.resends(loss.sequenceNumber) !== loss.copy) continue;
      (sequenceNumbers ??= []).push(loss.sequenceNumber);
    }
    if (sequenceNumbers !== undefined) this.#resend(sequenceNumbers, 'feedback_loss');
  }

  /**
   * A second RTX copy of each resend in `sequenceNumbers` that was not resent again since
   * (`copies`: the number of each one's first copy): on a path that loses without queueing, a lost
   * resend is otherwise known only from the receiver's next feedback or NACK, ~100 ms later. Sent
   * a little after the first, so a short burst of loss does not take both.
   */
  #sendSecondCopies(sequenceNumbers: readonly number[], copies: readonly number[]): void {
    const history = this.#host.history();
    if (history === undefined) return;
    const due = sequenceNumbers.filter((sequenceNumber, i) => history.resends(sequenceNumber) === copies[i]);
    if (due.length > 0) this.#resend(due, 'second_copy');
  }

  /**
   * Resends kept packets within the loss-recovery rules: `nack`, the receiver asked; unasked,
   * `feedback_loss` (its transport-wide feedback says the newest copy was lost) or `second_copy`
   * (#sendSecondCopies) — the once-per-RTT rule does not hold those back, and what the rules
   * refuse them is skipped quietly (a NACK that follows is counted, and answered with a keyframe,
   * there). A loss a NACK asked for and left unrepaired asks for a keyframe (throttled). On a
   * path that loses without queueing, each first copy gets a second one 10 ms later.
   */
  #resend(sequenceNumbers: readonly number[], trigger: 'nack' | UnaskedResend): void {
    const host = this.#host;
    const stream = host.stream();
    const history = host.history();
    if (stream === undefined || history === undefined || host.resendsOff(stream)) return;
    const asked = trigger === 'nack';
    const rtx = this.#rtx.stream();
    const path = host.path();
    const refused: Record<RetransmissionRefusal, number> = { not_in_history: 0, too_old: 0, within_rtt: 0, budget: 0 };
    const twice = rtx !== undefined && trigger !== 'second_copy' && existingTransportCongestion(stream.transport)?.pathClear() === true;
    let firstCopies: number[] | undefined;
    let resent = 0;
    let resentBytes = 0;
    for (const sequenceNumber of sequenceNumbers) {
      const packet = history.get(sequenceNumber);
      if (packet === undefined) {
        refused.not_in_history++;
        continue;
      }
      // An RTX packet is the original's plus the 2-byte original sequence number.
      const bytes = rtx === undefined ? packet.length : packet.length + RTX_OSN_BYTES;
      const resentAtMs = asked ? history.resentAt(sequenceNumber) : undefined;
      const reason = this.#budget.admit({ bytes, sentAtMs: history.sentAt(sequenceNumber)!, resentAtMs }, path);
      if (reason !== undefined) {
        refused[reason]++;
        continue;
      }
      // The newest copy: a report that an older one was lost no longer asks for another.
      const copy = history.markResent(sequenceNumber, this.#now())!;
      resent++;
      resentBytes += bytes;
      if (rtx === undefined) {
        host.writeAgain(stream, packet);
        continue;
      }
      this.#rtx.send(stream, rtx, packet, sequenceNumber, host.srtpIndexOf(sequenceNumber), true, { listener: this.lossListener, copy });
      if (twice) (firstCopies ??= []).push(sequenceNumber);
    }
    if (firstCopies !== undefined) {
      const sent = firstCopies;
      const copies = sent.map((sequenceNumber) => history.resends(sequenceNumber)!);
      this.#options.setTimer(() => this.#sendSecondCopies(sent, copies), SECOND_COPY_AFTER_MS);
    }
    this.#countResent(resent, resentBytes, asked ? undefined : trigger);
    if (!asked) return;
    const counts = this.#counts;
    for (const reason of Object.keys(refused) as RetransmissionRefusal[]) {
      if (refused[reason] === 0) continue;
      counts.refused[reason] += refused[reason];
      this.#options.onRetransmissionsRefused?.(reason, refused[reason]);
    }
    const unrepaired = refused.not_in_history + refused.too_old + refused.budget;
    if (unrepaired > 0 && this.#keyframeNeeded && this.#keyframes.lossUnrepaired(this.#budget.rttMs(path))) {
      counts.keyframesForLoss++;
      this.#keyframeNeeded();
    }
  }

  #countResent(packets: number, bytes: number, unasked: UnaskedResend | undefined): void {
    if (packets === 0) return;
    this.#host.countResent(packets, bytes);
    const counts = this.#counts;
    counts.retransmittedPackets += packets;
    counts.retransmittedBytes += bytes;
    if (unasked === 'feedback_loss') counts.repairedFromFeedback += packets;
    else if (unasked === 'second_copy') counts.secondCopies += packets;
    this.#options.onRetransmit?.(packets, bytes);
    if (unasked !== undefined) this.#options.onUnaskedResends?.(unasked, packets);
  }

  /**
   * One packet of a bandwidth probe's padding: an RTX copy of one of the newest packets sent (a
   * duplicate the receiver drops, but counts in its feedback), not paced — the probe paces
   * itself. Its size, or 0 when there is nothing to copy.
   */
  #sendPadding(): number {
    const host = this.#host;
    const stream = host.stream();
    const history = host.history();
    const rtx = this.#rtx.stream();
    if (stream === undefined || history === undefined || rtx === undefined) return 0;
    const newest = host.lastSequenceNumber();
    for (let tries = 0; tries < PADDING_REACH; tries++) {
      this.#paddingBack = (this.#paddingBack + 1) % PADDING_REACH;
      const sequenceNumber = (newest - this.#paddingBack) & 0xffff;
      const packet = history.get(sequenceNumber);
      if (packet !== undefined) return this.#rtx.send(stream, rtx, packet, sequenceNumber, host.srtpIndexOf(sequenceNumber), false);
    }
    return 0;
  }
}
