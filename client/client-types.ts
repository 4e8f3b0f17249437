/**
 * The client's public types: its options, status, events and what they carry. A leaf: it imports
 * no client code that imports it back, so the facade (arclight-client.ts), its parts and
 * clip-download.ts can all depend on it without a cycle. `CommandData` and `ModelMessage` live
 * in model-types.ts, beside the untyped model they describe.
 */

import type { Capabilities } from '../protocol/capabilities.ts';
import type { ArclightError, WarningCode } from '../protocol/errors.ts';
import type { JsonValue } from '../protocol/json-schema.ts';
import type { SessionLogLine } from '../protocol/session-logs.ts';
import type { ReconnectPolicy } from './connection-recovery.ts';
import type { InputFrameInfo } from './input-frame-stamper.ts';
import type { MessageOf, ModelMessage, ModelTypes, UntypedModel } from './model-types.ts';
import type { LostReason, RtcImplementation } from './peer-link.ts';
import type { ClientStats, MediaQuality } from './stats.ts';

export type ClientStatus = 'disconnected' | 'connecting' | 'waiting' | 'ready';

/** A recorded clip: an HLS (fMP4) playlist, presigned. */
export interface Clip {
  readonly clipId: string;
  /** The playlist; its segment URLs are presigned too. Valid until `expiresAt`. */
  readonly playlistUrl: string;
  readonly durationSeconds: number;
  /** ms since the epoch. */
  readonly expiresAt: number;
}

export const DEFAULT_API_URL = 'https://api.arclight.dev';
export const DEFAULT_LOCAL_RUNTIME_URL = 'http://localhost:8080';

export interface ArclightClientOptions {
  /** The model's slug. */
  readonly modelName: string;
  /** Coordinator address (hosted mode). */
  readonly apiUrl?: string;
  /** Talk straight to a local runtime (no token) instead of the coordinator; `apiUrl` is ignored. */
  readonly local?: boolean;
  /** The local runtime's address. Default http://localhost:8080. */
  readonly localRuntimeUrl?: string;
  /** WebRTC implementation; defaults to the global one (browsers). `arclight/client/node` supplies @roamhq/wrtc. */
  readonly rtc?: RtcImplementation;
  /** How long a command may wait for its outcome. Default 30 s. */
  readonly commandTimeoutMs?: number;
  /** How long ICE/DTLS may take once the answer arrived. Default 15 s. */
  readonly connectTimeoutMs?: number;
  /**
   * `relay`: media goes only through the TURN servers the runtime hands out (from its
   * `ice_servers`), never straight between client and GPU, e.g. to hide the client's address or
   * to test a TURN deployment. The connection fails when the runtime offers no TURN server the
   * client can reach. Default `all` (direct when possible, relayed when not).
   */
  readonly iceTransportPolicy?: RTCIceTransportPolicy;
  /**
   * How long the SDP offer waits for its first ICE candidate: it goes as soon as the peer has
   * found one (or gathering completes), with every candidate found by then, and those found later
   * are trickled to the runtime. Default 5 s. 0 sends the offer at once and trickles every
   * candidate.
   */
  readonly iceGatheringTimeoutMs?: number;
  /**
   * Getting a broken connection back by itself (ICE failed, or disconnected for more than 2 s):
   * a fresh peer renegotiated on the same connection id, same session, after a jittered
   * exponential backoff. Default `{maxAttempts: 5, baseDelayMs: 250, maxDelayMs: 8000}`; `false`
   * leaves it to the app (status `disconnected`, then `reconnect()`).
   */
  readonly autoReconnect?: ReconnectPolicy | false;
  /**
   * The schema hash the app was built against (`schemaHash` from `arclight types --format ts`,
   * or the hash a generated `.d.ts` names). At connect, a runtime whose capabilities carry a
   * different `schema_hash` makes the client emit a `warning` (`schema_drift`) and write one
   * console warning; it still connects. Runtimes that send no hash are not checked.
   */
  readonly schemaHash?: string;
}

/** Codes of `warning` events (protocol/errors.ts `WARNING_CODES`): something the app should know about that does not stop it. */
export type ClientWarningCode = WarningCode;

/** A `warning` event: the client carries on. */
export interface ClientWarning {
  readonly code: ClientWarningCode;
  readonly message: string;
  /** `schema_drift`: the hash the app was built against (`schemaHash` option). */
  readonly expected?: string;
  /** `schema_drift`: the hash the runtime announced. */
  readonly actual?: string;
}

