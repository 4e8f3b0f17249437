/**
 * The viewers of an output video track — one `VideoSink` per connection — and what each has been
 * sent, which decides what it may be sent next.
 *
 * A sink that joins, resumes or reports picture loss waits for a keyframe; until it has one it
 * receives nothing (it could not decode deltas). A black keyframe on its way to a sink (opening,
 * flush) is not overtaken, and a frame stamped before the newest one a sink has is never sent to
 * it (see `SinkState.newestMediaTimeMs`).
 */
import type { RuntimeMetrics } from '../metrics.ts';
import type { FrameMetadata } from './frames.ts';
import type { EncodedVideoFrame, H264Profile, VideoCodec } from './video-encoder.ts';
import { streamKey, toRtpTimestamp, type VideoStreamKey } from './video-stream-key.ts';

/** Where one connection receives this track. */
export interface VideoSink {
  readonly connectionId: number;
  readonly codec: VideoCodec;
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

export interface SinkState {
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

/** One encoded unit of a paced frame, and what the frame carries to each sink. */
export interface SinkDelivery {
  readonly unit: EncodedVideoFrame;
  readonly payloads: readonly Buffer[];
  readonly mediaTimeMs: number;
  readonly rtpTimestamp: number;
  readonly metadata: FrameMetadata | undefined;
  /** When the model emitted the frame (Unix ms), if known. */
  readonly emittedAt: number | undefined;
  /** The stream's encoder must make its next frame a keyframe (a sink was overtaken). */
  readonly requestKeyframe: () => void;
  /** Called for each sink the unit went to. */
  readonly sent: () => void;
}

export class VideoSinks {
  readonly #track: string;
  readonly #metrics: RuntimeMetrics | undefined;
  readonly #states = new Map<VideoSink, SinkState>();

  constructor(track: string, metrics: RuntimeMetrics | undefined) {
    this.#track = track;
    this.#metrics = metrics;
  }

  /** Attaches a connection's sink; it receives nothing until it is ready. */
  add(sink: VideoSink, paused: boolean): void {
    this.#states.set(sink, { sink, paused, awaitingKeyframe: true, blackPending: false, ready: false, newestMediaTimeMs: -Infinity });
  }

  get(sink: VideoSink): SinkState | undefined {
    return this.#states.get(sink);
  }

  delete(sink: VideoSink): void {
    this.#states.delete(sink);
  }

  clear(): void {
    this.#states.clear();
  }

  all(): IterableIterator<SinkState> {
    return this.#states.values();
  }

  /** Connected viewers playing the track: frames are encoded and sent to these. */
  playing(): SinkState[] {
    const playing: SinkState[] = [];
    for (const state of this.#states.values()) if (state.ready && !state.paused) playing.push(state);
    return playing;
  }

  /** A connected viewer, playing or paused. */
  get viewed(): boolean {
    for (const state of this.#states.values()) if (state.ready) return true;
    return false;
  }

  /** The streams the attached sinks watch, ready or not. */
  streams(): Set<VideoStreamKey> {
    return new Set([...this.#states.values()].map((s) => streamKey(s.sink)));
  }

  /** Every sink of a stream waits for a keyframe (its encoder was replaced). */
  awaitKeyframe(key: VideoStreamKey): void {
    for (const state of this.#states.values()) {
      if (streamKey(state.sink) === key) state.awaitingKeyframe = true;
    }
  }

  /** Sends one encoded unit to those of `sinks` that can take it. */
  deliver(sinks: readonly SinkState[], delivery: SinkDelivery): void {
    const { unit, payloads, mediaTimeMs, rtpTimestamp, metadata, emittedAt } = delivery;
    for (const state of sinks) {
      if (!this.#states.has(state.sink) || state.paused || !state.ready) continue;
      if (state.blackPending || (state.awaitingKeyframe && !unit.keyframe)) {
        this.#metrics?.framesDropped.inc({ track: this.#track, reason: 'awaiting_keyframe' });
        continue;
      }
      let sinkMediaTimeMs = mediaTimeMs;
      if (mediaTimeMs <= state.newestMediaTimeMs) {
        if (!unit.keyframe) {
          // Overtaken by a black frame: this sink needs a keyframe stamped after it.
          state.awaitingKeyframe = true;
          delivery.requestKeyframe();
          this.#metrics?.framesDropped.inc({ track: this.#track, reason: 'overtaken' });
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
        if (metadata !== undefined) state.sink.sendMetadata?.(wireTimestamp, metadata);
        if (emittedAt !== undefined) state.sink.noteEmitTime?.(wireTimestamp, emittedAt);
      }
      delivery.sent();
    }
  }
}
