/**
 * An output video track's encoders: one pipeline (encoder + packetizer) per stream in use, opened
 * on the stream's first frame with the backend the registry selects, and what happens when one
 * fails.
 *
 * An encoder that fails is freed and the next frame opens a fresh one, whose first frame is a
 * keyframe every viewer of that stream waits for; a backend that keeps failing is demoted for the
 * whole process and the fresh encoder is the next candidate's (the registry's failure policy,
 * encoder-failures.ts). Frames are dropped meanwhile, with an error logged at a bounded rate; the
 * session carries on.
 */
import type { Logger } from '../../server-kit/log.ts';
import type { RuntimeMetrics } from '../metrics.ts';
import type { EncoderBackendRegistry } from './encoder-backends.ts';
import type { EncoderFailureAction, EncoderFailurePhase } from './encoder-failures.ts';
import { adaptStreamBitrate, type AdaptedStream, type BitrateBounds } from './video-bitrate-adaptation.ts';
import type { EncoderBackend, StreamVideoEncoder } from './video-encoder.ts';
import { streamEncoders } from './video-encoder-factory.ts';
import type { SinkState } from './video-sinks.ts';
import { createPacketizer, streamFormat, type VideoStreamKey } from './video-stream-key.ts';

/** Who hears which encoder each stream got and how encoders failed (the session log, the event stream). */
export interface VideoEncoderEvents {
  opened(stream: VideoStreamKey, backend: EncoderBackend): void;
  failed(stream: VideoStreamKey, backend: EncoderBackend, phase: EncoderFailurePhase, action: EncoderFailureAction, reason: string): void;
}

export interface StreamPipeline extends AdaptedStream {
  readonly packetize: (data: Buffer) => Buffer[];
}

/** What the encoders encode: the track's picture. */
export interface EncodedTrackFormat {
  readonly name: string;
  readonly width: number;
  readonly height: number;
  readonly fps: number;
  readonly bitrateKbps: number | undefined;
  /** Network adaptation's bounds (RuntimeOptions `video`); undefined: ADAPTATION's. */
  readonly bitrateBounds?: BitrateBounds | undefined;
}

/** At most one encoder-failure error line per track per this long; the rest are counted into it. */
const ENCODER_ERROR_LOG_INTERVAL_MS = 5_000;

export class VideoStreamEncoders {
  readonly #track: EncodedTrackFormat;
  readonly #log: Logger;
  readonly #metrics: RuntimeMetrics | undefined;
  readonly #events: VideoEncoderEvents | undefined;
  readonly #backends: EncoderBackendRegistry;
  /** Counts a dropped frame (the track's count and /metrics). */
  readonly #countDropped: (reason: string) => void;
  readonly #pipelines = new Map<VideoStreamKey, Promise<StreamPipeline>>();
  /** When the last encoder-failure error was logged (performance.now()), and failures since. */
  #errorLoggedAt = -Infinity;
  #errorsUnlogged = 0;

  constructor(
    track: EncodedTrackFormat,
    log: Logger,
    metrics: RuntimeMetrics | undefined,
    events: VideoEncoderEvents | undefined,
    backends: EncoderBackendRegistry,
    countDropped: (reason: string) => void,
  ) {
    this.#track = track;
    this.#log = log;
    this.#metrics = metrics;
    this.#events = events;
    this.#backends = backends;
    this.#countDropped = countDropped;
  }

