/**
 * How a connection's video sender answers loss reports on a congested path (issue 25 part 4):
 * which NACKed packets it resends, and how often a receiver's picture-loss reports become
 * keyframes. docs/protocol.md ("Loss recovery") states the rules; libwebrtc's are the model.
 *
 * Without them, a bottleneck that drops a third of the packets gets every one of them NACKed and
 * resent, the resends are dropped and NACKed again, and the sender offers the link several times
 * its own media rate: a retransmission storm that keeps the queue full and the picture frozen
 * (docs/performance.md, "Network lab baselines"). The rules, per NACKed packet, in order:
 *
 * 1. **Not kept**: a packet no longer in the send history is not resent (`not_in_history`).
 * 2. **Too old**: a packet first sent more than max(1 s, 3 × RTT) ago is not resent (`too_old`):
 *    a receiver's jitter buffer has given up on it (libwebrtc keeps packets for the same time).
 * 3. **Once per RTT**: a packet resent less than RTT + 5 ms ago is not resent again (`within_rtt`):
 *    the first copy cannot have been reported missing yet (libwebrtc's `VerifyRtt`).
 * 4. **Budget**: resends draw from a token bucket filled at a share (25 %) of the media rate sent
 *    over the last second — or of the receiver's estimate (REMB) where that is lower — and never
 *    below 64 kbit/s, holding at most 1 s of that rate (libwebrtc's window); a packet the bucket
 *    cannot pay for is not resent (`budget`). libwebrtc caps resends at its congestion
 *    controller's target; a sender whose media does not follow the path (VP8 here keeps its
 *    start-up rate) needs a share of it.
 *
 * A loss that is not repaired (rules 1, 2, 4) breaks the receiver's picture until a keyframe, so
 * the sender asks its encoder for one itself — at most once per max(1 s, 2 × RTT) — instead of
 * waiting for the receiver's PLI. Picture-loss reports (PLI, FIR) from one receiver become
 * keyframes at most once per max(300 ms, RTT) (libwebrtc's `EncoderRtcpFeedback`: 300 ms): the
 * keyframe already asked for answers the reports that follow it within that time.
 *
 * Every time is in ms of an injectable clock (`performance.now()` by default).
 */

/** Why a NACKed packet was not resent (a label of `arclight_rtp_retransmissions_refused_total`). */
export type RetransmissionRefusal = 'not_in_history' | 'too_old' | 'within_rtt' | 'budget';

export const RETRANSMISSION_REFUSALS: readonly RetransmissionRefusal[] = ['not_in_history', 'too_old', 'within_rtt', 'budget'];

/**
 * Why a packet was resent without a NACK asking (a label of `arclight_rtp_unasked_resends_total`):
 * `feedback_loss`, the connection's transport-wide feedback reported the copy lost (its NACK was
 * lost, or the resend was); `second_copy`, a resend's second copy on a path that loses without
 * queueing (retransmitter.ts).
 */
export type UnaskedResend = 'feedback_loss' | 'second_copy';

export interface LossRecoveryRules {
  /** Share of the media rate (or of the receiver's estimate, if lower) resends may use. */
  readonly budgetShare: number;
  /** The budget's floor, kbit/s: a low-rate stream can still repair an occasional loss. */
  readonly minBudgetKbps: number;
  /** The bucket holds this much of the budget's rate, ms (how large a burst of resends may be). */
  readonly budgetDepthMs: number;
  /** …and never less than this many bytes (one full packet and more). */
  readonly minBudgetDepthBytes: number;
  /** The media rate is measured over this window, ms. */
  readonly rateWindowMs: number;
  /** RTT assumed until RTCP measured one (receiver reports' LSR/DLSR), ms. */
  readonly defaultRttMs: number;
  /** Added to the RTT in the once-per-RTT rule (libwebrtc: 5 ms). */
  readonly rttMarginMs: number;
  /** A packet older than max(`maxAgeMs`, `maxAgeRtts` × RTT) is not resent. */
  readonly maxAgeMs: number;
  readonly maxAgeRtts: number;
  /** PLI/FIR → keyframe at most once per max(this, RTT), ms. */
  readonly keyframeIntervalMs: number;
  /** A keyframe for an unrepaired loss at most once per max(this, 2 × RTT), ms. */
  readonly lossKeyframeIntervalMs: number;
}

export const LOSS_RECOVERY: LossRecoveryRules = {
  budgetShare: 0.25,
  minBudgetKbps: 64,
  budgetDepthMs: 1_000,
  minBudgetDepthBytes: 4 * 1280,
  rateWindowMs: 1_000,
  defaultRttMs: 200,
  rttMarginMs: 5,
  maxAgeMs: 1_000,
  maxAgeRtts: 3,
  keyframeIntervalMs: 300,
  lossKeyframeIntervalMs: 1_000,
};

export type Clock = () => number;

const defaultClock: Clock = () => performance.now();

/** Bytes sent over the last `windowMs`, as a rate. One entry per frame: ~30 a second. */
export class SendRateMeter {
  readonly #windowMs: number;
  readonly #times: number[] = [];
  readonly #bytes: number[] = [];
  #head = 0;
  #sum = 0;

  constructor(windowMs: number) {
    this.#windowMs = windowMs;
  }

