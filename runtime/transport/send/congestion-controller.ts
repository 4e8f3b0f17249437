/**
 * A connection's send-side bandwidth estimate from transport-wide congestion-control feedback
 * (issue 25 part 2): the GCC family (draft-ietf-rmcat-gcc; libwebrtc's GoogCC is the model, read
 * for its rules, not its code). Pure: the caller hands it each feedback's packets (when each was
 * sent, its size, when it arrived or that it was lost) and the time; it answers a target rate.
 *
 * Two estimates, the target is the lower, clamped to [minBps, maxBps]:
 *
 * - **Delay-based.** Packets sent within 5 ms of a group's first packet form one group (a frame's
 *   burst), and so do packets that arrive within 5 ms of the group's last and sooner after it than
 *   they were sent (let out together after a stall). Between consecutive groups, the delay variation d = (arrival delta) − (send delta)
 *   is summed into an accumulated delay, smoothed (α 0.9), and a least-squares line through the
 *   last 20 (arrival time, smoothed delay) points gives the trend: a queue filling at the
 *   bottleneck makes it rise. The overuse detector compares min(deltas, 60) × slope × 4 with an
 *   adaptive threshold γ (start 12.5, up 0.0087 / down 0.039 per ms, in [6, 600]): above γ for
 *   more than 10 ms and still rising → overuse; below −γ → underuse. The rate control (AIMD):
 *   overuse → decrease to 0.85 × the acked rate (bytes the receiver got over the last 500 ms of
 *   its clock) but at most by half (of the estimate in use, at most 1.5 × acked + 10 kbit/s, when
 *   the last decrease was under a second ago), at most once per max(200 ms, RTT), and that rate
 *   becomes the link-capacity
 *   estimate; normal → increase, additively (about one packet per response time) while within
 *   3 deviations of the link-capacity estimate, multiplicatively (15 %/s) away from it; underuse →
 *   hold. A probe cluster that got through faster (bandwidth-probe.ts) sets it at once; one that
 *   found the link full is a capacity measurement: the estimate moves into [0.95 × the rate the
 *   link carried it at, that capacity's upper bound] (never below the current target). Within
 *   5 s of a capacity measurement an increase stops at that capacity. An
 *   increase never takes the target above 1.5 × the acked rate + 10 kbit/s (an encoder
 *   sending less than its target does not push the estimate into the blue).
 * - **Loss-based.** Over each ≥ 500 ms of feedback: loss > 10 % → the estimate falls to
 *   min(target, sent rate) × (1 − loss / 2); loss < 2 % → it grows 15 %/s; between, it holds.
 *
 * Every time is in ms: send times on the caller's clock, arrival times on the receiver's (only
 * their differences are used).
 *
 * ~590 lines: the two estimates and the rate controller are one state machine fed one feedback
 * at a time (the delay-based part's decision gates the rate controller, the loss-based part caps
 * its result); the doc above is most of the length.
 */

/** One packet of a feedback report. */
export interface PacketFeedback {
  /** When it was sent, ms of the sender's clock. */
  readonly sentAtMs: number;
  /** Its size on the wire, bytes. */
  readonly bytes: number;
  /** When it arrived, ms of the receiver's clock; undefined: reported lost. */
  readonly arrivedAtMs: number | undefined;
}

export type BandwidthUsage = 'normal' | 'overusing' | 'underusing';

