/**
 * The model's output tracks as the test harness runs them: the same emit() checks, copies and
 * backpressure as the runtime's tracks (runtime/media/output-video-track.ts,
 * output-audio-track.ts), on the harness's manual clock, with the encoder and the network
 * replaced by a list of what viewers would have received.
 */

import type { DropPolicy, OutputAudioTrackSpec, OutputVideoTrackSpec } from '../model/definition.ts';
import { BoundedQueue } from '../media/bounded-queue.ts';
import { CudaFramePool, downloadCudaFrame, isCudaVideoFrame } from '../media/cuda-frames.ts';
import { assertEmittableAudio, assertEmittableVideo } from '../media/emit-checks.ts';
import type { AudioFrame, CudaVideoFrame, FrameMetadata, VideoFrame } from '../media/frames.ts';
import { AUDIO_FRAME_MS, AUDIO_SAMPLE_RATE, MAX_BUFFERED_AUDIO_MS } from '../media/output-audio-track.ts';
import { ADAPTIVE_QUEUE_FRAMES, DEFAULT_QUEUE_FRAMES } from '../media/output-video-track.ts';
import { AdaptivePacer, adaptiveRangeOf, type PlayoutStats } from '../media/adaptive-pacer.ts';
import type { ManualClock } from './manual-clock.ts';

/** Float slack when comparing moments on the manual clock (sums of 1000/fps do not add up exactly). */
const EPSILON_MS = 1e-6;

/**
 * A video output: emit() copies each frame and queues it (capacity `queueFrames`, default 2;
 * `block` waits for room, drop policies drop); a pacer lets at most one frame go per 1/fps of
 * the manual clock, and none while no connection watches — so, as in the runtime, a model's loop
 * runs at the rate its viewers play at. What the pacer lets go is `sent`. A track with
 * `fps: 'adaptive'` is paced by the runtime's AdaptivePacer on the manual clock instead.
 */
export class SimulatedVideoOutput {
  readonly name: string;
  /** The frames viewers received, in order: copies taken at emit(), so the model may reuse its buffers. */
  readonly sent: VideoFrame[] = [];
  /** When each of `sent` left (manual clock, ms). */
  readonly sentAt: number[] = [];
  readonly #queue: BoundedQueue<VideoFrame>;
  readonly #adaptive: AdaptivePacer | undefined;
  readonly #fps: number;
  #holding = false;
  #roomWaiters: Array<() => void> = [];
  #lastEmitReturnAt: number | undefined;
  #lastEmitEpoch = -1;
  #watchEpoch = 0;
  readonly #dropPolicy: DropPolicy;
  readonly #intervalMs: number;
  readonly #clock: ManualClock;
  readonly #closing = new AbortController();
  readonly #cudaPool: CudaFramePool;
  readonly #pumping: Promise<void>;
  #watched = false;
  #watchWaiters: Array<() => void> = [];
  #lastSentAt = -Infinity;
  #dropped = 0;

  constructor(spec: OutputVideoTrackSpec, fps: number, clock: ManualClock) {
    this.name = spec.name;
    const range = adaptiveRangeOf(spec, fps);
    this.#adaptive = range ? new AdaptivePacer(range) : undefined;
    this.#fps = fps;
    const capacity = spec.queueFrames ?? (range ? ADAPTIVE_QUEUE_FRAMES : DEFAULT_QUEUE_FRAMES);
    this.#queue = new BoundedQueue<VideoFrame>(capacity);
    this.#cudaPool = new CudaFramePool(capacity + 2);
    this.#dropPolicy = spec.dropPolicy ?? 'block';
    this.#intervalMs = 1000 / fps;
    this.#clock = clock;
    this.#pumping = this.#pump();
  }

  /** Frames dropped by the queue's drop policy, a flush, or as stale when viewing resumed. */
  get dropped(): number {
    return this.#dropped;
  }

  /** How the track paces, as OutputVideoTrack.playout reports it. */
  get playout(): PlayoutStats | { readonly mode: 'fixed'; readonly fps: number } {
    return this.#adaptive ? this.#adaptive.stats : { mode: 'fixed', fps: this.#fps };
  }

