/**
 * Playout paced from throughput, for an output video track that declares `fps: 'adaptive'` (or a
 * range): frames that arrive in chunks (a diffusion or world model's N frames every T ms, T
 * varying) leave evenly at the rate the model produces them, instead of at a fixed declared fps
 * (which, for 4 frames every 250 ms under fps 24, sends bursts 42 ms apart and then a gap).
 *
 * Pure and clock-free: every method takes the time (ms on one monotonic scale), so the runtime's
 * track (performance.now()) and the test harness (its manual clock) drive the same logic.
 *
 * The model:
 *  - **Production samples.** Each arriving batch (one emit(), one step's chunk) comes with how long
 *    the model took to produce it — from its previous batch, less any time it was held back
 *    (blocked in emit, no viewer, a skipped step). The rate estimate is Σframes / Σms over the
 *    samples of the last second (at least 2, at most 16), and varying chunk sizes weigh correctly.
 *    Two samples in a row 30 % off the rest, the same way, restart the window from them: a changed
 *    step time is followed within two steps. Paused time never enters a sample.
 *  - **Lead.** At each arrival, the time the stream could still play without it: the slot of the
 *    next frame plus what is buffered. The target lead is the *cushion*: 4 ms plus three times the
 *    mean absolute deviation of the last 16 batch times (a step-time change is not counted as
 *    deviation), at most one frame interval — so a frame's added latency stays within one step
 *    time (the chunk's last frame leaves (N−1)/rate after its first).
 *  - **Rate.** Between arrivals frames leave evenly at `fps = estimate × (1 + correction)`, where
 *    the correction (proportional; +50 % / −25 % at most) brings the lead back to the cushion
 *    within a few chunks: a lead above it means latency is building (play faster), below it a stall is coming
 *    (play slower). The rate changes only at arrivals, so spacing within a chunk is exact.
 *  - **Underrun.** A batch that arrives after the stream ran dry (a slower step) restarts the
 *    schedule one cushion later; the gap it caused is counted (`underruns`).
 *  - **Room.** A producer is held (block policy) while the lead exceeds one batch time plus the
 *    cushion: a model faster than playout waits instead of building latency, and — its held time
 *    being excluded from its samples — the estimate still rises to its real rate.
 *  - **Bounds.** fps stays within [minFps, maxFps]; a producer faster than maxFps is held back to
 *    it, like a fixed-fps track.
 */

export interface AdaptivePacerOptions {
  /** Lowest playout rate, fps (> 0). */
  readonly minFps: number;
  /** Highest playout rate, fps: the track's ceiling (the model's declared fps by default). */
  readonly maxFps: number;
}

/** What the pacer is doing, for media_stats, /metrics and tests. */
export interface PlayoutStats {
  readonly mode: 'adaptive';
  /** The rate frames leave at now (fps). */
  readonly fps: number;
  /** The model's production rate as estimated (fps, unclamped); undefined before the first sample. */
  readonly productionFps: number | undefined;
  /** The lead the pacer aims for at each arrival, ms. */
  readonly cushionMs: number;
  /** Batches that arrived after the stream had run dry. */
  readonly underruns: number;
  /** Production samples taken so far. */
  readonly samples: number;
}

interface Sample {
  readonly frames: number;
  readonly ms: number;
  readonly at: number;
}

/** Samples within this long of the newest make the estimate (at least MIN_SAMPLES of them). */
const WINDOW_MS = 1_000;
const MIN_SAMPLES = 2;
const MAX_SAMPLES = 16;
/** Two samples in a row this much faster (or 1/(1+CHANGE) slower) than the rest restart the estimate. */
const CHANGE = 0.3;
/** Fraction of the lead error corrected per chunk. */
const GAIN = 0.5;
/**
 * Largest relative change of the playout rate from the estimate: faster (latency built up, e.g. at
 * a speed-up before the estimate followed) drains quicker than slower (a stall coming) brakes.
 */
