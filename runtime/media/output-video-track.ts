/**
 * One model output video track of a session: takes frames from `emit()`, paces them at the
 * track's fps, encodes each frame once per codec in use, packetizes once, and fans the packets
 * out to every subscribed connection.
 *
 *   emit ─▶ VideoFrameQueue ─▶ OutputVideoPacer (≤ fps) ─▶ VideoStreamEncoders (encoder + packetizer
 *   per stream) ─▶ VideoSinks (each connection)
 *
 * This class wires those parts (each in its own file, named in the diagram, with
 * encoder-input.ts for CUDA frames, video-bitrate-adaptation.ts and black-keyframes.ts) and keeps
 * what spans them: the order of a frame's way out, and a frame's media time.
 *
 * Pacing is a leaky bucket, not a tick grid: a frame that arrives on time leaves at once (no
 * added latency); a burst leaves one frame per 1/fps. Backpressure comes from the viewers that
 * play the track: while every connected viewer has paused it (spec: pauseTrack unsubscribes, "the
 * model keeps emitting"), the pacer still takes frames at the track's pace and drops them before
 * the encoder, so the model runs on at the track's fps and no CPU is spent encoding them. While no
 * viewer is connected at all (before the first, or in a reconnect window) the pacer takes
 * nothing, so with the `block` policy the model waits in emit(); when a viewer arrives, frames
 * that queued up meanwhile are dropped but the newest. No frame → nothing sent. The viewers'
 * links push back too: while a stream's send budget (send-budget.ts: a token bucket at its
 * viewers' lowest bandwidth estimate) is spent, the pacer takes nothing, so a `block` model slows
 * to what the link carries and a drop-policy model's frames are dropped before the encoder.
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
 *
 * ~480 lines: the order of a frame's way out (queue, pace, encode, record, send) kept in one
 * place; each stage's work is in its own file. The next to move out when it grows: the
 * recorder's choice of source and the send budget's accounting, both in #encodeAndSend.
 */

import type { DropPolicy, OutputVideoTrackSpec } from '../model/definition.ts';
import type { Logger } from '../../server-kit/log.ts';
import type { RuntimeMetrics } from '../metrics.ts';
import { AdaptivePacer, adaptiveRangeOf, type PlayoutStats } from './adaptive-pacer.ts';
import { TrackBlackKeyframes } from './black-keyframes.ts';
import { processEncoderBackends, type EncoderBackendRegistry } from './encoder-backends.ts';
import { EncoderInput } from './encoder-input.ts';
import { assertEmittableVideo } from './emit-checks.ts';
import type { CudaVideoFrame, FrameMetadata, VideoFrame } from './frames.ts';
import { OutputVideoPacer } from './output-video-pacer.ts';
import type { EncodedVideoFrame } from './video-encoder.ts';
import { emittedAtOf, VideoFrameQueue, type QueuedFrame, type VideoTimeline } from './video-frame-queue.ts';
import { SendBudget } from './send-budget.ts';
import { lowestEstimateKbps, type BitrateBounds } from './video-bitrate-adaptation.ts';
import { VideoSinks, type VideoSink } from './video-sinks.ts';
import { VideoStreamEncoders, type StreamPipeline, type VideoEncoderEvents } from './video-stream-encoders.ts';
import { streamKey, toRtpTimestamp, type VideoStreamKey } from './video-stream-key.ts';
import { defaultBitrateKbps } from './video-encoder-factory.ts';

// Where the track's callers (the session, the test harness, benches) have always found these.
export type { VideoStreamKey } from './video-stream-key.ts';
export type { VideoSink } from './video-sinks.ts';
export type { VideoEncoderEvents } from './video-stream-encoders.ts';
export type { VideoTimeline } from './video-frame-queue.ts';
export { ADAPTATION } from './video-bitrate-adaptation.ts';

/** The track's recorder, as the track sees it (recording/track-recorder.ts is one). */
export interface VideoRecordingTap {
  /** Whether it takes a live H.264 stream's encoded frames when the track sends one; false: always raw frames. */
  readonly sharesLiveEncoder: boolean;
  /** A raw frame for its own encoder; it copies what it keeps. */
  push(frame: VideoFrame, wallTimeMs: number): void;
  /** One access unit of a live stream's encoder (`source`: asked for keyframes at segment boundaries). */
  pushEncoded(unit: EncodedVideoFrame, wallTimeMs: number, source: { requestKeyframe(): void }): void;
}

/**
 * The stream a recording can take instead of encoding again: H.264 (High preferred, the better
 * archive) at the track's size, which every stream of the track is.
 */
