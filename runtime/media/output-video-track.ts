/**
 * One model output video track of a session: takes frames from `emit()`, paces them at the
 * track's fps, encodes each frame once per codec in use, packetizes once, and fans the packets
 * out to every subscribed connection.
 *
 *   emit ─▶ BoundedQueue ─▶ pacer (≤ fps) ─▶ encoder per codec ─▶ packetizer per codec ─▶ each VideoSink
 *
 * Pacing is a leaky bucket, not a tick grid: a frame that arrives on time leaves at once (no
 * added latency); a burst leaves one frame per 1/fps. Backpressure comes from the viewers that
 * play the track: while every connected viewer has paused it (spec: pauseTrack unsubscribes, "the
 * model keeps emitting"), the pacer still takes frames at the track's pace and drops them before
 * the encoder, so the model runs on at the track's fps and no CPU is spent encoding them. While no
 * viewer is connected at all (before the first, or in a reconnect window) the pacer takes
 * nothing, so with the `block` policy the model waits in emit(); when a viewer arrives, frames
 * that queued up meanwhile are dropped but the newest. No frame → nothing sent.
 *
 * A track that declares `fps: 'adaptive'` (or a range) is paced from throughput instead
 * (adaptive-pacer.ts): each emit() (a step's chunk) tells the pacer how many frames came and how
 * long the model took to make them; frames leave evenly at the estimated production rate, stamped
 * on that even grid, and a `block` producer waits while more than one batch (plus a small cushion)
 * is ahead of the stream, so a fast model does not build latency.
 *
 * A sink that joins, resumes or reports picture loss gets a keyframe; until its first keyframe
 * it receives nothing (it could not decode deltas). A joining sink is first shown one black
 * keyframe, so its picture opens on black rather than waiting for the model's next frame.
 *
 * An encoder that fails is freed and the next frame opens a fresh one, whose first frame is a
 * keyframe every viewer of that stream waits for; a backend that keeps failing is demoted for the
 * whole process and the fresh encoder is the next candidate's (encoder-failures.ts). Frames are
 * dropped meanwhile; the session carries on.
 */

import type { DropPolicy, OutputVideoTrackSpec } from '../model/definition.ts';
import type { Logger } from '../../server-kit/log.ts';
import type { RuntimeMetrics } from '../metrics.ts';
import { H264Packetizer } from '../rtp/h264-packetizer.ts';
import { H265Packetizer } from '../rtp/h265-packetizer.ts';
import { Vp8Packetizer } from '../rtp/vp8-packetizer.ts';
import { MAX_RTP_PAYLOAD_BYTES } from '../rtp/packet-size.ts';
import { BoundedQueue } from './bounded-queue.ts';
import { selectEncoderBackend, type EncoderBackend } from './encoder-backends.ts';
import { handleVideoEncoderFailure, type EncoderFailureAction, type EncoderFailurePhase } from './encoder-failures.ts';
import { CudaFramePool, cudaEncoderInput, downloadCudaFrame, isCudaVideoFrame, type PooledCudaFrame } from './cuda-frames.ts';
import { assertEmittableVideo } from './emit-checks.ts';
import { AdaptivePacer, adaptiveRangeOf, type PlayoutStats } from './adaptive-pacer.ts';
import { FramePool } from './frame-pool.ts';
import { NvencVideoEncoder } from './nvenc-video-encoder.ts';
import { solidI420 } from './frame-convert.ts';
import type { CudaVideoFrame, FrameMetadata, VideoFrame } from './frames.ts';
import { VideoEncoder, type EncodedVideoFrame, type H264Profile } from './video-encoder.ts';

export type VideoCodecName = 'h264' | 'h265' | 'vp8';

/**
 * One encode per distinct stream a track's viewers need: the codec, and for H.264 the profile
 * (a client that offers only High gets High; every other H.264 viewer shares Constrained Baseline).
 */
export type VideoStreamKey = 'h264' | 'h264-high' | 'h265' | 'vp8';

function streamKey(sink: VideoSink): VideoStreamKey {
  return sink.codec === 'h264' && sink.h264Profile === 'high' ? 'h264-high' : sink.codec;
}

/** The encoder settings that make a stream: its codec, and High profile for `h264-high`. */
function streamFormat(key: VideoStreamKey): { codec: VideoCodecName; profile?: H264Profile } {
  return key === 'h264-high' ? { codec: 'h264', profile: 'high' } : { codec: key };
}

/**
 * RTP payloads for one encoded frame of `codec`, small enough that each whole packet on the wire
 * (header, extensions, SRTP tag) stays within MAX_RTP_PACKET_BYTES (rtp/packet-size.ts).
 */
function createPacketizer(codec: VideoCodecName): { packetize(data: Buffer): Buffer[] } {
  switch (codec) {
    case 'h264':
      return new H264Packetizer(MAX_RTP_PAYLOAD_BYTES);
    case 'h265':
      return new H265Packetizer(MAX_RTP_PAYLOAD_BYTES);
    case 'vp8':
      return new Vp8Packetizer(MAX_RTP_PAYLOAD_BYTES);
  }
}

/** Where one connection receives this track. */
/** Who hears which encoder each stream got and how encoders failed (the session log, the event stream). */
export interface VideoEncoderEvents {
  opened(stream: VideoStreamKey, backend: EncoderBackend): void;
  failed(stream: VideoStreamKey, backend: EncoderBackend, phase: EncoderFailurePhase, action: EncoderFailureAction, reason: string): void;
}

