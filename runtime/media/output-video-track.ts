/**
 * One model output video track of a session: takes frames from `emit()`, encodes each frame
 * once per codec in use, packetizes once, and fans the packets out to every subscribed
 * connection.
 *
 *   emit ─▶ BoundedQueue ─▶ encoder per codec ─▶ packetizer per codec ─▶ each VideoSink
 *
 * A sink that joins, resumes or reports picture loss gets a keyframe; until its first keyframe
 * it receives nothing (it could not decode deltas). A joining sink is first shown one black
 * keyframe, so its picture opens on black rather than waiting for the model's next frame.
 */

import type { OutputVideoTrackSpec } from '../model/definition.ts';
import type { Logger } from '../log.ts';
import type { RuntimeMetrics } from '../metrics.ts';
import { H264Packetizer } from '../rtp/h264-packetizer.ts';
import { Vp8Packetizer } from '../rtp/vp8-packetizer.ts';
import { BoundedQueue } from './bounded-queue.ts';
import { FramePool } from './frame-pool.ts';
import { solidI420 } from './frame-convert.ts';
import type { VideoFrame } from './frames.ts';
import { VideoEncoder } from './video-encoder.ts';

export type VideoCodecName = 'h264' | 'vp8';

/** Where one connection receives this track. */
export interface VideoSink {
  readonly connectionId: number;
  readonly codec: VideoCodecName;
  /** Writes one frame's RTP payloads (marker on the last) at the given 90 kHz timestamp. */
  sendFrame(payloads: readonly Buffer[], rtpTimestamp: number): void;
}

interface SinkState {
  readonly sink: VideoSink;
  paused: boolean;
  awaitingKeyframe: boolean;
}

interface CodecPipeline {
  readonly encoder: VideoEncoder;
  readonly packetize: (data: Buffer) => Buffer[];
}

/** Frames queued between emit() and the encoder; small, so latency stays one or two frames. */
const QUEUE_CAPACITY = 2;
const MAX_RTP_PAYLOAD = 1200;

export class OutputVideoTrack {
  readonly name: string;
  readonly #spec: OutputVideoTrackSpec;
  readonly #fps: number;
  readonly #queue = new BoundedQueue<VideoFrame>(QUEUE_CAPACITY);
  /** Queue capacity + the frame being encoded + the one being pushed. */
  readonly #pool = new FramePool(QUEUE_CAPACITY + 2);
  readonly #sinks = new Map<VideoSink, SinkState>();
  readonly #pipelines = new Map<VideoCodecName, Promise<CodecPipeline>>();
  readonly #blackKeyframes = new Map<VideoCodecName, Promise<Buffer[]>>();
  readonly #metrics: RuntimeMetrics | undefined;
  readonly #log: Logger;
  readonly #pumping: Promise<void>;
  #framesEmitted = 0;