function recordableStream(streams: ReadonlySet<VideoStreamKey>): VideoStreamKey | undefined {
  if (streams.has('h264-high')) return 'h264-high';
  if (streams.has('h264')) return 'h264';
  return undefined;
}

/** Frames queued between emit() and the encoder; small, so latency stays one or two frames. */
export const DEFAULT_QUEUE_FRAMES = 2;
/**
 * An adaptive track's queue: room for a few chunks. Its pacer, not this, keeps latency down (a
 * `block` producer waits while one batch is ahead); this bounds drop-policy producers.
 */
export const ADAPTIVE_QUEUE_FRAMES = 32;

export class OutputVideoTrack {
  readonly name: string;
  readonly #spec: OutputVideoTrackSpec;
  readonly #fps: number;
  readonly #intervalMs: number;
  readonly #dropPolicy: DropPolicy;
  readonly #queue: VideoFrameQueue;
  readonly #pacer: OutputVideoPacer;
  readonly #sinks: VideoSinks;
  readonly #encoders: VideoStreamEncoders;
  readonly #blackKeyframes: TrackBlackKeyframes;
  /** The media time of the last frame sent (see #mediaTime). */
  #lastMediaTimeMs = -Infinity;
  /** Sees every frame the track sends (tests, benches); must not keep `frame` (it is pooled). */
  #frameTap: ((frame: VideoFrame, wallTimeMs: number) => void) | undefined;
  /** The session's recorder of this track, if it is the recorded one. */
  #recorder: VideoRecordingTap | undefined;
  readonly #metrics: RuntimeMetrics | undefined;
  readonly #log: Logger;
  readonly #pumping: Promise<void>;
  /** Adaptive pacing (the spec's `fps: 'adaptive'` or range); undefined: the fixed leaky bucket. */
  readonly #adaptive: AdaptivePacer | undefined;
  /** What the viewers' links can take (send-budget.ts): the pacer waits while it is spent. */
  readonly #sendBudget = new SendBudget();