  /** The stream's pipeline, opened on first use; a failed open is not kept (the next frame tries again). */
  pipeline(key: VideoStreamKey): Promise<StreamPipeline> {
    let pipeline = this.#pipelines.get(key);
    if (!pipeline) {
      const opening = this.#open(key);
      pipeline = opening;
      this.#pipelines.set(key, opening);
      // Not cached: the next frame tries again (by then perhaps with another backend).
      opening.catch(() => {
        if (this.#pipelines.get(key) === opening) this.#pipelines.delete(key);
      });
    }
    return pipeline;
  }

  async requestKeyframe(key: VideoStreamKey): Promise<void> {
    try {
      (await this.pipeline(key)).encoder.requestKeyframe();
    } catch {
      // The pipeline failed to open; the next frame reports it.
    }
  }

  /** Follows the stream's viewers' bandwidth (video-bitrate-adaptation.ts). */
  adaptBitrate(key: VideoStreamKey, pipeline: StreamPipeline, sinks: readonly SinkState[]): void {
    const target = adaptStreamBitrate(pipeline, sinks, performance.now());
    if (target === undefined) return;
    this.#metrics?.targetBitrate.set({ track: this.#track.name, codec: key }, target * 1000);
    this.#log.debug('video bitrate adapted', { codec: key, kbps: Math.round(target) });
  }

  /**
   * Frees a stream's failed encoder and forgets its pipeline, so the next frame opens a fresh
   * one. Its first frame is a keyframe; the caller marks the stream's viewers as waiting for
   * one: a delta from the new encoder refers to pictures they never had.
   */
  retire(key: VideoStreamKey, pipeline: StreamPipeline): void {
    // Only the pump retires pipelines, one frame at a time, so the map still holds this one.
    this.#pipelines.delete(key);
    pipeline.encoder.close();
  }

  /** Counts an encoder failure and lets the process-wide policy restart or demote its backend. */
  encoderFailed(key: VideoStreamKey, backend: EncoderBackend, phase: EncoderFailurePhase, error: unknown): void {
    const outcome = this.#backends.failures.failed(backend, phase, error, performance.now());
    this.#metrics?.videoEncoderFailures.inc({ track: this.#track.name, codec: key, backend: backend.name, action: outcome.action });
    this.#events?.failed(key, backend, phase, outcome.action, outcome.reason ?? (error instanceof Error ? error.message : String(error)));
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
  frameNotEncoded(key: VideoStreamKey, error: unknown): void {
    this.#countDropped('encode_error');
    const now = performance.now();
    if (now - this.#errorLoggedAt < ENCODER_ERROR_LOG_INTERVAL_MS) {
      this.#errorsUnlogged++;
      return;
    }
    this.#log.error('video frame could not be encoded; the next frame tries a fresh encoder', {
      codec: key,
      error,
      ...(this.#errorsUnlogged > 0 ? { failures_not_logged: this.#errorsUnlogged } : {}),
    });
    this.#errorLoggedAt = now;
    this.#errorsUnlogged = 0;
  }

  /** A CUDA frame's host copy failed (the GPU, not an encoder): dropped, logged like encode errors. */
  hostCopyFailed(error: unknown): void {
    this.#countDropped('cuda_copy_error');
    const now = performance.now();
    if (now - this.#errorLoggedAt < ENCODER_ERROR_LOG_INTERVAL_MS) {
      this.#errorsUnlogged++;
      return;
    }
    this.#log.error('a CUDA frame could not be copied to the host for encoding; dropped', { error });
    this.#errorLoggedAt = now;
    this.#errorsUnlogged = 0;
  }

  /** Frees every encoder (the track closed). */
  closeAll(): void {
    for (const pipeline of this.#pipelines.values()) {
      pipeline.then(
        (p) => p.encoder.close(),
        () => {},
      );
    }
    this.#pipelines.clear();
  }

  async #open(key: VideoStreamKey): Promise<StreamPipeline> {
    const format = streamFormat(key);
    // Chosen here rather than inside the factory, so an open failure is charged to it.
    const backend = await this.#backends.select(format.codec);
    let encoder: StreamVideoEncoder;
    try {
      encoder = await streamEncoders.open(
        {
          ...format,
          backend,
          width: this.#track.width,
          height: this.#track.height,
          fps: this.#track.fps,
          ...(this.#track.bitrateKbps === undefined ? {} : { bitrateKbps: this.#track.bitrateKbps }),
        },
        this.#backends,
      );
    } catch (error) {
      this.encoderFailed(key, backend, 'open', error);
      throw error;
    }
    this.#events?.opened(key, backend);
    this.#metrics?.targetBitrate.set({ track: this.#track.name, codec: key }, encoder.bitrateKbps * 1000);
    const packetizer = createPacketizer(format.codec);
    return {
      encoder,
      packetize: (data) => packetizer.packetize(data),
      configuredKbps: encoder.bitrateKbps,
      adaptedAt: 0,
      ...(this.#track.bitrateBounds ? { bounds: this.#track.bitrateBounds } : {}),
    };
  }
}
