/** What model code sees of a session: emit media, read inputs, message clients. */

import type { JsonValue } from '../../protocol/json-schema.ts';
import type { AudioFrame, CudaVideoFrame, FrameMetadata, VideoFrame } from '../media/frames.ts';

/**
 * What `emit` does when the track's queue is full: `block` waits for room (backpressure: the
 * model runs at the rate clients play at), `drop-oldest` discards the oldest queued frame,
 * `drop-newest` discards the frame being emitted. Drops never wait and are counted in /metrics.
 */
export type DropPolicy = 'block' | 'drop-oldest' | 'drop-newest';

export interface EmitOptions {
  /** Overrides the track's drop policy for this emit. */
  readonly dropPolicy?: DropPolicy;
  /**
   * One metadata value for the whole emit (a batch): it travels with the batch's first frame.
   * Per-frame values go in each frame's `metadata`. A mapping travels as JSON, bytes unchanged;
   * clients receive it as a `frame_metadata` message keyed by the frame's RTP timestamp.
   */
  readonly metadata?: FrameMetadata;
}

export interface ConnectionHandle {
  readonly id: number;
  /** Sends one application message to this client alone. */
  send(type: string, data?: JsonValue): void;
}

export interface InputVideo {
  /** The newest decoded frame, or undefined before the first. Never blocks. */
  latest(): VideoFrame | undefined;
  /** Every decoded frame as it arrives (a slow reader skips to the newest; nothing queues without bound). */
  frames(): AsyncIterable<VideoFrame>;
}

export interface InputAudio {
  /** 20 ms frames as they arrive. */
  frames(): AsyncIterable<AudioFrame>;
}

export interface ModelLogger {
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

/**
 * `Settings` is the model's declared `settings` as values (`SettingsOf<typeof settings>`): inferred
 * by `defineModel` for `generate`, `beforeStep`, `onStepError`, `run` and the hooks, as
 * `step.settings` is; the plain record where nothing declares them.
 */
export interface ModelSession<State = Record<string, unknown>, Settings = Readonly<Record<string, unknown>>> {
  readonly id: string;
  /** Aborts when the session ends; pass it to anything long-running. */
  readonly signal: AbortSignal;
  /** Per-session state from the definition's `createSessionState()`. */
  readonly state: State;
  /**
   * The model's declared `settings` (client-settable state): their current values, from the
   * defaults. A frozen snapshot that a `set_<name>` command replaces whole (it never changes under
   * a reader); step models get the one taken as the step began in `step.settings`. Typed from
   * the declaration, as `step.settings` is.
   */
  readonly settings: Settings;
  readonly fps: number;
  readonly log: ModelLogger;
  /** Live connections, in connect order. */
  readonly connections: readonly ConnectionHandle[];
  /**
   * Hands a frame (or a batch: an array, split and paced one frame per 1/fps) to an output track.
   * Resolves when the pipeline has taken it: with the default `block` policy it waits while the
   * track's queue is full — frames leave at most at the track's fps, and not at all while no
   * client is subscribed — so a model's loop runs at the rate clients play at. Once the session
   * has ended it rejects with an error whose `code` is `session_ended`; the runtime treats that as
   * a normal end of `run`.
   */
  emit(
    track: string,
    frame: VideoFrame | CudaVideoFrame | AudioFrame | readonly (VideoFrame | CudaVideoFrame)[] | readonly AudioFrame[],
    options?: EmitOptions,
  ): Promise<void>;
  /**
   * Discards what is queued on a video output track (all video tracks when no name is given)
   * and shows every subscriber exactly one black frame, e.g. between scenes.
   */
  flush(track?: string): Promise<void>;
  inputVideo(track: string): InputVideo;
  inputAudio(track: string): InputAudio;
  /** Sends one application message to every connected client. */
  broadcast(type: string, data?: JsonValue): void;
  /**
   * A drift-free clock at `fps` (default: the model's): yields the frame index, 0, 1, 2, …,
   * skipping indices rather than bunching when the loop falls behind. Stops at session end.
   */
  ticks(fps?: number): AsyncIterable<number>;
  /**
   * Waits `ms` on the session's clock — the runtime's timers; under `arclight/testing` the test's
   * manual clock, so time a model waits for (or simulates, like a step's compute) is the test's to
   * move. Resolves early, without an error, when the session ends.
   */
  sleep(ms: number): Promise<void>;
}
