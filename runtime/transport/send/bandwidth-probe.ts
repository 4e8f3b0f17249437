/**
 * Bandwidth probing (issue 25 part 2): finding out, in a fraction of a second, that the path can
 * carry more than the congestion controller's estimate, instead of climbing to it at 15 %/s.
 *
 * After a capacity drop the estimate sits at what the narrow link carried; when the link widens
 * again nothing in the feedback says so until the sender sends more. The delay-based estimator's
 * multiplicative increase takes 6–9 s from 0.9 to 2 Mbit/s (docs/performance.md), and libwebrtc's
 * sender is slower still (it probes only when application-limited). So while the estimate binds
 * (the encoder sends near it) and is below the connection's ceiling, the sender adds padding for
 * a short cluster — its total rate `factor` × the estimate over `durationMs` — and reads the
 * cluster's feedback: if the receiver got the cluster's packets as fast as they were sent, the
 * path carries at least that rate and an estimate below it jumps to it; if they arrived slower,
 * the link is full and the rate they arrived at is its capacity: an estimate under 0.95 × it
 * rises to that, one over its upper bound comes down (the caller's rule, transport-feedback.ts;
 * congestion-controller.ts `onSaturatedProbe`).
 *
 * The padding is RTX copies of recent media packets ("payload padding", as libwebrtc sends when
 * RTX is negotiated): the receiver drops them as duplicates, counts them in its transport-wide
 * feedback, and a lost one costs nothing. Without RTX a connection is not probed.
 *
 * Pure: a clock-free scheduler (the caller passes the time) and the cluster's evaluation.
 */

export interface ProbeRules {
  /** Probe only while the estimate is under this share of the connection's ceiling. */
  readonly belowCeiling: number;
  /**
   * Only while the sender uses the estimate: the rate sent over the last second ≥ this × the
   * estimate. Low, because an estimate runs ahead of its encoder (it may rise to 1.5 × what got
   * through; an encoder takes 0.9 × it, once a second); the ceiling keeps a sender at its
   * configured rate from probing for more.
   */
  readonly boundAbove: number;
  /** The cluster's total send rate, × the estimate (capped at the ceiling). */
  readonly factor: number;
  /**
   * The same after a probe that found the link full: enough to see it widen, and less padding
   * queued at a link that is still full (each probe there is ~5 % of a second's bytes at 1 Mbit/s).
   */
  readonly factorWhenFull: number;
  /** How long the cluster's padding is spread over, ms. */
  readonly durationMs: number;
  /** Fewest padding packets in a cluster; fewer received → no result. */
  readonly minPackets: number;
  /**
   * Between probes, ms, once one found nothing more; doubled after each probe in a row that found
   * the link full, up to `maxIntervalMs` (a link that stays narrow is not probed every few seconds:
   * each probe queues ~60 ms at it).
   */
  readonly intervalMs: number;
  readonly maxIntervalMs: number;
  /** After a probe that raised the estimate, the next one, ms (keep climbing while the link allows). */
  readonly afterRaiseMs: number;
  /** No probe within this of a decrease: the path just said no, ms. */
  readonly afterDecreaseMs: number;
  /** A cluster whose feedback has not all come back by then is given up, ms. */
  readonly timeoutMs: number;
  /** Received at under this share of the send rate: the link is full. */
  readonly saturatedBelow: number;
  /** Received faster than this × the send rate: arrivals bunched (a stall let them out together), no result. */
  readonly maxReceiveRatio: number;
  /** Share of the cluster's packets that must be reported received for a result. */
  readonly minReceivedShare: number;
  /** Largest padding packet, bytes (RTX copies are at most a media packet plus 2). */
  readonly packetBytes: number;
}

export const PROBE_RULES: ProbeRules = {
  belowCeiling: 0.9,
  boundAbove: 0.5,
  factor: 2,
  factorWhenFull: 1.5,
  durationMs: 60,
  minPackets: 5,
  intervalMs: 2_000,
  maxIntervalMs: 4_000,
  afterRaiseMs: 500,
  afterDecreaseMs: 1_500,
  timeoutMs: 1_000,
  saturatedBelow: 0.9,
  maxReceiveRatio: 2,
  minReceivedShare: 0.8,
  packetBytes: 1_200,
};

/**
 * What became of a probe: `raised` the estimate; `no_gain` (got through, at no more than the
 * estimate); `saturated` (the link could not take the cluster's rate: it is full, and the
 * estimate moves toward the rate it carried); `lost` (too few of its packets were reported, its
 * arrivals were bunched, or its feedback never came).
 */
export type ProbeOutcome = 'raised' | 'no_gain' | 'saturated' | 'lost';