/** `reconnecting`: an attempt to get a broken connection back is about to start. */
export interface ReconnectingEvent {
  /** 1-based. */
  readonly attempt: number;
  readonly maxAttempts: number;
  /** The wait before this attempt. */
  readonly delayMs: number;
  /** What broke: `ice_failed`, `ice_disconnected`, `peer_closed`, `channel_closed`, or `requested` (restartIce()). */
  readonly reason: LostReason | 'requested';
}

/** `reconnected`: the connection is back (status `ready` again, same session and connection id). */
export interface ReconnectedEvent {
  readonly attempts: number;
  /** From the loss being noticed to ready again. */
  readonly downtimeMs: number;
}

/** Per-frame data sent with an input video frame: a mapping travels as JSON, bytes unchanged. */
export type InputFrameMetadata = Record<string, JsonValue> | Uint8Array;

export interface PublishOptions {
  /**
   * Annotate every frame of this video track: the model reads `frame.metadata` and
   * `frame.captureTime` on the frames it receives. `true` sends the value last set with
   * `setInputFrameMetadata` (if any) plus the capture time; a function is asked for each encoded
   * frame. Needs encoded transforms (browsers); rejects with `unsupported` elsewhere (Node/wrtc).
   */
  readonly frameMetadata?: boolean | InputFrameMetadataSource;
}

/** Asked for each encoded frame of an annotated input track; `undefined` sends no data for it. */
export type InputFrameMetadataSource = (frame: InputFrameInfo) => InputFrameMetadata | undefined;

export interface ConnectOptions {
  /** SDP answer polls before giving up. Default 6. */
  readonly maxAttempts?: number;
  /** When false, output tracks start paused (call resumeTrack). Default true. */
  readonly autoResumeTracks?: boolean;
  /** Attach to this existing session instead of creating one. */
  readonly sessionId?: string;
  /** Join with a connection id already registered for the session. */
  readonly connectionId?: number;
  /**
   * Prepare input video tracks for `publishTrack(..., { frameMetadata })`: a pass-through encoded
   * transform per input video track, which browsers accept only before negotiation. Default true
   * where the platform has encoded transforms; false saves each frame a hop through a worker.
   */
  readonly inputFrameMetadata?: boolean;
}

export interface FrameMetadataEvent {
  readonly track: string;
  /** Match with `requestVideoFrameCallback` metadata `rtpTimestamp` in browsers. */
  readonly rtpTimestamp: number;
  /** A mapping as the model sent it, or its bytes unchanged. */
  readonly metadata: Record<string, JsonValue> | Uint8Array;
}

export interface ClientState {
  readonly status: ClientStatus;
  readonly lastError?: ArclightError;
}

/** `Model`: see `ArclightClient`; it types `message` (a union of declared messages and replies). */
export interface ClientEvents<Model extends ModelTypes = UntypedModel> extends Record<string, unknown[]> {
  statusChanged: [status: ClientStatus];
  message: [message: MessageOf<Model>];
  /** A line of the session's log (the model's `session.log` and the runtime's account), live while connected. */
  log: [line: SessionLogLine];
  runtimeMessage: [message: ModelMessage];
  trackReceived: [name: string, track: MediaStreamTrack, stream: MediaStream | undefined];
  capabilitiesReceived: [capabilities: Capabilities];
  sessionIdChanged: [sessionId: string | undefined];
  connectionIdChanged: [connectionId: number | undefined];
  /** The session ended on the server (stopped, idle, max duration); carries the reason. */
  sessionEnded: [reason: string];
  statsUpdate: [stats: ClientStats];
  /** An output frame's metadata from the model, keyed by the frame's RTP timestamp. */
  frameMetadata: [event: FrameMetadataEvent];
  /** The runtime's periodic quality report (`media_stats`, every 2 s): `score` 0–10 and what it is made of. */
  mediaStats: [quality: MediaQuality];
  /** A broken connection is being renegotiated (see `autoReconnect`). */
  reconnecting: [event: ReconnectingEvent];
  /** ...and is back. */
  reconnected: [event: ReconnectedEvent];
  error: [error: ArclightError];
  /** Not an error: the client carries on (e.g. `schema_drift`: the model changed since the app's types were generated). */
  warning: [warning: ClientWarning];
}

/**
 * How the client's parts emit its events: untyped (`message` carries a `ModelMessage`). The
 * facade binds it to its own emitter; a typed client's `message` is the same object, read as the
 * declared shapes. Internal: not exported by the package.
 */
export type EmitClientEvent = <E extends keyof ClientEvents>(event: E, ...args: ClientEvents[E]) => void;