  constructor(spec: OutputVideoTrackSpec, fps: number, log: Logger, metrics?: RuntimeMetrics) {
    this.name = spec.name;
    this.#spec = spec;
    this.#fps = fps;
    this.#log = log.child({ track: spec.name });
    this.#metrics = metrics;
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

  /** Waits while the queue is full (backpressure); the frame is copied before this resolves. */
  async emit(frame: VideoFrame): Promise<void> {
    if (this.#queue.closed) return;
    if (!(frame.width > 0 && frame.height > 0) || !(frame.data instanceof Uint8Array)) {
      throw new TypeError(`emit("${this.name}"): a video frame needs width, height and data (Uint8Array)`);
    }
    this.#framesEmitted++;
    this.#metrics?.framesEmitted.inc({ track: this.name });
    await this.#queue.push(this.#pool.copy(frame));
  }

  addSink(sink: VideoSink, options: { paused: boolean }): void {
    this.#sinks.set(sink, { sink, paused: options.paused, awaitingKeyframe: true });
    if (!options.paused) this.#openWithBlack(sink);
  }

  removeSink(sink: VideoSink): void {
    this.#sinks.delete(sink);
  }

  setPaused(sink: VideoSink, paused: boolean): void {
    const state = this.#sinks.get(sink);
    if (!state || state.paused === paused) return;
    state.paused = paused;
    if (!paused) {
      state.awaitingKeyframe = true;
      void this.#requestKeyframe(sink.codec);
    }
  }

  /** A receiver lost its picture (RTCP PLI): send it a keyframe. */
  pictureLost(sink: VideoSink): void {
    const state = this.#sinks.get(sink);
    if (!state) return;
    state.awaitingKeyframe = true;
    void this.#requestKeyframe(sink.codec);
  }

  async close(): Promise<void> {
    this.#queue.close();
    await this.#pumping;
    this.#sinks.clear();
    for (const pipeline of this.#pipelines.values()) {
      pipeline.then((p) => p.encoder.close(), () => {});
    }
    this.#pipelines.clear();
  }

  async #pump(): Promise<void> {
    for (;;) {
      const frame = await this.#queue.shift();
      if (frame === undefined) return;
      try {
        await this.#encodeAndSend(frame);
      } catch (error) {
        this.#metrics?.framesDropped.inc({ track: this.name, reason: 'encode_error' });
        this.#log.error('video frame could not be encoded', { error });
      } finally {
        this.#pool.release(frame);
      }
    }
  }

  async #encodeAndSend(frame: VideoFrame): Promise<void> {
    const active = [...this.#sinks.values()].filter((s) => !s.paused);
    if (active.length === 0) {
      this.#metrics?.framesDropped.inc({ track: this.name, reason: 'no_subscribers' });
      return;
    }
    const rtpTimestamp = toRtpTimestamp(frame.timestampUs ?? performance.now() * 1000);
    const codecs = new Set(active.map((s) => s.sink.codec));
    for (const codec of codecs) {
      const pipeline = await this.#pipeline(codec);
      const sinks = active.filter((s) => s.sink.codec === codec);
      if (sinks.some((s) => s.awaitingKeyframe)) pipeline.encoder.requestKeyframe();
      const started = performance.now();
      const encoded = await pipeline.encoder.encode(frame);
      this.#metrics?.encodeDuration.observe({ codec }, (performance.now() - started) / 1000);
      for (const unit of encoded) {
        const payloads = pipeline.packetize(unit.data);
        for (const state of sinks) {
          if (!this.#sinks.has(state.sink) || state.paused) continue;
          if (state.awaitingKeyframe && !unit.keyframe) {
            this.#metrics?.framesDropped.inc({ track: this.name, reason: 'awaiting_keyframe' });
            continue;
          }
          state.awaitingKeyframe = false;
          state.sink.sendFrame(payloads, rtpTimestamp);
          this.#metrics?.framesSent.inc({ track: this.name });
        }
      }
    }
  }

  #pipeline(codec: VideoCodecName): Promise<CodecPipeline> {
    let pipeline = this.#pipelines.get(codec);
    if (!pipeline) {
      pipeline = this.#createPipeline(codec);
      this.#pipelines.set(codec, pipeline);
      pipeline.catch(() => this.#pipelines.delete(codec));
    }
    return pipeline;
  }

  async #createPipeline(codec: VideoCodecName): Promise<CodecPipeline> {
    const encoder = await VideoEncoder.create({
      codec,
      width: this.#spec.width,
      height: this.#spec.height,
      fps: this.#fps,
      ...(this.#spec.bitrateKbps === undefined ? {} : { bitrateKbps: this.#spec.bitrateKbps }),
    });
    const packetizer = codec === 'h264' ? new H264Packetizer(MAX_RTP_PAYLOAD) : new Vp8Packetizer(MAX_RTP_PAYLOAD);
    return { encoder, packetize: (data) => packetizer.packetize(data) };
  }

  async #requestKeyframe(codec: VideoCodecName): Promise<void> {
    try {
      (await this.#pipeline(codec)).encoder.requestKeyframe();
    } catch {
      // The pipeline failed to open; the next frame reports it.
    }
  }

  /** Sends the cached black keyframe to a new sink, encoded once per codec by its own encoder. */
  #openWithBlack(sink: VideoSink): void {
    let black = this.#blackKeyframes.get(sink.codec);
    if (!black) {
      black = encodeBlackKeyframe(sink.codec, this.#spec.width, this.#spec.height, this.#fps);
      this.#blackKeyframes.set(sink.codec, black);
    }
    black.then(
      (payloads) => {
        const state = this.#sinks.get(sink);
        // Only while the sink still waits for the model's first keyframe: never after real frames.
        if (state && state.awaitingKeyframe && !state.paused) {
          sink.sendFrame(payloads, toRtpTimestamp(performance.now() * 1000));
        }
      },
      (error: unknown) => this.#log.warn('black opening frame could not be encoded', { error }),
    );
  }
}

async function encodeBlackKeyframe(codec: VideoCodecName, width: number, height: number, fps: number): Promise<Buffer[]> {
  const encoder = await VideoEncoder.create({ codec, width, height, fps });
  try {
    encoder.requestKeyframe();
    const [unit] = await encoder.encode(solidI420(width, height, 16, 128, 128));
    if (!unit) throw new Error('encoder produced no black frame');
    const packetizer = codec === 'h264' ? new H264Packetizer(MAX_RTP_PAYLOAD) : new Vp8Packetizer(MAX_RTP_PAYLOAD);
    return packetizer.packetize(unit.data);
  } finally {
    encoder.close();
  }
}

/** 90 kHz RTP clock from microseconds, wrapping at 2^32. */
function toRtpTimestamp(timestampUs: number): number {
  return Math.floor((timestampUs * 90) / 1000) % 0x1_0000_0000;
}