export interface CongestionRules {
  /** Packets sent within this of a group's first form one group, ms. */
  readonly burstMs: number;
  /** Points in the trendline's regression. */
  readonly trendlineWindow: number;
  /** Smoothing of the accumulated delay. */
  readonly smoothing: number;
  readonly trendGain: number;
  readonly initialThresholdMs: number;
  readonly thresholdUp: number;
  readonly thresholdDown: number;
  readonly minThresholdMs: number;
  readonly maxThresholdMs: number;
  /** Above the threshold this long (send time) before overuse is signalled, ms. */
  readonly overuseTimeMs: number;
  /** Overuse → this × the acked rate. */
  readonly decreaseFactor: number;
  /** One decrease leaves at least this share of the estimate. */
  readonly maxDecreaseStep: number;
  /** Decreases at most once per max(this, RTT), ms. */
  readonly minDecreaseIntervalMs: number;
  /** A decrease within this of the last one is one in a row: it halves only the estimate in use, ms. */
  readonly decreaseStreakMs: number;
  /**
   * A probe that found the link full → at least this × the rate the link carried it at
   * (libwebrtc's probe estimator takes the same share). Above an overuse's 0.85: the probe's
   * queue is its own, and drains once it ends, under media at 0.9 × the estimate.
   */
  readonly saturatedProbeFactor: number;
  /** Multiplicative increase per second, far from the link-capacity estimate. */
  readonly increasePerSecond: number;
  /** The acked rate is measured over this much of the receiver's clock, ms. */
  readonly ackedWindowMs: number;
  readonly lossHigh: number;
  readonly lossLow: number;
  /** Loss is judged over at least this much feedback time, ms. */
  readonly lossWindowMs: number;
  /** RTT assumed until one is known, ms. */
  readonly defaultRttMs: number;
  /** For this long after the link's capacity was measured, increases stop at it, ms. */
  readonly capacityHoldMs: number;
}

export const CONGESTION_RULES: CongestionRules = {
  burstMs: 5,
  trendlineWindow: 20,
  smoothing: 0.9,
  trendGain: 4,
  initialThresholdMs: 12.5,
  thresholdUp: 0.0087,
  thresholdDown: 0.039,
  minThresholdMs: 6,
  maxThresholdMs: 600,
  overuseTimeMs: 10,
  decreaseFactor: 0.85,
  maxDecreaseStep: 0.5,
  minDecreaseIntervalMs: 200,
  decreaseStreakMs: 1_000,
  saturatedProbeFactor: 0.95,
  increasePerSecond: 1.15,
  ackedWindowMs: 500,
  lossHigh: 0.1,
  lossLow: 0.02,
  lossWindowMs: 500,
  defaultRttMs: 100,
  capacityHoldMs: 5_000,
};

export interface CongestionControllerOptions {
  /** Bounds of the estimate, bit/s. Defaults 50 kbit/s and 10 Mbit/s. */
  readonly minBps?: number;
  readonly maxBps?: number;
  /** The estimate before any feedback; default `maxBps` (the encoder's own rate rules until the path says otherwise). */
  readonly startBps?: number;
  readonly rules?: CongestionRules;
}

interface Group {
  firstSentAtMs: number;
  lastSentAtMs: number;
  lastArrivedAtMs: number;
}

/** Overuse detection from inter-group delay variation: the trendline filter and the adaptive threshold. */
export class DelayTrend {
  readonly #rules: CongestionRules;
  #group: Group | undefined;
  #previous: Group | undefined;
  #firstArrivalMs: number | undefined;
  #accumulatedMs = 0;
  #smoothedMs = 0;
  #deltas = 0;
  readonly #points: Array<{ x: number; y: number }> = [];
  #threshold: number;
  #lastThresholdUpdateMs: number | undefined;
  #overuseMs = -1;
  #overuseCount = 0;
  #previousTrend = 0;
  #usage: BandwidthUsage = 'normal';

  constructor(rules: CongestionRules = CONGESTION_RULES) {
    this.#rules = rules;
    this.#threshold = rules.initialThresholdMs;
  }

  get usage(): BandwidthUsage {
    return this.#usage;
  }

  get thresholdMs(): number {
    return this.#threshold;
  }