export interface VideoSink {
  readonly connectionId: number;
  readonly codec: VideoCodecName;
  /** The H.264 profile this connection negotiated (default constrained baseline). */
  readonly h264Profile?: H264Profile;
  /**
   * Writes one frame's RTP payloads (marker on the last) at the given 90 kHz timestamp; returns
   * the timestamp as the client sees it, if the frame left.
   */
  sendFrame(payloads: readonly Buffer[], rtpTimestamp: number, mediaTimeMs: number): number | undefined;
  /** Delivers a frame's metadata, keyed by the timestamp `sendFrame` returned. */
  sendMetadata?(wireTimestamp: number, metadata: FrameMetadata): void;
  /** When the model emitted the frame that left with this timestamp (Unix ms), for latency. */
  noteEmitTime?(wireTimestamp: number, emittedAtMs: number): void;
  /** The receiver's bandwidth estimate (REMB), kbps, if it sent one. */
  estimatedBitrateKbps?(): number | undefined;
}

/** Network adaptation bounds (issue default: 500 kbps – 10 Mbps) and cadence. */
export const ADAPTATION = { minKbps: 500, maxKbps: 10_000, intervalMs: 1_000, headroom: 0.9 } as const;

/** The emit time rides on the queued copy, out of the model's sight. */
const EMITTED_AT = Symbol('emittedAtMs');
/** A CUDA frame's pooled device copy; the queued frame's own `data` is then empty. */
const CUDA_COPY = Symbol('cudaCopy');
/** When a frame of a timed batch (emit's `timeline`) is to leave, ms of performance.now(). */
const PLANNED_AT = Symbol('plannedAtMs');
type QueuedFrame = VideoFrame & { [EMITTED_AT]?: number; [CUDA_COPY]?: PooledCudaFrame; [PLANNED_AT]?: number };

/**
 * Where a batch's frames fall in time, set by something they must keep time with: the step's
 * audio (AudioPlacement, output-audio-track.ts). Frame i of the batch leaves at
 * `startMs + i × frameMs` (ms of performance.now()) instead of at the adaptive pacer's rate.
 */
export interface VideoTimeline {
  readonly startMs: number;
  readonly frameMs: number;
}
const NO_PIXELS = new Uint8Array(0);

interface SinkState {
  readonly sink: VideoSink;
  paused: boolean;
  awaitingKeyframe: boolean;
  /** A black frame is on its way to this sink (opening, flush): nothing else may overtake it. */
  blackPending: boolean;
  /** The connection is up; before that werift drops whatever is sent (the keyframe included). */
  ready: boolean;
  /**
   * The send time of the newest frame this sink has. A black frame can leave while a model frame
   * stamped earlier is still in the encoder; a receiver drops a frame older than the one it has
   * shown, then decodes the deltas after it on the black picture (a static region stays black
   * until the next keyframe). So a frame stamped before this is never sent.
   */
  newestMediaTimeMs: number;
}

interface CodecPipeline {
  readonly encoder: VideoEncoder;
  readonly packetize: (data: Buffer) => Buffer[];
  /** The rate the track asks for; adaptation only ever lowers it (to what receivers can take). */
  readonly configuredKbps: number;
  adaptedAt: number;
}

/** At most one encoder-failure error line per track per this long; the rest are counted into it. */
const ENCODER_ERROR_LOG_INTERVAL_MS = 5_000;

/** Frames queued between emit() and the encoder; small, so latency stays one or two frames. */
export const DEFAULT_QUEUE_FRAMES = 2;
/**
 * An adaptive track's queue: room for a few chunks. Its pacer, not this, keeps latency down (a
 * `block` producer waits while one batch is ahead); this bounds drop-policy producers.
 */
export const ADAPTIVE_QUEUE_FRAMES = 32;
/** A frame may leave this much before its slot: absorbs timer jitter in the model's own loop. */
const PACING_SLACK_MS = 4;

export class OutputVideoTrack {
  readonly name: string;
  readonly #spec: OutputVideoTrackSpec;
  readonly #fps: number;
  readonly #queue: BoundedQueue<VideoFrame>;
  readonly #pool: FramePool;
  readonly #cudaPool: CudaFramePool;
  readonly #intervalMs: number;
  readonly #dropPolicy: DropPolicy;
  /** When the pacer last let a frame go (performance.now()). */
  #lastSendAt = -Infinity;
  /** The media time of the last frame sent (see #mediaTime). */
  #lastMediaTimeMs = -Infinity;
  /** Sees every frame the track sends (the session's recorder); must not keep `frame` (it is pooled). */
  #frameTap: ((frame: VideoFrame, wallTimeMs: number) => void) | undefined;
  #activeWaiters: Array<() => void> = [];
  #wasViewed = false;
  readonly #sinks = new Map<VideoSink, SinkState>();
  readonly #pipelines = new Map<VideoStreamKey, Promise<CodecPipeline>>();
  readonly #blackKeyframes = new Map<VideoStreamKey, Promise<Buffer[]>>();
  readonly #metrics: RuntimeMetrics | undefined;
  readonly #log: Logger;
  readonly #encoderEvents: VideoEncoderEvents | undefined;
  readonly #pumping: Promise<void>;
  #framesEmitted = 0;
  /** Adaptive pacing (the spec's `fps: 'adaptive'` or range); undefined: the fixed leaky bucket. */
  readonly #adaptive: AdaptivePacer | undefined;
  /** The pump holds a frame until its slot (counts as buffered for the adaptive pacer). */
  #holding = false;
  /** Producers waiting for the adaptive pacer to have room (woken at each send). */
  #roomWaiters: Array<() => void> = [];
  /** When the previous emit() returned (performance.now()), and the viewing epoch then. */
  #lastEmitReturnAt: number | undefined;
  #lastEmitEpoch = -1;
  /** Bumped whenever viewing starts or stops: an emit gap spanning a change is no production sample. */
  #viewEpoch = 0;
  /** When the last encoder-failure error was logged (performance.now()), and failures since. */
  #encoderErrorLoggedAt = -Infinity;
  #encoderErrorsUnlogged = 0;

