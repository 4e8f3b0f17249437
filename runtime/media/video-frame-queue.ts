/**
 * An output video track's frames between emit() and the pacer, and its drop policy.
 *
 * Each emitted frame is copied into a pooled buffer — host memory, or for a `CudaVideoFrame` a
 * device-to-device copy (cuda-frames.ts) — and stamped, out of the model's sight, with when it
 * was emitted and, for a timed batch, when it is to leave. The queue is small (latency stays one
 * or two frames): `block` waits for room, drop-oldest/-newest never wait and count what they
 * drop. Every frame the track drops anywhere is counted here, so `framesDropped` is one number.
 */
import type { DropPolicy } from '../model/definition.ts';
import type { RuntimeMetrics } from '../metrics.ts';
import { BoundedQueue } from './bounded-queue.ts';
import { CudaFramePool, isCudaVideoFrame, type PooledCudaFrame } from './cuda-frames.ts';
import { FramePool } from './frame-pool.ts';
import type { CudaVideoFrame, VideoFrame } from './frames.ts';

/** The emit time rides on the queued copy, out of the model's sight. */
const EMITTED_AT = Symbol('emittedAtMs');
/** A CUDA frame's pooled device copy; the queued frame's own `data` is then empty. */
const CUDA_COPY = Symbol('cudaCopy');
/** When a frame of a timed batch (emit's `timeline`) is to leave, ms of performance.now(). */
const PLANNED_AT = Symbol('plannedAtMs');
export type QueuedFrame = VideoFrame & { [EMITTED_AT]?: number; [CUDA_COPY]?: PooledCudaFrame; [PLANNED_AT]?: number };

const NO_PIXELS = new Uint8Array(0);

/**
 * Where a batch's frames fall in time, set by something they must keep time with: the step's
 * audio (AudioPlacement, output-audio-track.ts). Frame i of the batch leaves at
 * `startMs + i × frameMs` (ms of performance.now()) instead of at the adaptive pacer's rate.
 */
export interface VideoTimeline {
  readonly startMs: number;
  readonly frameMs: number;
}

/** When the model emitted the frame (Unix ms), if it came through emit(). */
export function emittedAtOf(frame: QueuedFrame): number | undefined {
  return frame[EMITTED_AT];
}

/** When a frame of a timed batch is to leave (ms of performance.now()); undefined for the rest. */
export function plannedAtOf(frame: QueuedFrame): number | undefined {
  return frame[PLANNED_AT];
}

/** The pooled device copy of a CUDA frame; undefined for a frame in host memory. */
export function cudaCopyOf(frame: QueuedFrame): PooledCudaFrame | undefined {
  return frame[CUDA_COPY];
}

export class VideoFrameQueue {
  readonly #track: string;
  readonly #queue: BoundedQueue<QueuedFrame>;
  readonly #pool: FramePool;
  readonly #cudaPool: CudaFramePool;
  readonly #metrics: RuntimeMetrics | undefined;
  #framesEmitted = 0;
  #framesDropped = 0;

  constructor(track: string, capacity: number, metrics: RuntimeMetrics | undefined) {
    this.#track = track;
    this.#metrics = metrics;
    this.#queue = new BoundedQueue<QueuedFrame>(capacity);
    // Queue capacity + the frame being encoded + the one being pushed.
    this.#pool = new FramePool(capacity + 2);
    this.#cudaPool = new CudaFramePool(capacity + 2);
  }

  get length(): number {
    return this.#queue.length;
  }

  get closed(): boolean {
    return this.#queue.closed;
  }

  /** Producers waiting in a `block` push. */
  get blockedPushers(): number {
    return this.#queue.blockedPushers;
  }

  get framesEmitted(): number {
    return this.#framesEmitted;
  }

  /** Frames dropped so far by this track's queue, pacer and encoders. */
  get framesDropped(): number {
    return this.#framesDropped;
  }

  /** The next frame, waiting for one; undefined once closed. */
  shift(): Promise<QueuedFrame | undefined> {
    return this.#queue.shift();
  }

  async pushBatch(batch: readonly (VideoFrame | CudaVideoFrame)[], dropPolicy: DropPolicy, timeline?: VideoTimeline): Promise<void> {
    for (let index = 0; index < batch.length; index++) {
      const frame = batch[index]!;
      if (this.#queue.closed) return;
      // First the copy: a CUDA pointer outside its allocation throws here, and counts as nothing.
      const copy: QueuedFrame = isCudaVideoFrame(frame) ? this.#cudaCopy(frame) : this.#pool.copy(frame);
      if (timeline) copy[PLANNED_AT] = timeline.startMs + index * timeline.frameMs;
      this.#framesEmitted++;
      this.#metrics?.framesEmitted.inc({ track: this.#track });
      copy[EMITTED_AT] = performance.timeOrigin + performance.now();
      if (dropPolicy === 'block') {
        await this.#queue.push(copy);
        continue;
      }
      const dropped = this.#queue.pushDropping(copy, dropPolicy === 'drop-oldest' ? 'oldest' : 'newest');
      if (dropped) this.drop(dropped, this.overflowReason);
    }
  }

  /**
   * Why a drop-policy producer's frame is dropped when the queue is full: `queue_full` (the
   * encoder is behind), or `congestion` while the pacer waits for the viewers' links
   * (send-budget.ts).
   */
  overflowReason: 'queue_full' | 'congestion' = 'queue_full';

  /** Drops every queued frame (a flush). */
  dropAll(reason: string): void {
    for (const frame of this.#queue.clear()) this.drop(frame, reason);
  }

  /** Drops all but the newest queued frame (frames that waited while nobody was connected). */
  dropAllButNewest(reason: string): void {
    for (const frame of this.#queue.keepNewest()) this.drop(frame, reason);
  }

  /** Counts a dropped frame and gives its buffer back. */
  drop(frame: QueuedFrame, reason: string): void {
    this.countDropped(reason);
    this.release(frame);
  }

  /** Counts a frame dropped after it left the queue (its buffer is released by whoever holds it). */
  countDropped(reason: string): void {
    this.#framesDropped++;
    this.#metrics?.framesDropped.inc({ track: this.#track, reason });
  }

  /** Gives a sent or dropped frame's buffer back to its pool (host or device). */
  release(frame: QueuedFrame): void {
    const cuda = frame[CUDA_COPY];
    if (cuda) this.#cudaPool.release(cuda);
    else this.#pool.release(frame);
  }

  /** Ends the queue: waiting producers and the pacer return. */
  close(): void {
    this.#queue.close();
  }

  /** Frees the device pool, once nothing holds a frame of it. */
  closePools(): void {
    this.#cudaPool.close();
  }

  /** A queued frame for a CUDA frame: its pixels copied device to device into the track's pool. */
  #cudaCopy(frame: CudaVideoFrame): QueuedFrame {
    const queued: QueuedFrame = {
      width: frame.width,
      height: frame.height,
      format: 'i420',
      data: NO_PIXELS,
      ...(frame.timestampUs === undefined ? {} : { timestampUs: frame.timestampUs }),
      ...(frame.metadata === undefined ? {} : { metadata: frame.metadata }),
    };
    queued[CUDA_COPY] = this.#cudaPool.copy(frame);
    return queued;
  }
}