  /** One received packet, in send order. Returns the usage after it. */
  packet(sentAtMs: number, arrivedAtMs: number): BandwidthUsage {
    const group = this.#group;
    if (group === undefined) {
      this.#group = { firstSentAtMs: sentAtMs, lastSentAtMs: sentAtMs, lastArrivedAtMs: arrivedAtMs };
      return this.#usage;
    }
    if (sentAtMs < group.firstSentAtMs) return this.#usage; // reordered from an earlier group
    // A packet sent within the burst time of the group's first joins it; so does one that arrived
    // within the burst time of the group's last and sooner after it than it was sent (a queue, a
    // late timer or a starved receiver let several groups out at once: one group, not a delay drop).
    const arrivalDelta = arrivedAtMs - group.lastArrivedAtMs;
    const bunched = arrivalDelta >= 0 && arrivalDelta < this.#rules.burstMs && arrivalDelta - (sentAtMs - group.lastSentAtMs) < 0;
    if (sentAtMs - group.firstSentAtMs <= this.#rules.burstMs || bunched) {
      group.lastSentAtMs = Math.max(group.lastSentAtMs, sentAtMs);
      group.lastArrivedAtMs = Math.max(group.lastArrivedAtMs, arrivedAtMs);
      return this.#usage;
    }
    // The group is complete: compare it with the one before.
    const previous = this.#previous;
    if (previous !== undefined) {
      const sendDelta = group.lastSentAtMs - previous.lastSentAtMs;
      const arrivalDelta = group.lastArrivedAtMs - previous.lastArrivedAtMs;
      if (arrivalDelta - sendDelta > 3_000 || arrivalDelta < -3_000) this.#reset();
      else this.#update(arrivalDelta - sendDelta, sendDelta, group.lastArrivedAtMs);
    }
    this.#previous = group;
    this.#group = { firstSentAtMs: sentAtMs, lastSentAtMs: sentAtMs, lastArrivedAtMs: arrivedAtMs };
    return this.#usage;
  }

  #reset(): void {
    this.#points.length = 0;
    this.#accumulatedMs = 0;
    this.#smoothedMs = 0;
    this.#deltas = 0;
    this.#firstArrivalMs = undefined;
    this.#overuseMs = -1;
    this.#overuseCount = 0;
    this.#usage = 'normal';
  }

  #update(delayDeltaMs: number, sendDeltaMs: number, arrivedAtMs: number): void {
    const rules = this.#rules;
    this.#deltas = Math.min(this.#deltas + 1, 1000);
    this.#accumulatedMs += delayDeltaMs;
    this.#smoothedMs = rules.smoothing * this.#smoothedMs + (1 - rules.smoothing) * this.#accumulatedMs;
    this.#firstArrivalMs ??= arrivedAtMs;
    this.#points.push({ x: arrivedAtMs - this.#firstArrivalMs, y: this.#smoothedMs });
    if (this.#points.length > rules.trendlineWindow) this.#points.shift();
    let trend = this.#previousTrend;
    if (this.#points.length === rules.trendlineWindow) trend = slope(this.#points) ?? trend;
    this.#detect(trend, sendDeltaMs, arrivedAtMs);
  }

  #detect(trend: number, sendDeltaMs: number, nowMs: number): void {
    const rules = this.#rules;
    const modified = Math.min(this.#deltas, 60) * trend * rules.trendGain;
    if (modified > this.#threshold) {
      this.#overuseMs = this.#overuseMs === -1 ? sendDeltaMs / 2 : this.#overuseMs + sendDeltaMs;
      this.#overuseCount++;
      if (this.#overuseMs > rules.overuseTimeMs && this.#overuseCount > 1 && trend >= this.#previousTrend) {
        this.#overuseMs = 0;
        this.#overuseCount = 0;
        this.#usage = 'overusing';
      }
    } else if (modified < -this.#threshold) {
      this.#overuseMs = -1;
      this.#overuseCount = 0;
      this.#usage = 'underusing';
    } else {
      this.#overuseMs = -1;
      this.#overuseCount = 0;
      this.#usage = 'normal';
    }
    this.#previousTrend = trend;
    this.#adaptThreshold(modified, nowMs);
  }

  #adaptThreshold(modified: number, nowMs: number): void {
    const rules = this.#rules;
    const last = this.#lastThresholdUpdateMs ?? nowMs;
    this.#lastThresholdUpdateMs = nowMs;
    // A spike far above the threshold (a delay jump, a late timer) does not drag it up.
    if (Math.abs(modified) > this.#threshold + 15) return;
    const k = Math.abs(modified) < this.#threshold ? rules.thresholdDown : rules.thresholdUp;
    const elapsed = Math.min(nowMs - last, 100);
    this.#threshold += k * (Math.abs(modified) - this.#threshold) * elapsed;
    this.#threshold = Math.min(rules.maxThresholdMs, Math.max(rules.minThresholdMs, this.#threshold));
  }
}