const MAX_SPEEDUP = 0.5;
const MAX_SLOWDOWN = 0.25;
/** Cushion: this much plus three times the batch time's mean absolute deviation, at most one frame interval. */
const BASE_CUSHION_MS = 4;
/** Batch times the deviation (and so the cushion) is measured over. */
const DEVIATION_SAMPLES = 16;
/** A production time under this is taken as this (a batch produced from cache, a clock's resolution). */
const MIN_SAMPLE_MS = 0.5;

export class AdaptivePacer {
  readonly #minFps: number;
  readonly #maxFps: number;
  readonly #samples: Sample[] = [];
  #sampleCount = 0;
  /** Σframes / Σms over the window, fps (unclamped), once there is a sample. */
  #estimate: number | undefined;
  /** Mean batch time over the window, ms. */
  #batchMs: number | undefined;
  /** Mean absolute deviation of recent batch times, ms. */
  #deviationMs = 0;
  /** Recent batch times, ms (the newest last), for the deviation. */
  readonly #history: number[] = [];
  #fps: number;
  /** When the next frame may leave; -Infinity: at once (nothing sent yet, or the schedule was reset). */
  #nextAt = -Infinity;
  #underruns = 0;

  constructor(options: AdaptivePacerOptions) {
    if (!(options.minFps > 0 && options.maxFps >= options.minFps && Number.isFinite(options.maxFps))) {
      throw new RangeError(`adaptive pacing needs 0 < minFps ≤ maxFps; got ${options.minFps}–${options.maxFps}`);
    }
    this.#minFps = options.minFps;
    this.#maxFps = options.maxFps;
    this.#fps = options.maxFps;
  }

  /** One frame interval at the current playout rate, ms. */
  get intervalMs(): number {
    return 1000 / this.#fps;
  }