  constructor(spec: OutputVideoTrackSpec, fps: number, log: Logger, metrics?: RuntimeMetrics, encoderEvents?: VideoEncoderEvents) {
    this.name = spec.name;
    this.#encoderEvents = encoderEvents;
    this.#spec = spec;
    this.#fps = fps;
    this.#log = log.child({ track: spec.name });
    this.#metrics = metrics;
    const range = adaptiveRangeOf(spec, fps);
    this.#adaptive = range ? new AdaptivePacer(range) : undefined;
    const capacity = spec.queueFrames ?? (range ? ADAPTIVE_QUEUE_FRAMES : DEFAULT_QUEUE_FRAMES);
    if (!(Number.isInteger(capacity) && capacity >= 1 && capacity <= 300)) {
      throw new RangeError(`track "${spec.name}": queueFrames must be an integer from 1 to 300`);
    }
    this.#queue = new BoundedQueue<VideoFrame>(capacity);
    // Queue capacity + the frame being encoded + the one being pushed.
    this.#pool = new FramePool(capacity + 2);
    this.#cudaPool = new CudaFramePool(capacity + 2);
    this.#intervalMs = 1000 / fps;
    this.#dropPolicy = spec.dropPolicy ?? 'block';
    this.#publishPlayout();
    this.#pumping = this.#pump();
  }

  get width(): number {
    return this.#spec.width;
  }

  get height(): number {
    return this.#spec.height;
  }

  get framesEmitted(): number {
    return this.#framesEmitted;
  }

  /** How the track paces: the fixed declared rate, or the adaptive pacer's state (chosen rate, estimate). */
  get playout(): PlayoutStats | { readonly mode: 'fixed'; readonly fps: number } {
    return this.#adaptive ? this.#adaptive.stats : { mode: 'fixed', fps: this.#fps };
  }

  /**
   * Queues a frame, or each frame of a batch in order. With the `block` policy waits while the
   * queue is full (backpressure); drop policies never wait. Frames are copied before this resolves.
   */
  async emit(
    frames: VideoFrame | CudaVideoFrame | readonly (VideoFrame | CudaVideoFrame)[],
    dropPolicy: DropPolicy = this.#dropPolicy,
    /** One value for the whole batch: travels with its first frame (unless that frame has its own). */
    batchMetadata?: FrameMetadata,
    /**
     * How long the model took to produce this batch, ms (the step driver knows it). Adaptive
     * tracks only; without it, the time since the previous emit() returned is used.
     */
    productionMs?: number,
    /**
     * Adaptive tracks only: when each frame of the batch leaves — a step's frames timed to the
     * audio returned with them (video follows audio). Fixed-rate tracks ignore it.
     */
    timeline?: VideoTimeline,
  ): Promise<void> {
    const calledAt = performance.now();
    let batch: readonly (VideoFrame | CudaVideoFrame)[] = Array.isArray(frames) ? frames : [frames as VideoFrame];
    assertEmittableVideo(this.name, batch, batch.length > 0 ? batchMetadata : undefined);
    if (batchMetadata !== undefined && batch.length > 0 && batch[0]!.metadata === undefined) {
      batch = [{ ...batch[0]!, metadata: batchMetadata }, ...batch.slice(1)];
    }
    try {
      const timed = this.#adaptive !== undefined && timeline !== undefined;
      if (this.#adaptive && batch.length > 0) await this.#handOver(this.#adaptive, batch.length, dropPolicy, calledAt, productionMs, timed);
      await this.#queueBatch(batch, dropPolicy, timed ? timeline : undefined);
    } finally {
      this.#lastEmitReturnAt = performance.now();
      this.#lastEmitEpoch = this.#viewEpoch;
    }
  }

  /** Frames waiting to leave: queued, and the one the pump holds for its slot. */
  get #buffered(): number {
    return this.#queue.length + (this.#holding ? 1 : 0);
  }