/** Least-squares slope of the points; undefined if all x are equal. */
function slope(points: readonly { x: number; y: number }[]): number | undefined {
  let sx = 0;
  let sy = 0;
  for (const p of points) {
    sx += p.x;
    sy += p.y;
  }
  const mx = sx / points.length;
  const my = sy / points.length;
  let num = 0;
  let den = 0;
  for (const p of points) {
    num += (p.x - mx) * (p.y - my);
    den += (p.x - mx) * (p.x - mx);
  }
  return den === 0 ? undefined : num / den;
}

/** Bytes the receiver got over the last window of its clock: the acked rate. */
class AckedRate {
  readonly #windowMs: number;
  readonly #arrivals: Array<{ at: number; bytes: number }> = [];
  #bytes = 0;
  #firstAt: number | undefined;

  constructor(windowMs: number) {
    this.#windowMs = windowMs;
  }

  add(arrivedAtMs: number, bytes: number): void {
    this.#firstAt ??= arrivedAtMs;
    this.#arrivals.push({ at: arrivedAtMs, bytes });
    this.#bytes += bytes;
    while (this.#arrivals.length > 0 && this.#arrivals[0]!.at < arrivedAtMs - this.#windowMs) this.#bytes -= this.#arrivals.shift()!.bytes;
  }

  /** bit/s, once a whole window has been seen. */
  bps(): number | undefined {
    const last = this.#arrivals.at(-1);
    if (last === undefined || this.#firstAt === undefined || last.at - this.#firstAt < this.#windowMs) return undefined;
    return (this.#bytes * 8 * 1000) / this.#windowMs;
  }
}

/** The rate at which the path last congested, and how far it strays (kbit/s). */
class LinkCapacity {
  #estimateKbps: number | undefined;
  #variance = 0.4;
  #measuredAtMs = -Infinity;

  get known(): boolean {
    return this.#estimateKbps !== undefined;
  }

  /** The running estimate, kbit/s; undefined until a measurement (or after a reset). */
  get estimateKbps(): number | undefined {
    return this.#estimateKbps;
  }

  /** When it last took a measurement (ms; -Infinity: never, or forgotten since). */
  get measuredAtMs(): number {
    return this.#measuredAtMs;
  }

  /** The upper bound: estimate + 3 deviations, kbit/s. */
  upperKbps(): number {
    return this.#estimateKbps === undefined ? Infinity : this.#estimateKbps + 3 * this.#deviationKbps();
  }

  lowerKbps(): number {
    return this.#estimateKbps === undefined ? -Infinity : this.#estimateKbps - 3 * this.#deviationKbps();
  }

  #deviationKbps(): number {
    return Math.sqrt(this.#variance * (this.#estimateKbps ?? 0));
  }

  /**
   * A measurement of the link's capacity (the acked rate at an overuse, a full-link probe's
   * rate): one outside ±3 deviations of the estimate says the link changed, and starts it over.
   */
  measure(sampleKbps: number, nowMs: number): void {
    if (sampleKbps < this.lowerKbps() || sampleKbps > this.upperKbps()) this.reset();
    this.#measuredAtMs = nowMs;
    const alpha = 0.05;
    if (this.#estimateKbps === undefined) {
      this.#estimateKbps = sampleKbps;
      return;
    }
    const estimate = (1 - alpha) * this.#estimateKbps + alpha * sampleKbps;
    const norm = Math.max(estimate, 1);
    this.#variance = (1 - alpha) * this.#variance + (alpha * (estimate - sampleKbps) ** 2) / norm;
    this.#variance = Math.min(2.5, Math.max(0.4, this.#variance));
    this.#estimateKbps = estimate;
  }

  reset(): void {
    this.#estimateKbps = undefined;
    this.#measuredAtMs = -Infinity;
  }
}

export class CongestionController {
  readonly #rules: CongestionRules;
  readonly #minBps: number;
  readonly #maxBps: number;
  readonly #trend: DelayTrend;
  readonly #acked: AckedRate;
  readonly #capacity = new LinkCapacity();
  #delayBps: number;
  #lossBps: number;
  #lastDecreaseMs = -Infinity;
  /** While a probe runs (and briefly after), delay-based overuse does not decrease the estimate. */
  #decreasesHeldUntilMs = -Infinity;
  #lastIncreaseMs: number | undefined;
  #lossWindowStartMs: number | undefined;
  #lossLastChangeMs: number | undefined;
  #lost = 0;
  #total = 0;
  #lastLossFraction = 0;
  #feedbacks = 0;

  constructor(options: CongestionControllerOptions = {}) {
    this.#rules = options.rules ?? CONGESTION_RULES;
    this.#minBps = options.minBps ?? 50_000;
    this.#maxBps = options.maxBps ?? 10_000_000;
    this.#delayBps = Math.min(this.#maxBps, Math.max(this.#minBps, options.startBps ?? this.#maxBps));
    this.#lossBps = this.#maxBps;
    this.#trend = new DelayTrend(this.#rules);
    this.#acked = new AckedRate(this.#rules.ackedWindowMs);
  }

  /** The target rate, bit/s: min(delay-based, loss-based), within the bounds. */
  get targetBps(): number {
    return Math.min(this.#maxBps, Math.max(this.#minBps, Math.min(this.#delayBps, this.#lossBps)));
  }

  get delayBasedBps(): number {
    return this.#delayBps;
  }

  get lossBasedBps(): number {
    return this.#lossBps;
  }

  get ackedBps(): number | undefined {
    return this.#acked.bps();
  }

  get usage(): BandwidthUsage {
    return this.#trend.usage;
  }

  /** The loss fraction of the last completed loss window. */
  get lossFraction(): number {
    return this.#lastLossFraction;
  }

  /** Feedback reports taken so far. */
  get feedbacks(): number {
    return this.#feedbacks;
  }

  /** The upper bound of the estimate, bit/s. */
  get maxBps(): number {
    return this.#maxBps;
  }

  /** When the delay-based estimate last fell (the sender's clock, ms; -Infinity: never). */
  get lastDecreaseMs(): number {
    return this.#lastDecreaseMs;
  }

  /**
   * Holds delay-based decreases until `untilMs`: a probe's own padding queues at a full link, and
   * the overuse it shows is the probe's, not the media's (its result says whether the link was
   * full). The hold is the caller's to end; loss still lowers the estimate.
   */
  holdDecreases(untilMs: number): void {
    this.#decreasesHeldUntilMs = untilMs;
  }

  /**
   * A probe cluster got through at `bps` (bandwidth-probe.ts): the path carries at least that, so
   * an estimate below it jumps to it (and the link-capacity estimate, now stale, is forgotten).
   * The loss-based estimate follows unless loss is high. Returns whether the target rose.
   */
  onProbeResult(bps: number, nowMs: number): boolean {
    const before = this.targetBps;
    if (!(bps > this.#delayBps)) return false;
    this.#delayBps = Math.min(this.#maxBps, bps);
    this.#capacity.reset();
    this.#lastIncreaseMs = nowMs;
    if (this.#lastLossFraction <= this.#rules.lossHigh) this.#lossBps = Math.max(this.#lossBps, this.#delayBps);
    return this.targetBps > before;
  }

  /**
   * A probe cluster found the link full (bandwidth-probe.ts): it arrived at `receiveBps`, slower
   * than it left, so that is what the narrow link carries — a capacity measurement, as the acked
   * rate is at an overuse; the link-capacity estimate takes it. The delay-based estimate moves
   * toward it: up to 0.95 × it when below that — after the link widened, a probe measures the
   * wider link at once, where additive increase would take many seconds — and down to the
   * capacity's upper bound when above it (an estimate left high while the loss-based one held
   * the sender under the link, or never lowered), but never below the current target: this lowers
   * nothing the sender uses now, only how far it may climb. Returns whether the target rose.
   */
  onSaturatedProbe(receiveBps: number, nowMs: number): boolean {
    const before = this.targetBps;
    const kbps = receiveBps / 1000;
    this.#capacity.measure(kbps, nowMs);
    const floor = Math.min(this.#maxBps, this.#rules.saturatedProbeFactor * receiveBps);
    const ceiling = Math.max(floor, before, this.#capacity.upperKbps() * 1000);
    const next = Math.min(Math.max(this.#delayBps, floor), ceiling);
    if (next > this.#delayBps) {
      this.#lastIncreaseMs = nowMs;
      if (this.#lastLossFraction <= this.#rules.lossHigh) this.#lossBps = Math.max(this.#lossBps, next);
    }
    this.#delayBps = next;
    return this.targetBps > before;
  }

  /**
   * One feedback report's packets, in transport-sequence order, at `nowMs` (the sender's clock).
   * Returns the new target, bit/s.
   */
  onFeedback(packets: readonly PacketFeedback[], nowMs: number, rttMs?: number): number {
    if (packets.length === 0) return this.targetBps;
    this.#feedbacks++;
    let usage = this.#trend.usage;
    let lost = 0;
    for (const packet of packets) {
      if (packet.arrivedAtMs === undefined) {
        lost++;
        continue;
      }
      this.#acked.add(packet.arrivedAtMs, packet.bytes);
      usage = this.#trend.packet(packet.sentAtMs, packet.arrivedAtMs);
    }
    const rtt = rttMs !== undefined && Number.isFinite(rttMs) && rttMs > 0 ? rttMs : this.#rules.defaultRttMs;
    this.#rateControl(usage, nowMs, rtt);
    this.#lossControl(lost, packets.length, nowMs, rtt);
    return this.targetBps;
  }

  #rateControl(usage: BandwidthUsage, nowMs: number, rttMs: number): void {
    const rules = this.#rules;
    const acked = this.#acked.bps();
    const ackedKbps = acked === undefined ? undefined : acked / 1000;
    if (ackedKbps !== undefined && ackedKbps > this.#capacity.upperKbps()) this.#capacity.reset();
    if (usage === 'overusing') {
      this.#lastIncreaseMs = undefined;
      if (nowMs < this.#decreasesHeldUntilMs) return;
      if (nowMs - this.#lastDecreaseMs < Math.max(rules.minDecreaseIntervalMs, rttMs)) return;
      const base = acked ?? this.#delayBps;
      // Never an increase; never below half the estimate in one step: a sender held back below its
      // estimate (an encoder at its floor, frames held for the send budget) acks less than the path
      // carries, and 0.85 × that alone would spiral down. A second decrease in a row (the path
      // still says overuse a second later) halves only the estimate in use — at most what an
      // increase could have reached from what got through, 1.5 × acked + 10 kbit/s: an estimate
      // far above it (the 10 Mbit/s it starts at, a sender under its configured rate) was never
      // tried, and halving it 10 → 5 → 2.5 Mbit/s, 200 ms apart, left the encoder over a new
      // 1 Mbit/s cap for a second (docs/performance.md). The first decrease halves the estimate
      // itself: one overuse alone may be a delay blip, and on a wide path it then costs nothing.
      const inARow = nowMs - this.#lastDecreaseMs < rules.decreaseStreakMs;
      const inUse = inARow && acked !== undefined ? Math.min(this.#delayBps, 1.5 * acked + 10_000) : this.#delayBps;
      const next = Math.min(this.#delayBps, Math.max(rules.decreaseFactor * base, rules.maxDecreaseStep * inUse));
      if (ackedKbps !== undefined) {
        this.#capacity.measure(ackedKbps, nowMs);
      }
      this.#delayBps = Math.max(this.#minBps, next);
      this.#lastDecreaseMs = nowMs;
      return;
    }
    if (usage === 'underusing') {
      this.#lastIncreaseMs = undefined; // hold
      return;
    }
    const last = this.#lastIncreaseMs ?? nowMs;
    this.#lastIncreaseMs = nowMs;
    const elapsedS = Math.min(nowMs - last, 1_000) / 1000;
    if (elapsedS <= 0) return;
    let next: number;
    if (this.#capacity.known && ackedKbps !== undefined && ackedKbps <= this.#capacity.upperKbps()) {
      // Near the rate the path last congested at: about one packet per response time.
      const responseS = (rttMs + 100) / 1000;
      const bitsPerFrame = this.#delayBps / 30;
      const packetsPerFrame = Math.ceil(bitsPerFrame / (1200 * 8));
      const packetBits = bitsPerFrame / packetsPerFrame;
      next = this.#delayBps + Math.max(4_000, packetBits / responseS) * elapsedS;
    } else {
      next = this.#delayBps * rules.increasePerSecond ** elapsedS;
    }
    // An increase stops at 1.5 × what got through (+10 kbit/s); it never lowers the estimate.
    if (acked !== undefined) next = Math.min(next, Math.max(this.#delayBps, 1.5 * acked + 10_000));
    // Within a few seconds of measuring the link's capacity (an overuse, a probe that found it
    // full) it also stops at that capacity: past it, the encoder's 0.9 × the estimate plus the
    // headers, resends and probes beside it fill the link the measurement found full, and the
    // delay needs most of a second to say so — 1 s windows over a 1 Mbit/s cap at 1.05–1.09 in
    // the traced runs (docs/performance.md). A wider link shows as acked rate past the capacity's
    // upper bound (it is forgotten above) or a probe that gets through; after `capacityHoldMs`
    // the additive climb resumes, for a sender that cannot probe.
    const capacityKbps = this.#capacity.estimateKbps;
    if (capacityKbps !== undefined && nowMs - this.#capacity.measuredAtMs < rules.capacityHoldMs) {
      next = Math.min(next, Math.max(this.#delayBps, capacityKbps * 1000));
    }
    this.#delayBps = Math.min(this.#maxBps, next);
  }

  #lossControl(lost: number, total: number, nowMs: number, rttMs: number): void {
    const rules = this.#rules;
    this.#lossWindowStartMs ??= nowMs;
    this.#lost += lost;
    this.#total += total;
    if (nowMs - this.#lossWindowStartMs < rules.lossWindowMs) return;
    const fraction = this.#total === 0 ? 0 : this.#lost / this.#total;
    this.#lastLossFraction = fraction;
    this.#lost = 0;
    this.#total = 0;
    this.#lossWindowStartMs = nowMs;
    const lastChange = this.#lossLastChangeMs ?? nowMs;
    if (fraction > rules.lossHigh) {
      if (this.#lossLastChangeMs === undefined || nowMs - lastChange >= 300 + rttMs) {
        // From what was actually sent where that is less (an encoder under its target).
        const acked = this.#acked.bps();
        const base = acked === undefined ? this.targetBps : Math.min(this.targetBps, acked / (1 - fraction));
        this.#lossBps = Math.max(this.#minBps, base * (1 - fraction / 2));
        this.#lossLastChangeMs = nowMs;
      }
    } else if (fraction < rules.lossLow) {
      const elapsedS = Math.min(nowMs - lastChange, 1_000) / 1000;
      this.#lossBps = Math.min(this.#maxBps, this.#lossBps * rules.increasePerSecond ** elapsedS);
      this.#lossLastChangeMs = nowMs;
    }
  }
}