  get cushionMs(): number {
    return Math.min(BASE_CUSHION_MS + 3 * this.#deviationMs, this.intervalMs);
  }

  get stats(): PlayoutStats {
    return {
      mode: 'adaptive',
      fps: this.#fps,
      productionFps: this.#estimate,
      cushionMs: this.cushionMs,
      underruns: this.#underruns,
      samples: this.#sampleCount,
    };
  }

  /**
   * A batch of `frames` arrives at `now`, `buffered` frames still waiting to leave ahead of it.
   * `productionMs`: how long the model took to make it (undefined: not known, e.g. the first
   * emit of a loop; then it only counts for the buffer).
   */
  produced(frames: number, productionMs: number | undefined, now: number, buffered: number): void {
    if (frames <= 0) return;
    if (productionMs !== undefined && Number.isFinite(productionMs) && productionMs >= 0) this.#addSample(frames, productionMs, now);
    let lead = this.leadMs(now, buffered);
    const cushion = this.cushionMs;
    if (lead < 0) {
      // The stream ran dry before this batch came: restart the schedule a cushion from now.
      if (this.#nextAt !== -Infinity) this.#underruns++;
      this.#nextAt = now + cushion;
      lead = cushion;
    }
    const estimate = this.#estimate ?? this.#maxFps;
    const batchMs = this.#batchMs ?? (frames * 1000) / estimate;
    const error = lead - cushion;
    const correction = Math.max(-MAX_SLOWDOWN, Math.min(MAX_SPEEDUP, (GAIN * error) / Math.max(batchMs, 1)));
    this.#fps = clamp(estimate * (1 + correction), this.#minFps, this.#maxFps);
  }

  /**
   * How long the stream can play from `now` without another batch, ms: until the slot after the
   * last of `buffered` frames. Negative: it ran dry that long ago.
   */
  leadMs(now: number, buffered: number): number {
    if (this.#nextAt === -Infinity) return buffered > 0 ? buffered * this.intervalMs : -Infinity;
    if (buffered === 0) return this.#nextAt - now;
    return Math.max(this.#nextAt, now) + buffered * this.intervalMs - now;
  }

  /**
   * Whether a producer with the block policy should wait before handing over another batch: the
   * stream has more than one batch time plus the cushion ahead of it.
   */
  full(now: number, buffered: number): boolean {
    if (buffered === 0) return false;
    const batchMs = this.#batchMs ?? this.intervalMs;
    return this.leadMs(now, buffered) > batchMs + this.cushionMs;
  }

  /** When the next frame should leave, given it is ready at `now`. */
  slot(now: number): number {
    return Math.max(this.#nextAt, now);
  }

  /**
   * A frame left: `slotAt` is what `slot()` said, `now` when it actually went. The next slot is
   * one interval after the planned one (timer lateness does not accumulate), or after the actual
   * one when that was more than half an interval late.
   */
  sent(slotAt: number, now: number): void {
    const interval = this.intervalMs;
    const base = now - slotAt > interval / 2 ? now : slotAt;
    this.#nextAt = base + interval;
  }

  /** Forget the schedule (nobody watched for a while, a flush): the next frame leaves at once. Estimates stay. */
  reset(): void {
    this.#nextAt = -Infinity;
  }

  #addSample(frames: number, productionMs: number, at: number): void {
    const ms = Math.max(productionMs, MIN_SAMPLE_MS);
    this.#samples.push({ frames, ms, at });
    this.#sampleCount++;
    // A changed step time: the newest two samples both off the rest by more than CHANGE, the same
    // way. The rest no longer describe the model; the estimate restarts from those two. (Checked
    // before the window moves on, so the old samples are still there to compare with.)
    const count = this.#samples.length;
    let restarted = false;
    if (count > MIN_SAMPLES) {
      const older = this.#samples.slice(0, count - 2);
      const olderRate = older.reduce((a, x) => a + x.frames, 0) / older.reduce((a, x) => a + x.ms, 0);
      const ratios = this.#samples.slice(-2).map((x) => x.frames / x.ms / olderRate);
      if (ratios.every((r) => r > 1 + CHANGE) || ratios.every((r) => r < 1 / (1 + CHANGE))) {
        this.#samples.splice(0, count - 2);
        restarted = true;
      }
    }
    while (this.#samples.length > MAX_SAMPLES || (this.#samples.length > MIN_SAMPLES && at - this.#samples[0]!.at > WINDOW_MS))
      this.#samples.shift();
    let sumFrames = 0;
    let sumMs = 0;
    for (const sample of this.#samples) {
      sumFrames += sample.frames;
      sumMs += sample.ms;
    }
    this.#estimate = (sumFrames * 1000) / sumMs;
    this.#batchMs = sumMs / this.#samples.length;
    // The jitter the cushion covers: the batch times' mean absolute deviation over the last
    // DEVIATION_SAMPLES, the newest left out until the next one confirms it is not the start of a
    // new step time (a change is not jitter: a restart keeps only the new regime's samples).
    this.#history.push(ms);
    if (restarted) this.#history.splice(0, this.#history.length - 2);
    if (this.#history.length > DEVIATION_SAMPLES + 1) this.#history.shift();
    const confirmed = this.#history.slice(0, -1);
    if (confirmed.length < 2) this.#deviationMs = 0;
    else {
      const mean = confirmed.reduce((a, b) => a + b, 0) / confirmed.length;
      this.#deviationMs = confirmed.reduce((a, b) => a + Math.abs(b - mean), 0) / confirmed.length;
    }
  }
}

function clamp(value: number, min: number, max: number): number {
  return Math.min(max, Math.max(min, value));
}

/**
 * The playout range an output video track's `fps` declares, or undefined for a fixed-rate track:
 * `'adaptive'` is 1 fps up to the model's fps; `{ min, max }` narrows it (max defaults to the
 * model's fps, min to 1 — or max, when max is lower).
 */
export function adaptiveRangeOf(
  spec: { readonly fps?: 'adaptive' | { readonly min?: number; readonly max?: number } },
  modelFps: number,
): AdaptivePacerOptions | undefined {
  if (spec.fps === undefined) return undefined;
  const range = spec.fps === 'adaptive' ? {} : spec.fps;
  const maxFps = Math.min(range.max ?? modelFps, modelFps);
  const minFps = Math.min(range.min ?? 1, maxFps);
  return { minFps, maxFps };
}
