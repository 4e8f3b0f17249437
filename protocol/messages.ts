/**
 * Data-channel messages. The channel is labelled `data` and is created by the client.
 *
 * Every message is a JSON envelope `{scope, data: {type, data}}`:
 * - `application` scope: the model's own commands (client → model) and messages (model → client);
 * - `runtime` scope: Arclight's control messages (ping, acknowledgements, failures, track control).
 *
 * Arclight extends 2.9.0's envelope compatibly with `request_id`: a client that sets it on a command
 * gets back exactly one correlated outcome carrying the same id — the model's reply
 * (application scope), a `command_ack` (no reply body), or a `command_failed`. A client that
 * does not set it (2.9.0) still receives replies and failures, uncorrelated.
 */

import type { JsonValue } from './json-schema.ts';

export type MessageScope = 'application' | 'runtime';

export const DATA_CHANNEL_LABEL = 'data';

/**
 * Runtime → client (Arclight extension, scope `runtime`, no data): the runtime is closing this
 * peer while the client is still connected on it — another peer took the connection over, or the
 * connection was retired. The client treats that peer as gone.
 */
export const PEER_CLOSED_MESSAGE = 'peer_closed';
/** Largest accepted message, in UTF-8 bytes of the serialized envelope (2.9.0's default). */
export const MAX_MESSAGE_BYTES = 256 * 1024;

export interface EnvelopeBody<T extends string = string, D = JsonValue | undefined> {
  readonly type: T;
  readonly data?: D;
  /** Correlates a command with its outcome. Unique per connection; ≤ 64 chars. */
  readonly request_id?: string;
  /** File references extracted from command data by 2.9.0 (uploads; later issue). */
  readonly uploads?: Record<string, JsonValue>;
}

export interface Envelope<S extends MessageScope = MessageScope, B extends EnvelopeBody = EnvelopeBody> {
  readonly scope: S;
  readonly data: B;
}

// ---- runtime scope, client → runtime ----

export interface PingMessage extends EnvelopeBody<'ping', Record<string, never> | undefined> {}
/** Subscribe to (resume) or unsubscribe from (pause) an output track on this connection. */
export interface TrackSubscriptionMessage extends EnvelopeBody<
  'track_subscription',
  { readonly track: string; readonly subscribed: boolean }
> {}
/**
 * Claim an input track for this connection before sending media on it. `frame_metadata: true`
 * announces `input_frame_metadata` messages for this (video) track: the runtime then holds each
 * decoded frame briefly until its metadata arrives, so the model sees them together.
 */
export interface PublishTrackMessage extends EnvelopeBody<'publish_track', { readonly track: string; readonly frame_metadata?: boolean }> {}
export interface UnpublishTrackMessage extends EnvelopeBody<'unpublish_track', { readonly track: string }> {}

/**
 * How browsers buffer the session's video: `realtime` renders each frame as soon as it is
 * decoded (RTP playout-delay min = max = 0: lowest latency, no smoothing against jitter);
 * `smooth` lets the receiver buffer up to 200 ms to ride out jitter and loss.
 */
export type LatencyMode = 'realtime' | 'smooth';
/** Switches the whole session's latency mode (every connection). */
export interface SetLatencyModeMessage extends EnvelopeBody<'set_latency_mode', { readonly mode: LatencyMode }> {}

/**
 * Per-frame data for frames of a published input video track, keyed by the RTP timestamp the
 * client's encoder put on each frame (browsers expose it to an `RTCRtpScriptTransform`). Sent
 * without a `request_id`: nothing answers unless it fails.
 */
export interface InputFrameMetadataMessage extends EnvelopeBody<
  'input_frame_metadata',
  import('./frame-metadata.ts').InputFrameMetadataData
> {}

export type ClientRuntimeMessage =
  PingMessage | TrackSubscriptionMessage | PublishTrackMessage | UnpublishTrackMessage | SetLatencyModeMessage | InputFrameMetadataMessage;

// ---- runtime scope, runtime → client ----