  /**
   * An adaptive track takes a batch: a `block` producer first waits while the stream is full (more
   * than a batch ahead), then the pacer learns of the batch and its production time.
   */
  async #handOver(pacer: AdaptivePacer, frames: number, dropPolicy: DropPolicy, calledAt: number, productionMs: number | undefined, timed: boolean): Promise<void> {
    // A timed batch is not held here: its frames have their times already, and what bounds how far
    // ahead they are is the audio they keep time with (its own backpressure).
    if (dropPolicy === 'block' && !timed) {
      while (!this.#queue.closed && pacer.full(performance.now(), this.#buffered)) {
        await new Promise<void>((resolve) => this.#roomWaiters.push(resolve));
      }
    }
    // Without the driver's figure: the gap since the previous emit returned, when viewing held
    // throughout (while nobody watched, the model waited in emit or was not asked to produce).
    const gap = this.#lastEmitReturnAt !== undefined && this.#lastEmitEpoch === this.#viewEpoch && this.#viewed ? calledAt - this.#lastEmitReturnAt : undefined;
    pacer.produced(frames, productionMs ?? gap, performance.now(), this.#buffered);
    this.#publishPlayout();
  }

  /**
   * The playout rate to /metrics: the declared fps (fixed), or the pacer's chosen rate and its
   * production estimate (adaptive; changed only when a batch arrives).
   */
  #publishPlayout(): void {
    if (!this.#metrics) return;
    const playout = this.playout;
    this.#metrics.playoutFps.set({ track: this.name }, playout.fps);
    if (playout.mode === 'adaptive' && playout.productionFps !== undefined) {
      this.#metrics.productionFps.set({ track: this.name }, playout.productionFps);
    }
  }

  #wakeProducers(): void {
    for (const wake of this.#roomWaiters.splice(0)) wake();
  }

  async #queueBatch(batch: readonly (VideoFrame | CudaVideoFrame)[], dropPolicy: DropPolicy, timeline?: VideoTimeline): Promise<void> {
    for (const [index, frame] of batch.entries()) {
      if (this.#queue.closed) return;
      // First the copy: a CUDA pointer outside its allocation throws here, and counts as nothing.
      const copy: QueuedFrame = isCudaVideoFrame(frame) ? this.#cudaCopy(frame) : this.#pool.copy(frame);
      if (timeline) copy[PLANNED_AT] = timeline.startMs + index * timeline.frameMs;
      this.#framesEmitted++;
      this.#metrics?.framesEmitted.inc({ track: this.name });
      copy[EMITTED_AT] = performance.timeOrigin + performance.now();
      if (dropPolicy === 'block') {
        await this.#queue.push(copy);
        continue;
      }
      const dropped = this.#queue.pushDropping(copy, dropPolicy === 'drop-oldest' ? 'oldest' : 'newest');
      if (dropped) this.#drop(dropped, 'queue_full');
    }
  }

  /** Frames dropped so far by this track's queue and pacer, for tests and stats. */
  get framesDropped(): number {
    return this.#framesDropped;
  }

  /**
   * Discards the queue and shows every subscriber one black frame; the next model frame goes
   * out as a keyframe.
   */
  flush(): void {
    for (const frame of this.#queue.clear()) this.#drop(frame, 'flush');
    this.#adaptive?.reset();
    this.#wakeProducers();
    for (const state of this.#sinks.values()) {
      if (state.paused || !state.ready) continue;
      state.awaitingKeyframe = true;
      this.#sendBlack(state.sink);
    }
    for (const key of new Set([...this.#sinks.values()].map((s) => streamKey(s.sink)))) void this.#requestKeyframe(key);
  }

  /** Attaches a connection's sink; it receives nothing until `sinkReady`. */
  addSink(sink: VideoSink, options: { paused: boolean }): void {
    this.#sinks.set(sink, { sink, paused: options.paused, awaitingKeyframe: true, blackPending: false, ready: false, newestMediaTimeMs: -Infinity });
  }


  /** The sink's connection is up: open its picture on one black frame, then the model's. */
  sinkReady(sink: VideoSink): void {
    const state = this.#sinks.get(sink);
    if (!state || state.ready) return;
    state.ready = true;
    state.awaitingKeyframe = true;
    if (!state.paused) this.#sendBlack(sink);
    this.#activeChanged();
  }

  removeSink(sink: VideoSink): void {
    this.#sinks.delete(sink);
    this.#activeChanged();
  }

  setPaused(sink: VideoSink, paused: boolean): void {
    const state = this.#sinks.get(sink);
    if (!state || state.paused === paused) return;
    state.paused = paused;
    if (!paused && state.ready) {
      state.awaitingKeyframe = true;
      void this.#requestKeyframe(streamKey(sink));
    }
    this.#activeChanged();
  }

  /** A receiver lost its picture (RTCP PLI): send it a keyframe. */
  pictureLost(sink: VideoSink): void {
    const state = this.#sinks.get(sink);
    if (!state) return;
    state.awaitingKeyframe = true;
    this.#metrics?.pictureLoss.inc({ track: this.name });
    void this.#requestKeyframe(streamKey(sink));
  }

  async close(): Promise<void> {
    this.#queue.close();
    for (const wake of this.#activeWaiters.splice(0)) wake();
    this.#wakeProducers();
    await this.#pumping;
    this.#sinks.clear();
    for (const pipeline of this.#pipelines.values()) {
      pipeline.then((p) => p.encoder.close(), () => {});
    }
    this.#pipelines.clear();
    this.#cudaPool.close();
  }

  /** A connected viewer plays the track: frames are encoded and sent. */
  get #active(): boolean {
    for (const state of this.#sinks.values()) if (state.ready && !state.paused) return true;
    return false;
  }

  /** A connected viewer, playing or paused: the pacer takes frames at the track's pace. */
  get #viewed(): boolean {
    for (const state of this.#sinks.values()) if (state.ready) return true;
    return false;
  }

  #activeChanged(): void {
    const viewed = this.#viewed;
    if (viewed !== this.#wasViewed) {
      this.#viewEpoch++;
      this.#adaptive?.reset();
    }
    if (viewed && !this.#wasViewed) {
      // Frames that waited while nobody was connected are stale: the newest is all anyone needs.
      for (const frame of this.#queue.keepNewest()) this.#drop(frame, 'stale');
      for (const wake of this.#activeWaiters.splice(0)) wake();
      this.#wakeProducers();
    }
    this.#wasViewed = viewed;
  }

  #framesDropped = 0;
  #drop(frame: VideoFrame, reason: string): void {
    this.#framesDropped++;
    this.#metrics?.framesDropped.inc({ track: this.name, reason });
    this.#release(frame);
  }

  /** Gives a sent or dropped frame's buffer back to its pool (host or device). */
  #release(frame: VideoFrame): void {
    const cuda = (frame as QueuedFrame)[CUDA_COPY];
    if (cuda) this.#cudaPool.release(cuda);
    else this.#pool.release(frame);
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

  async #pump(): Promise<void> {
    for (;;) {
      // Take nothing while no viewer is connected: the queue fills and emit() applies
      // backpressure. A viewer that paused still lets frames through at the pace (dropped below).
      while (!this.#viewed && !this.#queue.closed) {
        await new Promise<void>((resolve) => this.#activeWaiters.push(resolve));
      }
      if (this.#adaptive) {
        if (!(await this.#pumpAdaptive(this.#adaptive))) return;
        continue;
      }
      // Strict spacing (1/fps) only for a producer that outruns the track — a free-running model
      // or a batch, i.e. one blocked in emit(). A frame the pacer had to wait for, or a backlog
      // while nobody is blocked (a model at exactly the track's fps never drains one on its own:
      // production equals consumption), may leave after half an interval, so latency stays at
      // the encode time instead of settling one or two frames behind.
      const idle = this.#queue.length === 0;
      const producerBlocked = this.#queue.blockedPushers > 0;
      const frame = await this.#queue.shift();
      if (frame === undefined) return;
      const emittedAt = (frame as QueuedFrame)[EMITTED_AT];
      const standing =
        !producerBlocked && this.#queue.length > 0 && emittedAt !== undefined &&
        performance.timeOrigin + performance.now() - emittedAt > 1.5 * this.#intervalMs;
      const relaxed = idle || standing;
      const gap = relaxed ? this.#intervalMs / 2 : this.#intervalMs;
      const wait = this.#lastSendAt + gap - PACING_SLACK_MS - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      this.#lastSendAt = performance.now();
      try {
        await this.#encodeAndSend(frame, relaxed);
      } catch (error) {
        this.#metrics?.framesDropped.inc({ track: this.name, reason: 'encode_error' });
        this.#log.error('video frame could not be encoded', { error });
      } finally {
        this.#release(frame);
      }
    }
  }

  /**
   * One frame of an adaptive track: held until the pacer's slot, then sent stamped with that slot
   * (an even grid of RTP timestamps). False once the track closed.
   */
  async #pumpAdaptive(pacer: AdaptivePacer): Promise<boolean> {
    const frame = await this.#queue.shift();
    if (frame === undefined) return false;
    this.#holding = true;
    let slotAt: number;
    try {
      // A timed frame (video following its step's audio) leaves at its own time; the rest at the pacer's.
      slotAt = (frame as QueuedFrame)[PLANNED_AT] ?? pacer.slot(performance.now());
      const wait = slotAt - performance.now();
      if (wait > 0.5) await new Promise((resolve) => setTimeout(resolve, wait));
    } finally {
      this.#holding = false;
    }
    pacer.sent(slotAt, performance.now());
    this.#wakeProducers();
    this.#lastSendAt = performance.now();
    try {
      await this.#encodeAndSend(frame, false, slotAt);
    } catch (error) {
      this.#metrics?.framesDropped.inc({ track: this.name, reason: 'encode_error' });
      this.#log.error('video frame could not be encoded', { error });
    } finally {
      this.#release(frame);
    }
    return true;
  }

  /** Lets the recorder see every frame sent (it copies what it keeps). */
  setFrameTap(tap: ((frame: VideoFrame, wallTimeMs: number) => void) | undefined): void {
    this.#frameTap = tap;
  }

  async #encodeAndSend(frame: VideoFrame, onTime: boolean, plannedAtMs?: number): Promise<void> {
    const active = [...this.#sinks.values()].filter((s) => s.ready && !s.paused);
    if (active.length === 0) {
      // Every viewer paused the track (the model keeps emitting at its pace; nothing is encoded),
      // or the last one left while this frame waited for its slot.
      this.#metrics?.framesDropped.inc({ track: this.name, reason: this.#viewed ? 'paused' : 'no_subscribers' });
      this.#framesDropped++;
      return;
    }
    // A CUDA frame is read from GPU memory by NVENC; anything else reading it gets one host copy,
    // made on the thread pool (the event loop keeps serving while the GPU copy runs).
    const cuda = (frame as QueuedFrame)[CUDA_COPY];
    let host: Promise<VideoFrame> | undefined = cuda ? undefined : Promise.resolve(frame);
    const hostFrame = (): Promise<VideoFrame> => {
      host ??= downloadCudaFrame(cuda!).then(({ frame: pixels, copyMs, convertMs }) => {
        this.#metrics?.cudaDownload.observe({ track: this.name, stage: 'copy' }, copyMs / 1000);
        this.#metrics?.cudaDownload.observe({ track: this.name, stage: 'convert' }, convertMs / 1000);
        return {
          ...pixels,
          ...(frame.timestampUs === undefined ? {} : { timestampUs: frame.timestampUs }),
          ...(frame.metadata === undefined ? {} : { metadata: frame.metadata }),
        };
      });
      return host;
    };
    try {
      if (this.#frameTap) this.#frameTap(await hostFrame(), Date.now());
    } catch (error) {
      this.#log.warn('the frame tap failed', { error });
    }
    const mediaTimeMs = this.#mediaTime(frame as QueuedFrame, onTime, plannedAtMs);
    const rtpTimestamp = toRtpTimestamp(mediaTimeMs * 1000);
    const streams = new Set(active.map((s) => streamKey(s.sink)));
    const emittedAt = (frame as QueuedFrame)[EMITTED_AT];
    let sentOnce = false;
    for (const key of streams) {
      // One stream's broken encoder costs its viewers this frame, never another stream's.
      let pipeline: CodecPipeline;
      try {
        pipeline = await this.#pipeline(key);
      } catch (error) {
        this.#frameNotEncoded(key, error);
        continue;
      }
      const sinks = active.filter((s) => streamKey(s.sink) === key);
      if (sinks.some((s) => s.awaitingKeyframe)) pipeline.encoder.requestKeyframe();
      this.#adaptBitrate(key, pipeline, sinks);
      const encoder = pipeline.encoder;
      const fromGpu = cuda !== undefined && encoder instanceof NvencVideoEncoder && encoder.width === cuda.width && encoder.height === cuda.height;
      let input: VideoFrame | undefined;
      if (!fromGpu) {
        try {
          input = await hostFrame();
        } catch (error) {
          // The GPU copy failed, not the encoder: this frame is lost for every stream, the encoders stay.
          this.#hostCopyFailed(error);
          return;
        }
      }
      const started = performance.now();
      let encoded: EncodedVideoFrame[];
      try {
        encoded = fromGpu ? await (encoder as NvencVideoEncoder).encodeCuda(cudaEncoderInput(cuda!), frame.timestampUs) : await encoder.encode(input!);
      } catch (error) {
        this.#retirePipeline(key, pipeline);
        this.#encoderFailed(key, encoder.backend, 'encode', error);
        this.#frameNotEncoded(key, error);
        continue;
      }
      this.#metrics?.encodeDuration.observe({ codec: key }, (performance.now() - started) / 1000);
      for (const unit of encoded) {
        if (unit.keyframe) this.#metrics?.keyframesEncoded.inc({ track: this.name, codec: key });
        const payloads = pipeline.packetize(unit.data);
        for (const state of sinks) {
          if (!this.#sinks.has(state.sink) || state.paused || !state.ready) continue;
          if (state.blackPending || (state.awaitingKeyframe && !unit.keyframe)) {
            this.#metrics?.framesDropped.inc({ track: this.name, reason: 'awaiting_keyframe' });
            continue;
          }
          let sinkMediaTimeMs = mediaTimeMs;
          if (mediaTimeMs <= state.newestMediaTimeMs) {
            if (!unit.keyframe) {
              // Overtaken by a black frame: this sink needs a keyframe stamped after it.
              state.awaitingKeyframe = true;
              pipeline.encoder.requestKeyframe();
              this.#metrics?.framesDropped.inc({ track: this.name, reason: 'overtaken' });
              continue;
            }
            // A keyframe overtaken by the black frame that opened (or flushed) this sink — the
            // usual case when a viewer arrives, as the frame was taken before the black one went
            // out: it is sent two 90 kHz ticks after the black one instead of being dropped for
            // the next keyframe, a frame interval later.
            sinkMediaTimeMs = state.newestMediaTimeMs + 2 / 90;
          }
          state.awaitingKeyframe = false;
          state.newestMediaTimeMs = sinkMediaTimeMs;
          const sinkRtpTimestamp = sinkMediaTimeMs === mediaTimeMs ? rtpTimestamp : toRtpTimestamp(sinkMediaTimeMs * 1000);
          const wireTimestamp = state.sink.sendFrame(payloads, sinkRtpTimestamp, sinkMediaTimeMs);
          if (wireTimestamp !== undefined) {
            if (frame.metadata !== undefined) state.sink.sendMetadata?.(wireTimestamp, frame.metadata);
            if (emittedAt !== undefined) state.sink.noteEmitTime?.(wireTimestamp, emittedAt);
          }
          this.#metrics?.framesSent.inc({ track: this.name });
          if (!sentOnce && emittedAt !== undefined) {
            sentOnce = true; // one observation per frame, however many viewers and codecs
            this.#metrics?.emitToSend.observe({ track: this.name }, (performance.timeOrigin + performance.now() - emittedAt) / 1000);
          }
        }
      }
    }
  }

  /**
   * The moment a frame stands for (ms of performance.now()), from which its RTP timestamp comes.
   * A frame the pacer let through on time stands for when the model emitted it — what the sound
   * beside it is stamped with — so a frame that waited for the encoder on a loaded machine still
   * plays with its sound. Frames the pacer spread out (a batch, a producer faster than the track)
   * share an emit time or none: they stand for when they leave, and their spacing is the pacer's.
   * An adaptive track's frames stand for their planned slot (`plannedAtMs`), so their timestamps
   * keep the pacer's even spacing whatever the timers did. Never in the future, and always after
   * the previous frame.
   */
  #mediaTime(frame: QueuedFrame, onTime: boolean, plannedAtMs?: number): number {
    const now = performance.now();
    const emittedAt = frame[EMITTED_AT];
    let mediaTimeMs = now;
    if (plannedAtMs !== undefined) {
      mediaTimeMs = Math.max(Math.min(now, plannedAtMs), this.#lastMediaTimeMs + 1 / 90);
    } else if (onTime && emittedAt !== undefined) {
      mediaTimeMs = Math.min(now, Math.max(emittedAt - performance.timeOrigin, this.#lastMediaTimeMs + this.#intervalMs / 2));
    }
    this.#lastMediaTimeMs = mediaTimeMs;
    return mediaTimeMs;
  }

  /**
   * Follows the slowest receiver: the lowest REMB among this codec's viewers, with 10% headroom,
   * within [500 kbps, 10 Mbps] and never above the configured rate. Once a second at most.
   * FFmpeg's libvpx wrapper does not apply rate changes to a running encoder, so VP8 keeps its
   * start-up rate; H.264 (libx264, NVENC) and H.265 adapt.
   */
  #adaptBitrate(codec: VideoStreamKey, pipeline: CodecPipeline, sinks: readonly SinkState[]): void {
    const now = performance.now();
    if (codec === 'vp8' || now - pipeline.adaptedAt < ADAPTATION.intervalMs) return;
    pipeline.adaptedAt = now;
    let estimate = Infinity;
    for (const { sink } of sinks) {
      const kbps = sink.estimatedBitrateKbps?.();
      if (kbps !== undefined && kbps > 0) estimate = Math.min(estimate, kbps * ADAPTATION.headroom);
    }
    const ceiling = Math.min(pipeline.configuredKbps, ADAPTATION.maxKbps);
    const target = Math.max(ADAPTATION.minKbps, Math.min(ceiling, estimate));
    // Hysteresis: ignore changes under 5% so the encoder is not reconfigured every second.
    if (Math.abs(target - pipeline.encoder.bitrateKbps) / pipeline.encoder.bitrateKbps < 0.05) return;
    pipeline.encoder.setBitrate(target);
    this.#metrics?.targetBitrate.set({ track: this.name, codec }, target * 1000);
    this.#log.debug('video bitrate adapted', { codec, kbps: Math.round(target) });
  }

  #pipeline(key: VideoStreamKey): Promise<CodecPipeline> {
    let pipeline = this.#pipelines.get(key);
    if (!pipeline) {
      const opening = this.#createPipeline(key);
      pipeline = opening;
      this.#pipelines.set(key, opening);
      // Not cached: the next frame tries again (by then perhaps with another backend).
      opening.catch(() => {
        if (this.#pipelines.get(key) === opening) this.#pipelines.delete(key);
      });
    }
    return pipeline;
  }

  async #createPipeline(key: VideoStreamKey): Promise<CodecPipeline> {
    const format = streamFormat(key);
    // Chosen here rather than inside VideoEncoder.create, so an open failure is charged to it.
    const backend = await selectEncoderBackend(format.codec);
    let encoder: VideoEncoder;
    try {
      encoder = await this.#openEncoder(key, backend);
    } catch (error) {
      this.#encoderFailed(key, backend, 'open', error);
      throw error;
    }
    this.#encoderEvents?.opened(key, backend);
    this.#metrics?.targetBitrate.set({ track: this.name, codec: key }, encoder.bitrateKbps * 1000);
    const packetizer = createPacketizer(format.codec);
    return { encoder, packetize: (data) => packetizer.packetize(data), configuredKbps: encoder.bitrateKbps, adaptedAt: 0 };
  }

  #openEncoder(key: VideoStreamKey, backend: EncoderBackend): Promise<VideoEncoder> {
    return VideoEncoder.create({
      ...streamFormat(key),
      backend,
      width: this.#spec.width,
      height: this.#spec.height,
      fps: this.#fps,
      ...(this.#spec.bitrateKbps === undefined ? {} : { bitrateKbps: this.#spec.bitrateKbps }),
    });
  }

  /**
   * Frees a stream's failed encoder and forgets its pipeline, so the next frame opens a fresh
   * one. Its first frame is a keyframe, and until then every viewer of the stream is marked as
   * waiting for one: a delta from the new encoder refers to pictures they never had.
   */
  #retirePipeline(key: VideoStreamKey, pipeline: CodecPipeline): void {
    // Only the pump retires pipelines, one frame at a time, so the map still holds this one.
    this.#pipelines.delete(key);
    pipeline.encoder.close();
    for (const state of this.#sinks.values()) {
      if (streamKey(state.sink) === key) state.awaitingKeyframe = true;
    }
  }

  /** Counts an encoder failure and lets the process-wide policy restart or demote its backend. */
  #encoderFailed(key: VideoStreamKey, backend: EncoderBackend, phase: EncoderFailurePhase, error: unknown): void {
    const outcome = handleVideoEncoderFailure(backend, phase, error);
    this.#metrics?.videoEncoderFailures.inc({ track: this.name, codec: key, backend: backend.name, action: outcome.action });
    this.#encoderEvents?.failed(key, backend, phase, outcome.action, outcome.reason ?? (error instanceof Error ? error.message : String(error)));
    if (outcome.action === 'fallback') {
      // Rare and process-wide: always logged, with why.
      this.#log.warn('video encoder backend demoted: later encoders use the next candidate', {
        codec: backend.codec,
        backend: backend.name,
        reason: outcome.reason,
      });
    }
  }

  /** A frame one stream could not get (its encoder failed or would not open): dropped, and logged at a bounded rate. */
  /** A CUDA frame's host copy failed (the GPU, not an encoder): dropped, logged like encode errors. */
  #hostCopyFailed(error: unknown): void {
    this.#framesDropped++;
    this.#metrics?.framesDropped.inc({ track: this.name, reason: 'cuda_copy_error' });
    const now = performance.now();
    if (now - this.#encoderErrorLoggedAt < ENCODER_ERROR_LOG_INTERVAL_MS) {
      this.#encoderErrorsUnlogged++;
      return;
    }
    this.#log.error('a CUDA frame could not be copied to the host for encoding; dropped', { error });
    this.#encoderErrorLoggedAt = now;
    this.#encoderErrorsUnlogged = 0;
  }

  #frameNotEncoded(key: VideoStreamKey, error: unknown): void {
    this.#framesDropped++;
    this.#metrics?.framesDropped.inc({ track: this.name, reason: 'encode_error' });
    const now = performance.now();
    if (now - this.#encoderErrorLoggedAt < ENCODER_ERROR_LOG_INTERVAL_MS) {
      this.#encoderErrorsUnlogged++;
      return;
    }
    this.#log.error('video frame could not be encoded; the next frame tries a fresh encoder', {
      codec: key,
      error,
      ...(this.#encoderErrorsUnlogged > 0 ? { failures_not_logged: this.#encoderErrorsUnlogged } : {}),
    });
    this.#encoderErrorLoggedAt = now;
    this.#encoderErrorsUnlogged = 0;
  }

  async #requestKeyframe(key: VideoStreamKey): Promise<void> {
    try {
      (await this.#pipeline(key)).encoder.requestKeyframe();
    } catch {
      // The pipeline failed to open; the next frame reports it.
    }
  }

  /** The black keyframe of a stream, encoded once per codec by its own encoder (a failed encode is not kept: the next asks again). */
  #blackKeyframe(key: VideoStreamKey): Promise<Buffer[]> {
    let black = this.#blackKeyframes.get(key);
    if (!black) {
      black = processBlackKeyframe(key, this.#spec.width, this.#spec.height, this.#fps);
      const encoding = black;
      this.#blackKeyframes.set(key, encoding);
      encoding.catch(() => {
        if (this.#blackKeyframes.get(key) === encoding) this.#blackKeyframes.delete(key);
      });
    }
    return black;
  }

  /** Sends the cached black keyframe to a sink (opening, flush), encoded once per codec by its own encoder. */
  #sendBlack(sink: VideoSink): void {
    const state = this.#sinks.get(sink);
    if (!state) return;
    state.blackPending = true;
    this.#blackKeyframe(streamKey(sink)).then(
      (payloads) => {
        if (this.#sinks.get(sink) !== state || state.paused || !state.ready) return;
        // Two 90 kHz ticks after what the sink has, so the two never share a timestamp.
        const mediaTimeMs = Math.max(performance.now(), state.newestMediaTimeMs + 2 / 90);
        state.newestMediaTimeMs = mediaTimeMs;
        sink.sendFrame(payloads, toRtpTimestamp(mediaTimeMs * 1000), mediaTimeMs);
      },
      (error: unknown) => this.#log.warn('black frame could not be encoded', { error }),
    ).finally(() => {
      // The model's next frame must be a keyframe this sink can decode from.
      state.blackPending = false;
      state.awaitingKeyframe = true;
      void this.#requestKeyframe(streamKey(sink));
    });
  }
}

/**
 * Black keyframes by stream and size, for the whole process: one is a self-contained picture (its
 * own parameter sets, from its own encoder), the same for every session, and opening an encoder
 * for it blocks the event loop ~13 ms at 720p on this project's 2-core machine — paid once, not
 * in every connect. A failed encode is not kept.
 */
const blackKeyframes = new Map<string, Promise<Buffer[]>>();

function processBlackKeyframe(key: VideoStreamKey, width: number, height: number, fps: number): Promise<Buffer[]> {
  const id = `${key} ${width}x${height}@${fps}`;
  let black = blackKeyframes.get(id);
  if (!black) {
    const encoding = encodeBlackKeyframe(key, width, height, fps);
    black = encoding;
    blackKeyframes.set(id, encoding);
    encoding.catch(() => {
      if (blackKeyframes.get(id) === encoding) blackKeyframes.delete(id);
    });
  }
  return black;
}

async function encodeBlackKeyframe(key: VideoStreamKey, width: number, height: number, fps: number): Promise<Buffer[]> {
  const format = streamFormat(key);
  const encoder = await VideoEncoder.create({ ...format, width, height, fps });
  try {
    encoder.requestKeyframe();
    const [unit] = await encoder.encode(solidI420(width, height, 16, 128, 128));
    if (!unit) throw new Error('encoder produced no black frame');
    return createPacketizer(format.codec).packetize(unit.data);
  } finally {
    encoder.close();
  }
}

/** 90 kHz RTP clock from microseconds, wrapping at 2^32. */
function toRtpTimestamp(timestampUs: number): number {
  return Math.floor((timestampUs * 90) / 1000) % 0x1_0000_0000;
}