  /** `encoderBackends`: the runtime's registry, handed down by its session; a lone track (tests, benches) uses the process's. */
  constructor(
    spec: OutputVideoTrackSpec,
    fps: number,
    log: Logger,
    metrics?: RuntimeMetrics,
    encoderEvents?: VideoEncoderEvents,
    encoderBackends: EncoderBackendRegistry = processEncoderBackends,
    /** Network adaptation's bounds (RuntimeOptions `video`); default ADAPTATION's. */
    bitrateBounds?: BitrateBounds,
  ) {
    this.name = spec.name;
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
    this.#queue = new VideoFrameQueue(spec.name, capacity, metrics);
    this.#intervalMs = 1000 / fps;
    this.#dropPolicy = spec.dropPolicy ?? 'block';
    this.#sinks = new VideoSinks(spec.name, metrics);
    const backends = encoderBackends;
    this.#encoders = new VideoStreamEncoders(
      { name: spec.name, width: spec.width, height: spec.height, fps, bitrateKbps: spec.bitrateKbps, bitrateBounds },
      this.#log,
      metrics,
      encoderEvents,
      backends,
      (reason) => this.#queue.countDropped(reason),
    );
    this.#blackKeyframes = new TrackBlackKeyframes(spec.width, spec.height, fps, backends);
    this.#pacer = new OutputVideoPacer(this.#queue, fps, this.#adaptive, {
      viewed: () => this.#sinks.viewed,
      send: (frame, onTime, plannedAtMs) => this.#encodeAndSend(frame, onTime, plannedAtMs),
      sendFailed: (error) => {
        this.#metrics?.framesDropped.inc({ track: this.name, reason: 'encode_error' });
        this.#log.error('video frame could not be encoded', { error });
      },
      sendBudgetWaitMs: () => this.#sendBudget.waitMs(),
      waitedForSendBudget: (ms) => this.#metrics?.sendBudgetWait.inc({ track: this.name }, ms / 1000),
    });
    this.#publishPlayout();
    this.#pumping = this.#pacer.run();
  }

  get width(): number {
    return this.#spec.width;
  }

  /** The rate the track is configured at (its `bitrateKbps`, or the default for its size), kbit/s. */
  get configuredBitrateKbps(): number {
    return this.#spec.bitrateKbps ?? defaultBitrateKbps(this.#spec.width, this.#spec.height);
  }

  get height(): number {
    return this.#spec.height;
  }

  get framesEmitted(): number {
    return this.#queue.framesEmitted;
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
      if (this.#adaptive && batch.length > 0) {
        await this.#pacer.handOver(this.#adaptive, batch.length, dropPolicy, calledAt, productionMs, timed);
        this.#publishPlayout();
      }
      await this.#queue.pushBatch(batch, dropPolicy, timed ? timeline : undefined);
    } finally {
      this.#pacer.emitReturned();
    }
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

  /** Frames dropped so far by this track's queue and pacer, for tests and stats. */
  get framesDropped(): number {
    return this.#queue.framesDropped;
  }

  /**
   * Discards the queue and shows every subscriber one black frame; the next model frame goes
   * out as a keyframe.
   */
  flush(): void {
    this.#queue.dropAll('flush');
    this.#adaptive?.reset();
    this.#pacer.wakeProducers();
    for (const state of this.#sinks.all()) {
      if (state.paused || !state.ready) continue;
      state.awaitingKeyframe = true;
      this.#sendBlack(state.sink);
    }
    for (const key of this.#sinks.streams()) void this.#encoders.requestKeyframe(key);
  }

  /** Attaches a connection's sink; it receives nothing until `sinkReady`. */
  addSink(sink: VideoSink, options: { paused: boolean }): void {
    this.#sinks.add(sink, options.paused);
  }

  /** The sink's connection is up: open its picture on one black frame, then the model's. */
  sinkReady(sink: VideoSink): void {
    const state = this.#sinks.get(sink);
    if (!state || state.ready) return;
    state.ready = true;
    state.awaitingKeyframe = true;
    if (!state.paused) this.#sendBlack(sink);
    this.#pacer.viewingChanged();
  }

  removeSink(sink: VideoSink): void {
    this.#sinks.delete(sink);
    this.#pacer.viewingChanged();
  }

  setPaused(sink: VideoSink, paused: boolean): void {
    const state = this.#sinks.get(sink);
    if (!state || state.paused === paused) return;
    state.paused = paused;
    if (!paused && state.ready) {
      state.awaitingKeyframe = true;
      void this.#encoders.requestKeyframe(streamKey(sink));
    }
    this.#pacer.viewingChanged();
  }

  /** A receiver lost its picture (RTCP PLI): send it a keyframe. */
  pictureLost(sink: VideoSink): void {
    const state = this.#sinks.get(sink);
    if (!state) return;
    state.awaitingKeyframe = true;
    this.#metrics?.pictureLoss.inc({ track: this.name });
    void this.#encoders.requestKeyframe(streamKey(sink));
  }

  async close(): Promise<void> {
    this.#queue.close();
    this.#pacer.wakeAll();
    await this.#pumping;
    this.#sinks.clear();
    this.#encoders.closeAll();
    this.#queue.closePools();
  }

  /** Lets a test or bench see every frame sent, in host memory (the tap copies what it keeps). */
  setFrameTap(tap: ((frame: VideoFrame, wallTimeMs: number) => void) | undefined): void {
    this.#frameTap = tap;
  }

  /**
   * Records every frame sent: as the live H.264 stream's encoded frames when the track sends one
   * (and the recorder shares), else as raw frames for the recorder's own encoder.
   */
  setRecorder(recorder: VideoRecordingTap | undefined): void {
    this.#recorder = recorder;
  }

  async #encodeAndSend(frame: QueuedFrame, onTime: boolean, plannedAtMs?: number): Promise<void> {
    const active = this.#sinks.playing();
    if (active.length === 0) {
      // Every viewer paused the track (the model keeps emitting at its pace; nothing is encoded),
      // or the last one left while this frame waited for its slot.
      this.#queue.countDropped(this.#sinks.viewed ? 'paused' : 'no_subscribers');
      return;
    }
    // A CUDA frame is read from GPU memory by NVENC; anything else reading it gets one host copy,
    // made on the thread pool (the event loop keeps serving while the GPU copy runs).
    const input = new EncoderInput(frame, this.name, this.#metrics);
    const wallTimeMs = Date.now();
    const streams = new Set(active.map((s) => streamKey(s.sink)));
    this.#sendBudget.keepOnly(streams);
    // The recording takes a live stream's encoded frames when one fits: no second encode.
    const recorder = this.#recorder;
    const recordFrom = recorder?.sharesLiveEncoder ? recordableStream(streams) : undefined;
    try {
      if (this.#frameTap) this.#frameTap(await input.host(), wallTimeMs);
      if (recorder && recordFrom === undefined) recorder.push(await input.host(), wallTimeMs);
    } catch (error) {
      this.#log.warn('the frame tap failed', { error });
    }
    const mediaTimeMs = this.#mediaTime(frame, onTime, plannedAtMs);
    const rtpTimestamp = toRtpTimestamp(mediaTimeMs * 1000);
    const emittedAt = emittedAtOf(frame);
    let sentOnce = false;
    const sent = (): void => {
      this.#metrics?.framesSent.inc({ track: this.name });
      if (!sentOnce && emittedAt !== undefined) {
        sentOnce = true; // one observation per frame, however many viewers and codecs
        this.#metrics?.emitToSend.observe({ track: this.name }, (performance.timeOrigin + performance.now() - emittedAt) / 1000);
      }
    };
    for (const key of streams) {
      // One stream's broken encoder costs its viewers this frame, never another stream's.
      let pipeline: StreamPipeline;
      try {
        pipeline = await this.#encoders.pipeline(key);
      } catch (error) {
        this.#encoders.frameNotEncoded(key, error);
        continue;
      }
      const sinks = active.filter((s) => streamKey(s.sink) === key);
      if (sinks.some((s) => s.awaitingKeyframe)) pipeline.encoder.requestKeyframe();
      this.#encoders.adaptBitrate(key, pipeline, sinks);
      const encoder = pipeline.encoder;
      const gpuEncode = input.gpuEncode(encoder);
      let host: VideoFrame | undefined;
      if (!gpuEncode) {
        try {
          host = await input.host();
        } catch (error) {
          // The GPU copy failed, not the encoder: this frame is lost for every stream, the encoders stay.
          this.#encoders.hostCopyFailed(error);
          return;
        }
      }
      const started = performance.now();
      let encoded: EncodedVideoFrame[];
      try {
        encoded = gpuEncode ? await gpuEncode() : await encoder.encode(host!);
      } catch (error) {
        this.#encoders.retire(key, pipeline);
        this.#sinks.awaitKeyframe(key);
        this.#encoders.encoderFailed(key, encoder.backend, 'encode', error);
        this.#encoders.frameNotEncoded(key, error);
        continue;
      }
      this.#metrics?.encodeDuration.observe({ codec: key }, (performance.now() - started) / 1000);
      let bytes = 0;
      for (const unit of encoded) bytes += unit.data.length;
      this.#sendBudget.spent(key, bytes, lowestEstimateKbps(sinks));
      if (key === recordFrom) {
        try {
          for (const unit of encoded) recorder!.pushEncoded(unit, wallTimeMs, encoder);
        } catch (error) {
          this.#log.warn('the recorder did not take a frame', { error });
        }
      }
      for (const unit of encoded) {
        if (unit.keyframe) this.#metrics?.keyframesEncoded.inc({ track: this.name, codec: key });
        this.#sinks.deliver(sinks, {
          unit,
          payloads: pipeline.packetize(unit.data),
          mediaTimeMs,
          rtpTimestamp,
          metadata: frame.metadata,
          emittedAt,
          requestKeyframe: () => pipeline.encoder.requestKeyframe(),
          sent,
        });
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
    const emittedAt = emittedAtOf(frame);
    let mediaTimeMs = now;
    if (plannedAtMs !== undefined) {
      mediaTimeMs = Math.max(Math.min(now, plannedAtMs), this.#lastMediaTimeMs + 1 / 90);
    } else if (onTime && emittedAt !== undefined) {
      mediaTimeMs = Math.min(now, Math.max(emittedAt - performance.timeOrigin, this.#lastMediaTimeMs + this.#intervalMs / 2));
    }
    this.#lastMediaTimeMs = mediaTimeMs;
    return mediaTimeMs;
  }

  /** Sends the cached black keyframe to a sink (opening, flush), encoded once per codec by its own encoder. */
  #sendBlack(sink: VideoSink): void {
    const state = this.#sinks.get(sink);
    if (!state) return;
    state.blackPending = true;
    this.#blackKeyframes
      .payloads(streamKey(sink))
      .then(
        (payloads) => {
          if (this.#sinks.get(sink) !== state || state.paused || !state.ready) return;
          // Two 90 kHz ticks after what the sink has, so the two never share a timestamp.
          const mediaTimeMs = Math.max(performance.now(), state.newestMediaTimeMs + 2 / 90);
          state.newestMediaTimeMs = mediaTimeMs;
          sink.sendFrame(payloads, toRtpTimestamp(mediaTimeMs * 1000), mediaTimeMs);
        },
        (error: unknown) => this.#log.warn('black frame could not be encoded', { error }),
      )
      .finally(() => {
        // The model's next frame must be a keyframe this sink can decode from.
        state.blackPending = false;
        state.awaitingKeyframe = true;
        void this.#encoders.requestKeyframe(streamKey(sink));
      });
  }
}