export interface PongMessage extends EnvelopeBody<'pong', { readonly server_time: number }> {}
/** Sent once when the connection's data channel opens. */
export interface ConnectionInfoMessage extends EnvelopeBody<
  'connection_info',
  { readonly session_id: string; readonly connection_id: number }
> {}
export interface CommandAckMessage extends EnvelopeBody<'command_ack', { readonly command: string }> {}
export interface CommandFailedData {
  readonly command: string;
  readonly code: string;
  readonly message: string;
  /** JSON pointer of the offending field for `invalid_params`. */
  readonly field?: string;
}
export interface CommandFailedMessage extends EnvelopeBody<'command_failed', CommandFailedData> {}
/** Delivered to every client before the runtime closes its connection at a session end. */
export interface SessionEndedMessage extends EnvelopeBody<'session_ended', { readonly session_id: string; readonly reason: string }> {}
/**
 * Periodic media quality report (Arclight extension), every 2 s to each ready connection that
 * receives at least one output video track. `score` is 0 (unusable) to 10 (perfect); the
 * formula is in `runtime/quality/quality-score.ts` and docs/protocol.md. `loss`, `jitter_ms`,
 * `rtt_ms`, `fps` and `freezes` describe the last interval; the per-track frame counts are
 * totals since the connection became ready.
 */
export interface MediaStatsMessage extends EnvelopeBody<'media_stats', MediaStatsData> {}
export interface MediaStatsData {
  /** 0–10, one decimal: 10 = nothing wrong measured. */
  readonly score: number;
  /** Fraction (0–1) of video RTP packets lost on the way to this client (before retransmission). */
  readonly loss: number;
  /** Interarrival jitter the client reports in RTCP, ms (0 before its first report). */
  readonly jitter_ms: number;
  /** Round-trip time, ms; null until measured. */
  readonly rtt_ms: number | null;
  /** Video frames per second sent to this client (the worst unpaused track); null when none is unpaused. */
  readonly fps: number | null;
  /** The model's declared frame rate; null when it declares none. */
  readonly declared_fps: number | null;
  /** Freezes in the interval: ≥ 500 ms without a frame sent while the model kept emitting. */
  readonly freezes: number;
  /** Length of the interval measured, ms (nominally 2000). */
  readonly interval_ms: number;
  /** Per output video track of this connection. */
  readonly tracks: Readonly<Record<string, TrackMediaStats>>;
}
export interface TrackMediaStats {
  /** Frames sent to this client since its connection became ready. */
  readonly frames_sent: number;
  /**
   * Frames the track dropped (queue full under a drop policy, stale after nobody watched, flush)
   * while this client had it unpaused, since its connection became ready.
   */
  readonly frames_dropped: number;
  /** Frames per second sent over the last interval. */
  readonly fps: number;
  /**
   * How the track paces its frames (optional: absent from runtimes before adaptive playout, and
   * where the track's state is unknown).
   */
  readonly playout?: TrackPlayout;
}
/** An output video track's playout rate: fixed at the declared fps, or adaptive (`fps: 'adaptive'` or a range). */
export interface TrackPlayout {
  readonly mode: 'fixed' | 'adaptive';
  /** The rate the track plays at now, fps (one decimal): the declared fps when fixed. */
  readonly fps: number;
  /** The model's production rate as estimated, fps (one decimal); null when fixed or not yet measured. */
  readonly production_fps: number | null;
}

/** An output frame's metadata, keyed by its RTP timestamp (see frame-metadata.ts). */
export interface FrameMetadataMessage extends EnvelopeBody<'frame_metadata', import('./frame-metadata.ts').FrameMetadataData> {}

export type RuntimeToClientMessage =
  | FrameMetadataMessage
  | PongMessage
  | ConnectionInfoMessage
  | CommandAckMessage
  | CommandFailedMessage
  | SessionEndedMessage
  | MediaStatsMessage;

export function envelope<S extends MessageScope, B extends EnvelopeBody>(scope: S, data: B): Envelope<S, B> {
  return { scope, data };
}