  /** The track's half of `session.emit()`: checks, copies and queues as OutputVideoTrack.emit does. */
  async emit(
    frames: readonly (VideoFrame | CudaVideoFrame)[],
    dropPolicy: DropPolicy = this.#dropPolicy,
    batchMetadata?: FrameMetadata,
    productionMs?: number,
  ): Promise<void> {
    const calledAt = this.#clock.now();
    let batch = frames;
    assertEmittableVideo(this.name, batch, batch.length > 0 ? batchMetadata : undefined);
    if (batchMetadata !== undefined && batch.length > 0 && batch[0]!.metadata === undefined) {
      batch = [{ ...batch[0]!, metadata: batchMetadata }, ...batch.slice(1)];
    }
    try {
      const pacer = this.#adaptive;
      if (pacer && batch.length > 0) {
        // As OutputVideoTrack.#handOver: a blocking producer waits while a batch is ahead.
        if (dropPolicy === 'block') {
          while (!this.#queue.closed && pacer.full(this.#clock.now(), this.#buffered))
            await new Promise<void>((resolve) => this.#roomWaiters.push(resolve));
        }
        const gap =
          this.#lastEmitReturnAt !== undefined && this.#lastEmitEpoch === this.#watchEpoch && this.#watched
            ? calledAt - this.#lastEmitReturnAt
            : undefined;
        pacer.produced(batch.length, productionMs ?? gap, this.#clock.now(), this.#buffered);
      }
      await this.#queueBatch(batch, dropPolicy);
    } finally {
      this.#lastEmitReturnAt = this.#clock.now();
      this.#lastEmitEpoch = this.#watchEpoch;
    }
  }

  get #buffered(): number {
    return this.#queue.length + (this.#holding ? 1 : 0);
  }

  #wakeProducers(): void {
    for (const wake of this.#roomWaiters.splice(0)) wake();
  }

  async #queueBatch(batch: readonly (VideoFrame | CudaVideoFrame)[], dropPolicy: DropPolicy): Promise<void> {
    for (const frame of batch) {
      if (this.#queue.closed) return;
      const copy = isCudaVideoFrame(frame) ? await this.#hostCopy(frame) : { ...frame, data: frame.data.slice() };
      if (dropPolicy === 'block') {
        await this.#queue.push(copy);
        continue;
      }
      if (this.#queue.pushDropping(copy, dropPolicy === 'drop-oldest' ? 'oldest' : 'newest')) this.#dropped++;
    }
  }

  /** Whether any connection watches: the pacer takes nothing while none does. */
  setWatched(watched: boolean): void {
    if (watched !== this.#watched) {
      this.#watchEpoch++;
      this.#adaptive?.reset();
    }
    if (watched && !this.#watched) {
      // Frames that waited while nobody watched are stale: the newest is all anyone needs.
      this.#dropped += this.#queue.keepNewest().length;
      for (const wake of this.#watchWaiters.splice(0)) wake();
      this.#wakeProducers();
    }
    this.#watched = watched;
  }

  /** session.flush(): what is queued is discarded (viewers would see one black frame; not recorded). */
  flush(): void {
    this.#dropped += this.#queue.clear().length;
    this.#adaptive?.reset();
    this.#wakeProducers();
  }

  /** Session end: a waiting emit() returns, the pacer stops. */
  async close(): Promise<void> {
    this.#queue.close();
    this.#closing.abort();
    for (const wake of this.#watchWaiters.splice(0)) wake();
    this.#wakeProducers();
    await this.#pumping;
    this.#cudaPool.close();
  }

  /** A CUDA frame as viewers would see it: copied device to device as the runtime does, then to the host. */
  async #hostCopy(frame: CudaVideoFrame): Promise<VideoFrame> {
    const pooled = this.#cudaPool.copy(frame);
    try {
      const host = (await downloadCudaFrame(pooled)).frame;
      return {
        ...host,
        ...(frame.timestampUs === undefined ? {} : { timestampUs: frame.timestampUs }),
        ...(frame.metadata === undefined ? {} : { metadata: frame.metadata }),
      };
    } finally {
      this.#cudaPool.release(pooled);
    }
  }

  async #pump(): Promise<void> {
    for (;;) {
      while (!this.#watched && !this.#queue.closed) await new Promise<void>((resolve) => this.#watchWaiters.push(resolve));
      if (this.#adaptive) {
        if (!(await this.#pumpAdaptive(this.#adaptive))) return;
        continue;
      }
      const frame = await this.#queue.shift();
      if (frame === undefined) return;
      const wait = this.#lastSentAt + this.#intervalMs - this.#clock.now();
      if (wait > EPSILON_MS && (await this.#clock.sleep(wait, this.#closing.signal))) return;
      if (!this.#watched) {
        // The last viewer left while this frame waited for its slot.
        this.#dropped++;
        continue;
      }
      this.#lastSentAt = this.#clock.now();
      this.sent.push(frame);
      this.sentAt.push(this.#lastSentAt);
    }
  }

  /** One frame of an adaptive track, at the pacer's slot. False once closed. */
  async #pumpAdaptive(pacer: AdaptivePacer): Promise<boolean> {
    const frame = await this.#queue.shift();
    if (frame === undefined) return false;
    this.#holding = true;
    const slotAt = pacer.slot(this.#clock.now());
    const wait = slotAt - this.#clock.now();
    const closed = wait > EPSILON_MS && (await this.#clock.sleep(wait, this.#closing.signal));
    this.#holding = false;
    if (closed) return false;
    pacer.sent(slotAt, this.#clock.now());
    this.#wakeProducers();
    if (!this.#watched) {
      this.#dropped++;
      return true;
    }
    this.sent.push(frame);
    this.sentAt.push(this.#clock.now());
    return true;
  }
}

/**
 * An audio output: emit() records a copy of each frame and, as the runtime's track does, waits
 * while more than 200 ms of audio is ahead of the clock, which plays 20 ms per 20 ms of the
 * manual clock whether or not anyone listens. So a loop paced only by its audio emit() runs in
 * step with the clock instead of spinning.
 */
export class SimulatedAudioOutput {
  readonly name: string;
  readonly channels: 1 | 2;
  /** The frames the track took from emit(), in order: copies, as emitted (not remixed to the track's channels). */
  readonly emitted: AudioFrame[] = [];
  readonly #clock: ManualClock;
  readonly #closing = new AbortController();
  /** Samples per channel emitted and not yet played. */
  #buffered = 0;
  #roomWaiters: Array<() => void> = [];
  readonly #playing: Promise<void>;

  constructor(spec: OutputAudioTrackSpec, clock: ManualClock) {
    this.name = spec.name;
    this.channels = spec.channels ?? 1;
    this.#clock = clock;
    this.#playing = this.#play();
  }

  /** The track's half of `session.emit()` for one audio frame: checks it, waits for room, records it. */
  async emit(frame: AudioFrame): Promise<void> {
    if (this.#closing.signal.aborted) return;
    assertEmittableAudio(this.name, frame, AUDIO_SAMPLE_RATE);
    // Copied now: the model may only reuse its buffer once emit() resolves, which may be later.
    const copy: AudioFrame = { ...frame, samples: frame.samples.slice() };
    while (!this.#closing.signal.aborted && this.#bufferedMs() > MAX_BUFFERED_AUDIO_MS) {
      await new Promise<void>((resolve) => this.#roomWaiters.push(resolve));
    }
    if (this.#closing.signal.aborted) return;
    this.emitted.push(copy);
    this.#buffered += copy.samples.length / copy.channels;
  }

  /** Session end: a waiting emit() returns, the audio clock stops. */
  close(): Promise<void> {
    this.#closing.abort();
    for (const wake of this.#roomWaiters.splice(0)) wake();
    return this.#playing;
  }

  #bufferedMs(): number {
    return (this.#buffered / AUDIO_SAMPLE_RATE) * 1000;
  }

  /** The audio clock: 20 ms of samples leave every 20 ms (silence when short). */
  async #play(): Promise<void> {
    const start = this.#clock.now();
    for (let tick = 1; ; tick++) {
      const wait = start + tick * AUDIO_FRAME_MS - this.#clock.now();
      if (wait > EPSILON_MS && (await this.#clock.sleep(wait, this.#closing.signal))) return;
      this.#buffered = Math.max(0, this.#buffered - (AUDIO_SAMPLE_RATE * AUDIO_FRAME_MS) / 1000);
      for (const wake of this.#roomWaiters.splice(0)) wake();
    }
  }
}