  note(atMs: number, bytes: number): void {
    this.#times.push(atMs);
    this.#bytes.push(bytes);
    this.#sum += bytes;
    // Entries are read only when a NACK comes; without loss they would pile up for the whole
    // session (every frame, for hours), so what left the window goes here too.
    this.#expire(atMs);
  }

  /** Bits per second over the window ending at `atMs`. */
  bitsPerSecond(atMs: number): number {
    this.#expire(atMs);
    return (Math.max(0, this.#sum) * 8 * 1000) / this.#windowMs;
  }

  /** Entries kept (tests: they stay within the window). */
  get entries(): number {
    return this.#times.length - this.#head;
  }

  #expire(atMs: number): void {
    const from = atMs - this.#windowMs;
    while (this.#head < this.#times.length && this.#times[this.#head]! <= from) {
      this.#sum -= this.#bytes[this.#head]!;
      this.#head++;
    }
    if (this.#head > 64 && this.#head * 2 > this.#times.length) {
      this.#times.splice(0, this.#head);
      this.#bytes.splice(0, this.#head);
      this.#head = 0;
    }
  }
}

/** What the sender knows of one NACKed packet (from its send history). */
export interface SentPacket {
  readonly bytes: number;
  /** When it was first sent, ms. */
  readonly sentAtMs: number;
  /** When it was last resent, ms, if it was. */
  readonly resentAtMs: number | undefined;
}

/** What the sender knows of the path now. */
export interface PathEstimate {
  /** RTT from RTCP, ms; undefined until one was measured. */
  readonly rttMs?: number | undefined;
  /** The receiver's bandwidth estimate (REMB), bit/s; undefined when none came. */
  readonly receiverEstimateBps?: number | undefined;
}

/** Rules 2–4 for one RTP stream: age, once per RTT, and the token bucket. */
export class RetransmissionBudget {
  readonly #rules: LossRecoveryRules;
  readonly #now: Clock;
  readonly #media: SendRateMeter;
  #tokens: number;
  #filledAt: number;

  constructor(rules: LossRecoveryRules = LOSS_RECOVERY, now: Clock = defaultClock) {
    this.#rules = rules;
    this.#now = now;
    this.#media = new SendRateMeter(rules.rateWindowMs);
    this.#tokens = rules.minBudgetDepthBytes;
    this.#filledAt = now();
  }

  /** Media (not resends) handed to the socket: what the budget is a share of. */
  noteMediaSent(bytes: number): void {
    this.#media.note(this.#now(), bytes);
  }

  /** The budget's rate now, bit/s. */
  rateBps(path: PathEstimate = {}): number {
    const rules = this.#rules;
    let basis = this.#media.bitsPerSecond(this.#now());
    const estimate = path.receiverEstimateBps;
    if (estimate !== undefined && estimate > 0) basis = Math.min(basis, estimate);
    return Math.max(rules.minBudgetKbps * 1000, rules.budgetShare * basis);
  }

  /** The RTT the rules use, ms: RTCP's, or the default until it measured one. */
  rttMs(path: PathEstimate): number {
    const rtt = path.rttMs;
    return rtt !== undefined && Number.isFinite(rtt) && rtt > 0 ? rtt : this.#rules.defaultRttMs;
  }

  /**
   * Whether to resend this packet now: undefined (send; its bytes are taken from the bucket), or
   * why not.
   */
  admit(packet: SentPacket, path: PathEstimate = {}): Exclude<RetransmissionRefusal, 'not_in_history'> | undefined {
    const rules = this.#rules;
    const now = this.#now();
    const rtt = this.rttMs(path);
    if (now - packet.sentAtMs > Math.max(rules.maxAgeMs, rules.maxAgeRtts * rtt)) return 'too_old';
    if (packet.resentAtMs !== undefined && now - packet.resentAtMs < rtt + rules.rttMarginMs) return 'within_rtt';
    const rate = this.rateBps(path) / 8; // bytes per second
    const depth = Math.max(rules.minBudgetDepthBytes, (rate * rules.budgetDepthMs) / 1000);
    this.#tokens = Math.min(depth, this.#tokens + (rate * Math.max(0, now - this.#filledAt)) / 1000);
    this.#filledAt = now;
    if (this.#tokens < packet.bytes) return 'budget';
    this.#tokens -= packet.bytes;
    return undefined;
  }
}

/** Keyframe request throttling for one receiver's stream. */
export class KeyframeRequestThrottle {
  readonly #rules: LossRecoveryRules;
  readonly #now: Clock;
  #lastAt = -Infinity;

  constructor(rules: LossRecoveryRules = LOSS_RECOVERY, now: Clock = defaultClock) {
    this.#rules = rules;
    this.#now = now;
  }

  /** A PLI or FIR came: true if it should reach the encoder, false if one asked recently answers it. */
  pictureLost(rttMs: number): boolean {
    return this.#take(Math.max(this.#rules.keyframeIntervalMs, rttMs));
  }

  /** The sender left a loss unrepaired: true if it should ask for a keyframe itself now. */
  lossUnrepaired(rttMs: number): boolean {
    return this.#take(Math.max(this.#rules.lossKeyframeIntervalMs, 2 * rttMs));
  }

  #take(intervalMs: number): boolean {
    const now = this.#now();
    if (now - this.#lastAt < intervalMs) return false;
    this.#lastAt = now;
    return true;
  }
}
