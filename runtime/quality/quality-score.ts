/**
 * The media quality score a connection reports in `media_stats`: one number from 0 (unusable)
 * to 10 (perfect) summarising how well the video reaches this client over the last report
 * interval. Pure: no clocks, no I/O; `MediaStatsReporter` gathers the inputs.
 *
 * Formula. Each impairment maps to a factor in [0, 1]; the score is their product times 10,
 * rounded to one decimal:
 *
 *     score = round1(10 · q_loss · q_jitter · q_rtt · q_fps · q_freeze)
 *
 *   ramp(x, good, bad) = 0 at or below `good`, 1 at or beyond `bad`, linear between
 *
 *   q_loss   = 1 − 0.6 · ramp(loss,      0.5 %,   10 %)   (10 % loss alone → 4.0)
 *   q_jitter = 1 − 0.3 · ramp(jitter_ms, 20 ms,  150 ms)  (the client's RTCP interarrival jitter)
 *   q_rtt    = 1 − 0.3 · ramp(rtt_ms,    150 ms, 600 ms)
 *   q_fps    = 1 −       ramp(fps / target_fps, 0.9, 0.2 (falling))  (≤ 20 % of target → 0)
 *   q_freeze = 1 − 0.25 · min(freezes, 2)                  (per interval: 1 → ×0.75, ≥ 2 → ×0.5)
 *
 * `target_fps` is what could have been sent: the model's declared fps, or fewer when the model
 * itself emitted fewer frames in the interval (a slow or idle model is not a bad network). With
 * no video sent or nothing to compare, q_fps = 1. Missing measurements (no RTCP report yet) count
 * as perfect. A product, rather than a sum of penalties, so that one total failure (no frames
 * at all) brings the score to 0 whatever the other factors say, and impairments compound.
 *
 * For scale: a clean loopback link scores 10; 5 % packet loss alone scores 7.2; 2 % loss plus
 * 200 ms RTT scores 8.8; a stream running at half its frame rate scores 4.3.
 */

export interface QualityInputs {
  /** Fraction of RTP packets lost on the way to the client, 0..1. */
  readonly loss?: number | undefined;
  /** Interarrival jitter the client reports, ms. */
  readonly jitterMs?: number | undefined;
  /** Round-trip time, ms. */
  readonly rttMs?: number | undefined;
  /** Video frames per second actually sent to the client. Undefined: no video sent. */
  readonly fps?: number | undefined;
  /** Frames per second that could have been sent (declared, or what the model emitted if fewer). */
  readonly targetFps?: number | undefined;
  /** Freezes (≥ 500 ms without a sent frame while the model emitted) in the interval. */
  readonly freezes?: number | undefined;
}

export interface QualityFactors {
  readonly loss: number;
  readonly jitter: number;
  readonly rtt: number;
  readonly fps: number;
  readonly freeze: number;
}

/** Thresholds of the formula above, exported for the docs and tests. */
export const QUALITY_THRESHOLDS = {
  loss: { good: 0.005, bad: 0.1, weight: 0.6 },
  jitterMs: { good: 20, bad: 150, weight: 0.3 },
  rttMs: { good: 150, bad: 600, weight: 0.3 },
  fpsRatio: { good: 0.9, bad: 0.2 },
  freeze: { perFreeze: 0.25, maxCounted: 2 },
} as const;

/** A gap of at least this long between sent frames, while the model emitted, is a freeze. */
export const FREEZE_THRESHOLD_MS = 500;

/** 0 at or on the good side of `good`, 1 at or beyond `bad`, linear between (either direction). */
export function ramp(value: number, good: number, bad: number): number {
  if (!Number.isFinite(value)) return value === (bad > good ? Infinity : -Infinity) ? 1 : 0;
  const t = (value - good) / (bad - good);
  return Math.min(1, Math.max(0, t));
}

export function qualityFactors(inputs: QualityInputs): QualityFactors {
  const t = QUALITY_THRESHOLDS;
  const measured = (v: number | undefined): v is number => typeof v === 'number' && !Number.isNaN(v);
  const loss = measured(inputs.loss) ? 1 - t.loss.weight * ramp(inputs.loss, t.loss.good, t.loss.bad) : 1;
  const jitter = measured(inputs.jitterMs) ? 1 - t.jitterMs.weight * ramp(inputs.jitterMs, t.jitterMs.good, t.jitterMs.bad) : 1;
  const rtt = measured(inputs.rttMs) ? 1 - t.rttMs.weight * ramp(inputs.rttMs, t.rttMs.good, t.rttMs.bad) : 1;
  let fps = 1;
  if (measured(inputs.fps) && measured(inputs.targetFps) && inputs.targetFps > 0) {
    fps = 1 - ramp(inputs.fps / inputs.targetFps, t.fpsRatio.good, t.fpsRatio.bad);
  }
  const freezes = measured(inputs.freezes) ? Math.max(0, inputs.freezes) : 0;
  const freeze = 1 - t.freeze.perFreeze * Math.min(freezes, t.freeze.maxCounted);
  return { loss, jitter, rtt, fps, freeze };
}

/** The 0–10 score, one decimal. */
export function qualityScore(inputs: QualityInputs): number {
  const f = qualityFactors(inputs);
  const product = f.loss * f.jitter * f.rtt * f.fps * f.freeze;
  return Math.round(Math.min(1, Math.max(0, product)) * 100) / 10;
}