/** One packet of a probe cluster as its feedback reported it. */
export interface ProbePacket {
  readonly sentAtMs: number;
  readonly bytes: number;
  readonly arrivedAtMs: number | undefined;
}

export interface ClusterResult {
  /** What got through, bit/s: min(send, receive); when saturated, the receive rate (the full link's). */
  readonly bps: number | undefined;
  readonly sendBps: number | undefined;
  readonly receiveBps: number | undefined;
  readonly saturated: boolean;
}

/**
 * The rates of a cluster: every packet numbered from its first padding packet to its last, media
 * included (they shared the link). The send rate leaves out the last packet's bytes (the span ends
 * as it leaves), the receive rate the first arrival's (the span starts as it lands).
 */
export function evaluateCluster(packets: readonly ProbePacket[], rules: ProbeRules = PROBE_RULES): ClusterResult {
  const none: ClusterResult = { bps: undefined, sendBps: undefined, receiveBps: undefined, saturated: false };
  const received = packets.filter((p) => p.arrivedAtMs !== undefined);
  if (received.length < rules.minPackets || received.length < rules.minReceivedShare * packets.length) return none;
  let firstSent = Infinity;
  let lastSent = -Infinity;
  let lastSentBytes = 0;
  let sentBytes = 0;
  for (const p of packets) {
    sentBytes += p.bytes;
    firstSent = Math.min(firstSent, p.sentAtMs);
    if (p.sentAtMs >= lastSent) {
      lastSent = p.sentAtMs;
      lastSentBytes = p.bytes;
    }
  }
  let firstArrival = Infinity;
  let firstArrivalBytes = 0;
  let lastArrival = -Infinity;
  let receivedBytes = 0;
  for (const p of received) {
    const at = p.arrivedAtMs!;
    receivedBytes += p.bytes;
    lastArrival = Math.max(lastArrival, at);
    if (at < firstArrival) {
      firstArrival = at;
      firstArrivalBytes = p.bytes;
    }
  }
  const sendSpan = lastSent - firstSent;
  const receiveSpan = lastArrival - firstArrival;
  if (!(sendSpan > 0) || !(receiveSpan > 0)) return none;
  const sendBps = ((sentBytes - lastSentBytes) * 8 * 1000) / sendSpan;
  const receiveBps = ((receivedBytes - firstArrivalBytes) * 8 * 1000) / receiveSpan;
  if (receiveBps > rules.maxReceiveRatio * sendBps) return { ...none, sendBps, receiveBps };
  const saturated = receiveBps < rules.saturatedBelow * sendBps;
  return { bps: saturated ? receiveBps : Math.min(sendBps, receiveBps), sendBps, receiveBps, saturated };
}

/** When the next probe may go, and at what rate. */
export class ProbeScheduler {
  readonly #rules: ProbeRules;
  #nextAtMs = -Infinity;
  #inFlight = false;
  /** Probes in a row that found the link full. */
  #saturatedInARow = 0;

  constructor(rules: ProbeRules = PROBE_RULES) {
    this.#rules = rules;
  }

  get rules(): ProbeRules {
    return this.#rules;
  }

  get inFlight(): boolean {
    return this.#inFlight;
  }

  /**
   * The cluster's total rate if a probe should start now, else undefined: none in flight, its
   * time has come, the estimate is under the ceiling and binds (the sender uses it), and the path
   * has not just asked for a decrease.
   */
  due(nowMs: number, state: { targetBps: number; ceilingBps: number; sentBps: number; lastDecreaseMs: number }): number | undefined {
    const rules = this.#rules;
    if (this.#inFlight || nowMs < this.#nextAtMs) return undefined;
    if (state.targetBps >= rules.belowCeiling * state.ceilingBps) return undefined;
    if (state.sentBps < rules.boundAbove * state.targetBps) return undefined;
    if (nowMs - state.lastDecreaseMs < rules.afterDecreaseMs) return undefined;
    this.#inFlight = true;
    const factor = this.#saturatedInARow > 0 ? rules.factorWhenFull : rules.factor;
    return Math.min(state.ceilingBps, factor * state.targetBps);
  }

  /** The probe that started ended so; the next waits accordingly. */
  finished(nowMs: number, outcome: ProbeOutcome): void {
    const rules = this.#rules;
    this.#inFlight = false;
    if (outcome === 'raised') {
      this.#saturatedInARow = 0;
      this.#nextAtMs = nowMs + rules.afterRaiseMs;
      return;
    }
    if (outcome === 'saturated') this.#saturatedInARow++;
    else this.#saturatedInARow = 0;
    const backoff = 2 ** Math.max(0, this.#saturatedInARow - 1);
    this.#nextAtMs = nowMs + Math.min(rules.maxIntervalMs, rules.intervalMs * backoff);
  }
}
