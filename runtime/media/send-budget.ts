/**
 * An output video track's send budget (issue 25 part 5): how many bytes its viewers' links can
 * take, so a model on a slow link slows down instead of encoding frames that will be dropped.
 *
 * One token bucket per stream (codec), filled at the lowest bandwidth estimate among that
 * stream's playing viewers (REMB, or the runtime's own estimate from transport-wide feedback) and
 * emptied by each frame's encoded bytes. The bucket holds at most `depthMs` of the rate, so a
 * keyframe (several times a delta frame) leaves at once and is paid back over the next frames.
 * A stream whose viewers report no estimate has no bucket: nothing to go by, nothing held back.
 *
 * The encoder's bitrate follows the same estimate (video-bitrate-adaptation.ts), so the budget
 * runs dry only when the link is below what the encoder can go down to — its floor — or the
 * encoder overshoots: then the pacer waits for the budget before taking the next frame
 * (output-video-pacer.ts), the queue fills, and a `block` producer waits in emit() while a
 * drop-policy producer's frames are dropped before the encoder (counted as `congestion`).
 */
import type { VideoStreamKey } from './video-stream-key.ts';

/** Room for a keyframe: half a second of the link's rate. */
export const SEND_BUDGET_DEPTH_MS = 500;

interface Bucket {
  /** Bytes that may still go; negative: owed. */
  tokens: number;
  /** Bytes per ms. */
  rate: number;
  updatedAt: number;
}

export class SendBudget {
  readonly #buckets = new Map<VideoStreamKey, Bucket>();
  readonly #depthMs: number;
  readonly #now: () => number;

  constructor(depthMs = SEND_BUDGET_DEPTH_MS, now: () => number = () => performance.now()) {
    this.#depthMs = depthMs;
    this.#now = now;
  }

  /**
   * A frame of `stream` left: `bytes` of encoded data, to viewers whose lowest estimate is
   * `rateKbps` (undefined: none reported, and the stream is not held back).
   */
  spent(stream: VideoStreamKey, bytes: number, rateKbps: number | undefined): void {
    if (rateKbps === undefined || !(rateKbps > 0)) {
      this.#buckets.delete(stream);
      return;
    }
    const now = this.#now();
    const rate = rateKbps / 8; // kbit/s → bytes per ms
    let bucket = this.#buckets.get(stream);
    if (bucket === undefined) {
      bucket = { tokens: rate * this.#depthMs, rate, updatedAt: now };
      this.#buckets.set(stream, bucket);
    }
    this.#refill(bucket, now);
    bucket.rate = rate;
    bucket.tokens = Math.min(bucket.tokens, rate * this.#depthMs) - bytes;
  }

  /** How long (ms) until no stream owes bytes: 0 when the next frame may go now. */
  waitMs(): number {
    const now = this.#now();
    let wait = 0;
    for (const bucket of this.#buckets.values()) {
      this.#refill(bucket, now);
      // Under a byte owed is nothing owed (and keeps float error from asking for femtoseconds).
      if (bucket.tokens < -1) wait = Math.max(wait, -bucket.tokens / bucket.rate);
    }
    return wait;
  }

  /** Forgets the streams nobody plays any more. */
  keepOnly(streams: ReadonlySet<VideoStreamKey>): void {
    for (const stream of this.#buckets.keys()) if (!streams.has(stream)) this.#buckets.delete(stream);
  }

  #refill(bucket: Bucket, now: number): void {
    bucket.tokens = Math.min(bucket.rate * this.#depthMs, bucket.tokens + bucket.rate * (now - bucket.updatedAt));
    bucket.updatedAt = now;
  }
}
