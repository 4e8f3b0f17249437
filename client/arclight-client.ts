/**
 * `ArclightClient` — connects an app to a model: session, WebRTC media and commands.
 *
 * @example
 * ```ts
 * const client = new ArclightClient({ modelName: 'pattern', local: true });
 * client.on('trackReceived', (name, track) => { video.srcObject = new MediaStream([track]); });
 * client.on('message', (message) => console.log(message.type, message.data));
 * await client.connect();
 * const reply = await client.sendCommand('set_color', { color: '#00ff00' }); // { type: 'color_changed', data: {...} }
 * await client.disconnect();
 * ```
 */

import type { Capabilities, TrackCapability } from '../protocol/capabilities.ts';
import { ArclightError, type WarningCode } from '../protocol/errors.ts';
import type { JsonObject, JsonValue } from '../protocol/json-schema.ts';
import { MAX_MESSAGE_BYTES, type Envelope, type LatencyMode } from '../protocol/messages.ts';
import { decodeFrameMetadata, encodeFrameMetadata, type FrameMetadataData, type InputFrameMetadataData } from '../protocol/frame-metadata.ts';
import { InputFrameStamper, inputFrameMetadataSupported, type InputFrameInfo } from './input-frame-stamper.ts';
import { LatencyTracker, type LatencySummary } from './latency-tracker.ts';
import type { SessionResponse } from '../protocol/session.ts';
import { PeerLink, type LostReason, type RtcImplementation } from './peer-link.ts';
import { CandidateTrickler } from './candidate-trickler.ts';
import { DEFAULT_RECONNECT_POLICY, reconnectDelayMs, worthRetrying, type ReconnectPolicy } from './connection-recovery.ts';
import { PendingCommands, type CommandReply } from './pending-commands.ts';
import { SessionApi } from './session-api.ts';
import { FileRef } from './file-ref.ts';
import { DEFAULT_CLIP_FILENAME, downloadClipAsFile, type DownloadClipOptions } from './clip-download.ts';
import { errorFromResponse } from './http-errors.ts';
import { FILE_UPLOADED_MESSAGE, type UploadReference } from '../protocol/uploads.ts';
import { StatsSampler, type ClientStats, type MediaQuality } from './stats.ts';
import type { TokenSource } from './token.ts';
import { TypedEmitter } from './typed-emitter.ts';
import { fetchSessionLogs, SessionLogFollower, type SessionLogQuery } from './session-logs.ts';
import type { CommandName, CommandParamsArgument, CommandResultOf, MessageOf, ModelTypes, UntypedModel } from './model-types.ts';
import type { SessionLogLine, SessionLogPage } from '../protocol/session-logs.ts';

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

/** Command data: JSON values, and `FileRef`s (from `uploadFile()`) for file parameters. */
export type CommandData = { readonly [key: string]: JsonValue | FileRef };

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

/** A message from the model (application scope). */
export interface ModelMessage {
  readonly type: string;
  readonly data?: JsonValue;
  /** Set when the message is the reply to a command this client sent. */
  readonly request_id?: string;
}

export interface FrameMetadataEvent {
  readonly track: string;
  /** Match with `requestVideoFrameCallback` metadata `rtpTimestamp` in browsers. */
  readonly rtpTimestamp: number;
  /** A mapping as the model sent it, or its bytes unchanged. */
  readonly metadata: Record<string, JsonValue> | Uint8Array;
}

/** How many frames' metadata getFrameMetadata() remembers per track. */
const FRAME_METADATA_MEMORY = 300;

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

const STATS_INTERVAL_MS = 1_000;
const PING_INTERVAL_MS = 5_000;

/**
 * `Model` (optional) types the client against one model: generated by `arclight types`, or
 * `ModelTypesOf<typeof model>` from `arclight/runtime`. Then `sendCommand` accepts only declared
 * command names with their parameter types and resolves to the declared reply, and `message`
 * carries a union discriminated by `type`. The default keeps the client untyped.
 */
export class ArclightClient<Model extends ModelTypes = UntypedModel> extends TypedEmitter<ClientEvents<Model>> {
  readonly #options: ArclightClientOptions;
  readonly #baseUrl: string;
  #status: ClientStatus = 'disconnected';
  #lastError: ArclightError | undefined;
  #token: TokenSource | undefined;
  #api: SessionApi | undefined;
  #abort: AbortController | undefined;
  #session: SessionResponse | undefined;
  #sessionId: string | undefined;
  #connectionId: number | undefined;
  /** True when this client attached to a session it did not create: disconnect(false) leaves it running. */
  #adopted = false;
  /** Resolves the transport being opened once the runtime confirms its side is ready (connection_info). */
  #runtimeConfirmed: (() => void) | undefined;
  #link: PeerLink | undefined;
  #pending = new PendingCommands();
  #stats: ClientStats | undefined;
  /** The latest `media_stats` of the current connection. */
  #quality: MediaQuality | undefined;
  #statsTimer: ReturnType<typeof setInterval> | undefined;
  #pingTimer: ReturnType<typeof setInterval> | undefined;
  #sampler = new StatsSampler();
  readonly #paused = new Set<string>();
  readonly #published = new Map<string, MediaStreamTrack>();
  /** How each published track was published, to publish it again after a recovery. */
  readonly #publishOptions = new Map<string, PublishOptions>();
  /** The recovery in progress (see #recover); replaced or cleared to stop it. */
  #recovery: object | undefined;
  /** Sends the current link's late candidates. */
  #trickler: CandidateTrickler | undefined;
  readonly #stampers = new Map<string, InputFrameStamper>();
  /** Values set with setInputFrameMetadata, by track. */
  readonly #inputMetadata = new Map<string, InputFrameMetadata>();
  #autoResume = true;
  #inputFrameTransforms = true;
  #disconnecting = false;
  readonly #frameMetadata = new Map<string, Map<number, Record<string, JsonValue> | Uint8Array>>();
  readonly #latency = new Map<string, LatencyTracker>();
  #latencyReportTimer: ReturnType<typeof setInterval> | undefined;
  /** The session getSessionLogs() reads after a disconnect, and the live `log` stream. */
  #logSessionId: string | undefined;
  #logFollower: SessionLogFollower | undefined;

  constructor(options: ArclightClientOptions) {
    super();
    if (!options || typeof options.modelName !== 'string' || options.modelName === '') {
      throw new TypeError('ArclightClient: options.modelName (the model slug) is required');
    }
    this.#options = options;
    this.#baseUrl = (options.local ? options.localRuntimeUrl ?? DEFAULT_LOCAL_RUNTIME_URL : options.apiUrl ?? DEFAULT_API_URL).replace(/\/+$/, '');
  }

  // ---- lifecycle ----

  /**
   * Opens (or attaches to) a session, waits for a GPU, and connects WebRTC. Resolves when the
   * status is `ready`; rejects with an ArclightError (status back to `disconnected`).
   */
  async connect(jwtToken?: TokenSource, options: ConnectOptions = {}): Promise<void> {
    if (this.#status !== 'disconnected') throw new ArclightError('invalid_request', `connect() needs status disconnected; it is ${this.#status}.`);
    if (jwtToken === undefined && !this.#options.local) {
      throw new ArclightError('invalid_request', 'A jwtToken is required unless the client is in local mode.');
    }
    this.#token = jwtToken;
    this.#autoResume = options.autoResumeTracks ?? true;
    this.#inputFrameTransforms = options.inputFrameMetadata ?? true;
    this.#paused.clear();
    this.#setStatus('connecting');
    this.#abort = new AbortController();
    this.#api = new SessionApi({
      baseUrl: this.#baseUrl,
      local: this.#options.local ?? false,
      modelName: this.#options.modelName,
      token: jwtToken,
      signal: this.#abort.signal,
    });
    try {
      let session: SessionResponse;
      if (options.sessionId !== undefined) {
        session = await this.#api.attachSession(options.sessionId);
        this.#adopted = true;
        this.#setStatus('waiting');
      } else {
        this.#adopted = false;
        session = await this.#api.createSession(() => this.#setStatus('waiting'));
      }
      this.#session = session;
      this.#setSessionId(session.session_id);
      this.emit('capabilitiesReceived', session.capabilities);
      this.#checkSchemaHash(session.capabilities);
      await this.#openTransport(options.connectionId, false, options.maxAttempts ?? 6);
    } catch (error) {
      const failure = asError(error, 'connection_failed');
      this.#closeTransport();
      // A session this call created would otherwise hold a GPU until it idles out.
      if (!this.#adopted && this.#sessionId !== undefined) await this.#leaveSession('end-session');
      this.#setSessionId(undefined);
      this.#setConnectionId(undefined);
      this.#session = undefined;
      this.#fail(failure);
      this.#setStatus('disconnected');
      throw failure;
    }
  }

  /**
   * Disconnects. `recoverable: true` keeps the session (and its GPU) for `reconnect()`;
   * false ends it — or, for a session this client adopted, leaves it running for its owner.
   * Safe to call repeatedly.
   */
  async disconnect(recoverable = false): Promise<void> {
    this.#disconnecting = true;
    this.#recovery = undefined;
    try {
      if (!recoverable && this.#sessionId !== undefined) {
        // Leave the session before closing the peer, so the runtime sees a session end (or a
        // departing guest) rather than a dropped connection.
        await this.#leaveSession(this.#adopted ? 'close-connection' : 'end-session');
      }
      this.#closeTransport();
      if (!recoverable) {
        this.#setSessionId(undefined);
        this.#session = undefined;
        this.#setConnectionId(undefined);
      }
      this.#setStatus('disconnected');
    } finally {
      this.#disconnecting = false;
    }
  }

  /**
   * Renegotiates the connection now with a fresh peer and new ICE credentials (an ICE restart),
   * as the client does by itself when ICE fails: for an app that knows the network changed
   * (`online`, a new interface) before ICE notices. Same session, same connection id; status
   * `connecting` until `ready` again. Rejects (status `disconnected`) when every attempt failed.
   */
  async restartIce(): Promise<void> {
    this.#assertReady('restartIce');
    await this.#recover('requested');
  }

  /** Reconnects to the session kept by a recoverable disconnect. */
  async reconnect(options: ConnectOptions = {}): Promise<void> {
    if (this.#status !== 'disconnected') throw new ArclightError('invalid_request', `reconnect() needs status disconnected; it is ${this.#status}.`);
    if (this.#sessionId === undefined || !this.#api) {
      throw new ArclightError('invalid_request', 'reconnect() needs a session kept by disconnect(true).');
    }
    if (options.autoResumeTracks !== undefined) this.#autoResume = options.autoResumeTracks;
    this.#abort = new AbortController();
    this.#api = new SessionApi({ baseUrl: this.#baseUrl, local: this.#options.local ?? false, modelName: this.#options.modelName, token: this.#token, signal: this.#abort.signal });
    this.#setStatus('connecting');
    try {
      const session = await this.#api.attachSession(this.#sessionId);
      this.#session = session;
      this.#setStatus('waiting');
      const connectionId = options.connectionId ?? this.#connectionId;
      await this.#openTransport(connectionId, connectionId !== undefined, options.maxAttempts ?? 6);
    } catch (error) {
      const failure = asError(error, 'connection_failed');
      this.#closeTransport();
      if (failure.code === 'session_ended' || failure.code === 'session_not_found') this.#setSessionId(undefined);
      this.#fail(failure);
      this.#setStatus('disconnected');
      throw failure;
    }
  }

  // ---- commands and messages ----

  /**
   * Sends a command to the model. Resolves with the model's reply (`{type, data}`), or
   * undefined when the model acknowledges without a body; rejects with an ArclightError
   * carrying the failure code (`invalid_params`, `unknown_command`, `internal_error`, a
   * model-defined code, `timeout`, ...). On a typed client (`ArclightClient<Model>`), `command`
   * must be a declared name, `data` its params type (optional when nothing is required), and
   * the result is its declared reply.
   */
  async sendCommand<Name extends CommandName<Model>>(command: Name, ...args: CommandParamsArgument<Model, Name>): Promise<CommandResultOf<Model, Name>> {
    this.#assertReady('sendCommand');
    const data: unknown = args.length === 0 || args[0] === undefined ? {} : args[0];
    const known = this.#session?.capabilities.commands;
    if (known && !known.some((c) => c.name === command)) {
      throw new ArclightError('unknown_command', `The model has no command "${command}". Known: ${known.map((c) => c.name).join(', ')}.`);
    }
    if (data === null || typeof data !== 'object' || Array.isArray(data)) {
      throw new ArclightError('invalid_params', 'Command data must be a JSON object.');
    }
    // File parameters travel apart from the scalar data, in `uploads` (as 2.9.0 sends them).
    const scalars: JsonObject = {};
    const uploads: Record<string, UploadReference> = {};
    for (const [key, value] of Object.entries(data as CommandData)) {
      if (value instanceof FileRef) uploads[key] = value.toReference();
      else scalars[key] = value as JsonValue;
    }
    // The runtime validated the reply against the schema the types were generated from (and a
    // changed model is reported as schema_drift at connect), so the declared type is trusted here.
    return this.#request('application', command, scalars, Object.keys(uploads).length > 0 ? uploads : undefined) as Promise<CommandResultOf<Model, Name>>;
  }

  // ---- clips ----

  /**
   * A clip of the session's last `durationSeconds` (status `ready` only): resolves with its HLS
   * playlist URL (valid 24 hours; the recording itself stays five minutes after the session
   * ends). The runtime caps the length (300 s by default) and starts the clip at a segment
   * boundary, so it may run up to one segment (~4 s) longer. Fails with `recording_error` on
   * invalid input, when nothing is recorded, on timeout or disconnection.
   */
  async requestClip(durationSeconds: number): Promise<Clip> {
    this.#assertReady('requestClip');
    if (typeof durationSeconds !== 'number' || !Number.isFinite(durationSeconds) || durationSeconds <= 0) {
      throw new ArclightError('recording_error', 'requestClip needs a positive number of seconds.');
    }
    return this.#clip('request_clip', { duration_seconds: durationSeconds });
  }

  /**
   * Fetches a clip's segments and joins them into one MP4 Blob; in a browser a non-null
   * `filename` (default `arclight-clip.mp4`) also saves it. `jwt` defaults to this client's token.
   */
  downloadClipAsFile(clip: Clip, filename: string | null = DEFAULT_CLIP_FILENAME, options: DownloadClipOptions = {}): Promise<Blob> {
    return downloadClipAsFile(clip, filename, { ...(this.#token !== undefined ? { jwt: this.#token } : {}), ...options });
  }

  /** The whole recording so far, from its start until now (see requestClip). */
  async requestRecording(): Promise<Clip> {
    this.#assertReady('requestRecording');
    return this.#clip('request_recording', {});
  }

  /**
   * The model's capabilities as the runtime serves them now — its commands with their JSON
   * Schemas, its tracks and `schema_hash` — asked on the data channel (`request_schema`) and
   * answered to this client alone (status `ready` only). After a model reload that kept the
   * session they are the new version's, where `getCapabilities()` keeps what the session started
   * with. Fails with `timeout` or `not_ready` as a command would.
   */
  async requestSchema(): Promise<Capabilities> {
    this.#assertReady('requestSchema');
    const reply = await this.#request('runtime', 'request_schema', {});
    const capabilities = (reply?.data as { capabilities?: unknown } | undefined)?.capabilities;
    if (typeof capabilities !== 'object' || capabilities === null) throw new ArclightError('internal_error', 'The runtime answered request_schema without capabilities.');
    return capabilities as Capabilities;
  }

  async #clip(type: 'request_clip' | 'request_recording', data: JsonObject): Promise<Clip> {
    let reply: CommandReply | undefined;
    try {
      reply = await this.#request('runtime', type, data);
    } catch (error) {
      const e = asError(error, 'recording_error');
      throw e.code === 'recording_error' ? e : new ArclightError('recording_error', `The clip could not be made: ${e.message}`, { cause: e });
    }
    const body = (reply?.data ?? {}) as { clip_id?: string; playlist_url?: string; duration_seconds?: number; expires_at?: number };
    if (typeof body.playlist_url !== 'string' || typeof body.clip_id !== 'string') throw new ArclightError('recording_error', 'The runtime answered without a clip.');
    return { clipId: body.clip_id, playlistUrl: body.playlist_url, durationSeconds: body.duration_seconds ?? 0, expiresAt: body.expires_at ?? 0 };
  }

  // ---- uploads ----

  /**
   * Uploads a file to the session (status `ready` only) and returns a reference to pass as a
   * command parameter. The bytes go straight to a presigned URL (no token needed for the PUT);
   * the model's `file_uploaded` hook has run when this resolves. `name` defaults to the File's
   * name, or `upload` for a Blob. A PUT URL found expired (403 `url_expired`) is reserved afresh
   * and sent once more. The reference is good in commands for the whole session (the model
   * receives the file by its id); its `downloadUrl` is for the app and lives 5 minutes.
   */
  async uploadFile(file: Blob, options: { readonly name?: string } = {}): Promise<FileRef> {
    this.#assertReady('uploadFile');
    const sessionId = this.#sessionId!;
    const name = options.name ?? (typeof (file as { name?: unknown }).name === 'string' && (file as File).name !== '' ? (file as File).name : 'upload');
    const mimeType = file.type || 'application/octet-stream';
    if (file.size === 0) throw new ArclightError('invalid_request', 'The file is empty.');
    const api = this.#standaloneApi();
    let slot = await api.createUpload(sessionId, { name, size: file.size, mime_type: mimeType });
    let put = await putUpload(slot.presigned_url, file, mimeType);
    // A PUT URL past its 15 minutes (a tab suspended between reserving and sending, a clock far
    // off) is answered 403 url_expired: reserve a fresh slot and send once more. Only once —
    // a second expiry in a row means the clocks disagree, which another try will not fix.
    if (put.status === 403) {
      const error = await errorFromResponse(put);
      if (error.code !== 'url_expired') throw error;
      slot = await api.createUpload(sessionId, { name, size: file.size, mime_type: mimeType });
      put = await putUpload(slot.presigned_url, file, mimeType);
    }
    if (!put.ok) throw await errorFromResponse(put);
    await this.#request('runtime', FILE_UPLOADED_MESSAGE, { upload_id: slot.presigned_id, name, mime_type: mimeType, size: file.size });
    return new FileRef(slot.presigned_id, name, mimeType, file.size, slot.download_url, slot.download_expires_at);
  }

  // ---- tracks ----

  /**
   * Starts sending a local track (webcam, microphone, canvas) to a model input (`sendonly`) track.
   * With `frameMetadata`, each video frame carries its capture time and optional data to the model.
   */
  async publishTrack(name: string, track: MediaStreamTrack, options: PublishOptions = {}): Promise<void> {
    this.#assertReady('publishTrack');
    const capability = this.#track(name, 'sendonly');
    if (capability.kind !== track.kind) throw new ArclightError('invalid_request', `Track "${name}" is ${capability.kind}; got a ${track.kind} track.`);
    const annotate = options.frameMetadata !== undefined && options.frameMetadata !== false;
    if (annotate && capability.kind !== 'video') throw new ArclightError('invalid_request', `Frame metadata is carried on video tracks; "${name}" is audio.`);
    if (annotate && !inputFrameMetadataSupported()) {
      throw new ArclightError('unsupported', 'Input frame metadata needs RTCRtpScriptTransform (a current browser); this platform has none.');
    }
    const stamper = this.#stampers.get(name);
    if (annotate && !stamper) {
      throw new ArclightError('invalid_request', 'Frame metadata needs connect() without inputFrameMetadata: false (transforms are set up at connect).');
    }
    await this.#request('runtime', 'publish_track', annotate ? { track: name, frame_metadata: true } : { track: name });
    if (annotate) {
      const offset = await this.#clockOffset();
      const source = typeof options.frameMetadata === 'function' ? options.frameMetadata : undefined;
      let sourceFailed = false;
      stamper!.start((frame) => {
        let metadata: InputFrameMetadata | undefined;
        try {
          metadata = source ? source(frame) : this.#inputMetadata.get(name);
        } catch (error) {
          // Said once per publish, not 30 times a second; the frames go on with their capture time.
          if (!sourceFailed) this.#fail(new ArclightError('invalid_params', `frameMetadata for "${name}" threw: ${asError(error, 'invalid_params').message}`));
          sourceFailed = true;
        }
        this.#sendInputFrameAnnotation(name, frame, offset, metadata);
      });
    } else {
      stamper?.pause();
    }
    await this.#link!.transceiver(name)!.sender.replaceTrack(track);
    this.#published.set(name, track);
    this.#publishOptions.set(name, options);
  }

  /**
   * Sets the data sent with every following frame of an input video track published with
   * `frameMetadata: true`, until changed; `undefined` stops sending data (capture times go on).
   */
  setInputFrameMetadata(name: string, metadata: InputFrameMetadata | undefined): void {
    this.#track(name, 'sendonly');
    if (metadata === undefined) this.#inputMetadata.delete(name);
    else this.#inputMetadata.set(name, metadata);
  }

  /** Stops sending to an input track and frees it for another connection. */
  async unpublishTrack(name: string): Promise<void> {
    this.#track(name, 'sendonly');
    if (!this.#published.has(name)) return;
    this.#published.delete(name);
    this.#publishOptions.delete(name);
    this.#stampers.get(name)?.pause();
    await this.#link?.transceiver(name)?.sender.replaceTrack(null);
    if (this.#status === 'ready') await this.#request('runtime', 'unpublish_track', { track: name });
  }

  /** Stops receiving an output (`recvonly`) track on this connection; the model keeps emitting. */
  pauseTrack(name: string): void {
    this.#track(name, 'recvonly');
    this.#paused.add(name);
    if (this.#status === 'ready') this.#request('runtime', 'track_subscription', { track: name, subscribed: false }).catch((e: unknown) => this.#fail(asError(e, 'internal_error')));
  }

  /** Receives an output track again (subscriptions are per connection). */
  resumeTrack(name: string): void {
    this.#track(name, 'recvonly');
    this.#paused.delete(name);
    if (this.#status === 'ready') this.#request('runtime', 'track_subscription', { track: name, subscribed: true }).catch((e: unknown) => this.#fail(asError(e, 'internal_error')));
  }

  /**
   * Switches the session's video latency mode for every connection: `realtime` (each frame shown
   * as soon as decoded) or `smooth` (bounded buffering against jitter).
   */
  async setLatencyMode(mode: LatencyMode): Promise<void> {
    this.#assertReady('setLatencyMode');
    if (mode !== 'realtime' && mode !== 'smooth') throw new ArclightError('invalid_params', 'mode must be "realtime" or "smooth".', { field: '/mode' });
    await this.#request('runtime', 'set_latency_mode', { mode });
  }

  /**
   * Measures glass-to-glass latency (the model's emit() → the frame presented in `video`) on an
   * output video track, in a browser. The rolling p50/p95 (ms) appear in `getStats().latency`
   * and are reported to the runtime (`/metrics`). Returns a function that stops measuring.
   */
  async trackLatency(track: string, video: HTMLVideoElement): Promise<() => void> {
    this.#assertReady('trackLatency');
    const capability = this.#track(track, 'recvonly');
    if (capability.kind !== 'video') throw new ArclightError('unknown_track', `"${track}" is not a video track.`);
    this.#latency.get(track)?.stop();
    const tracker = new LatencyTracker(track, video);
    this.#latency.set(track, tracker);
    await this.#request('runtime', 'subscribe_frame_times', { track, subscribed: true });
    await this.#pingClock((sentAt, receivedAt, serverTime) => tracker.addClockSample(sentAt, receivedAt, serverTime));
    this.#latencyReportTimer ??= setInterval(() => this.#reportLatency(), 5_000);
    return () => {
      tracker.stop();
      if (this.#latency.get(track) === tracker) this.#latency.delete(track);
      if (this.#status === 'ready') this.#request('runtime', 'subscribe_frame_times', { track, subscribed: false }).catch(() => {});
    };
  }

  /** A few pings, each reported as (sent, received, runtime's time); the fastest says the most. */
  async #pingClock(onSample: (sentAt: number, receivedAt: number, serverTime: number) => void): Promise<void> {
    for (let i = 0; i < 5; i++) {
      const sentAt = performance.timeOrigin + performance.now();
      const pong = await this.#request('runtime', 'ping', {});
      const receivedAt = performance.timeOrigin + performance.now();
      const serverTime = (pong?.data as { server_time?: number } | undefined)?.server_time;
      if (typeof serverTime === 'number') onSample(sentAt, receivedAt, serverTime);
    }
  }

  /** Runtime clock minus this page's clock, ms, from the ping with the smallest round trip. */
  async #clockOffset(): Promise<number> {
    let best = { rtt: Infinity, offset: 0 };
    await this.#pingClock((sentAt, receivedAt, serverTime) => {
      if (receivedAt - sentAt < best.rtt) best = { rtt: receivedAt - sentAt, offset: serverTime - (sentAt + receivedAt) / 2 };
    });
    return best.offset;
  }

  #sendInputFrameAnnotation(track: string, frame: InputFrameInfo, clockOffset: number, metadata: InputFrameMetadata | undefined): void {
    if (this.#status !== 'ready' || !this.#link) return;
    const data: InputFrameMetadataData = {
      track,
      frames: [
        {
          rtp_timestamp: frame.rtpTimestamp,
          capture_time: Math.max(0, Math.round((frame.captureTime + clockOffset) * 1000) / 1000),
          ...(metadata !== undefined ? { metadata: encodeFrameMetadata(metadata) } : {}),
        },
      ],
    };
    try {
      this.#link.send(JSON.stringify({ scope: 'runtime', data: { type: 'input_frame_metadata', data } }));
    } catch {
      // the channel is closing; the connection-lost path takes over
    }
  }

  #reportLatency(): void {
    if (this.#status !== 'ready') return;
    for (const tracker of this.#latency.values()) {
      const summary = tracker.summary();
      if (!summary) continue;
      this.#request('runtime', 'latency_report', { track: summary.track, p50_ms: summary.p50, p95_ms: summary.p95, samples: summary.samples }).catch(() => {});
    }
  }

  /** The metadata the model attached to the frame of `track` with this RTP timestamp, if recent. */
  getFrameMetadata(track: string, rtpTimestamp: number): Record<string, JsonValue> | Uint8Array | undefined {
    return this.#frameMetadata.get(track)?.get(rtpTimestamp);
  }

  // ---- getters ----

  getStatus(): ClientStatus {
    return this.#status;
  }

  getState(): ClientState {
    return this.#lastError ? { status: this.#status, lastError: this.#lastError } : { status: this.#status };
  }

  getSessionId(): string | undefined {
    return this.#sessionId;
  }

  getConnectionId(): number | undefined {
    return this.#connectionId;
  }

  getLastError(): ArclightError | undefined {
    return this.#lastError;
  }

  getCapabilities(): Capabilities | undefined {
    return this.#session?.capabilities;
  }

  getSessionInfo(): SessionResponse | undefined {
    return this.#session;
  }

  /**
   * The latest statistics (sampled every second while ready), with the runtime's latest quality
   * report as `quality`; undefined before the first sample or report.
   */
  getStats(): ClientStats | undefined {
    return this.#withQuality(this.#stats);
  }

  /** Rolling glass-to-glass latency per tracked output track (see trackLatency), ms. */
  getLatency(): LatencySummary[] {
    return [...this.#latency.values()].map((t) => t.summary()).filter((s): s is LatencySummary => s !== undefined);
  }

  /** The underlying peer connection (for advanced stats), while connected. */
  getPeerConnection(): RTCPeerConnection | undefined {
    return this.#link?.pc;
  }

  // ---- internals ----

  async #openTransport(connectionId: number | undefined, renegotiate: boolean, maxAttempts: number): Promise<void> {
    const api = this.#api!;
    const sessionId = this.#sessionId!;
    const session = this.#session!;
    // Two independent calls: one round trip, not two.
    const [iceServers, id] = await Promise.all([
      api.iceServers(sessionId),
      connectionId ?? api.registerConnection(sessionId).then((registered) => registered.connection_id),
    ]);
    this.#setConnectionId(id);
    const rtc = this.#options.rtc ?? globalRtc();
    const link = new PeerLink(rtc, iceServers, session.capabilities.tracks, {
      message: (raw) => this.#onMessage(raw),
      track: (name, track, stream) => this.emit('trackReceived', name, track, stream),
      lost: (reason) => setTimeout(() => this.#onLost(link, reason), 0),
    }, {
      iceTransportPolicy: this.#options.iceTransportPolicy ?? 'all',
      ...(this.#options.iceGatheringTimeoutMs !== undefined ? { gatherTimeoutMs: this.#options.iceGatheringTimeoutMs } : {}),
    });
    this.#link = link;
    // Ready means ready on both sides. The client's channel opens (and its peer connects) before
    // the runtime has attached its end of the channel, and until it has, nothing the runtime sends
    // this connection arrives — a session ended in that moment told nobody why. The runtime's
    // connection_info, sent once its side is ready, closes that gap.
    const confirmed = new Promise<void>((resolve) => {
      this.#runtimeConfirmed = resolve;
    });
    // Encoded transforms only apply if set before the first negotiation: install them now, idle.
    if (this.#inputFrameTransforms && inputFrameMetadataSupported()) {
      for (const track of session.capabilities.tracks) {
        if (track.kind !== 'video' || track.direction !== 'sendonly') continue;
        this.#stampers.set(track.name, new InputFrameStamper(link.transceiver(track.name)!.sender));
      }
    }
    const { sdp, mapping } = await link.createOffer();
    const pausedTracks = this.#autoResume
      ? [...this.#paused]
      : session.capabilities.tracks.filter((t) => t.direction === 'recvonly').map((t) => t.name);
    for (const name of pausedTracks) this.#paused.add(name);
    const inlineAnswer = await api.sendOffer(sessionId, id, { sdp_offer: sdp, track_mapping: mapping, paused_tracks: pausedTracks }, renegotiate);
    // The runtime has the offer's peer now: candidates found since go to it.
    const offeredOn = id;
    const trickler = new CandidateTrickler(
      (request) => api.sendIceCandidates(sessionId, offeredOn, request),
      (error) => this.#fail(error),
    );
    this.#trickler = trickler;
    link.trickleTo((candidate) => trickler.push(candidate));
    // Usually the offer's own reply carries the answer; otherwise it is polled for.
    const answer = inlineAnswer ?? (await api.pollAnswer(sessionId, id, maxAttempts));
    await link.acceptAnswer(answer);
    const connectTimeoutMs = this.#options.connectTimeoutMs ?? 15_000;
    const connectStarted = performance.now();
    await link.waitReady(connectTimeoutMs);
    await withDeadline(
      confirmed,
      Math.max(0, connectTimeoutMs - (performance.now() - connectStarted)),
      () => new ArclightError('timeout', `Not connected after ${connectTimeoutMs} ms: the runtime did not confirm the connection.`),
    );
    this.#startTimers();
    this.#setStatus('ready');
  }

  #onMessage(raw: string): void {
    let envelope: Envelope;
    try {
      envelope = JSON.parse(raw) as Envelope;
    } catch {
      return;
    }
    const body = envelope?.data;
    if (!body || typeof body.type !== 'string') return;
    const message: ModelMessage = { type: body.type, ...(body.data === undefined ? {} : { data: body.data }), ...(body.request_id ? { request_id: body.request_id } : {}) };
    if (envelope.scope === 'application') {
      if (body.request_id) this.#pending.resolve(body.request_id, { type: body.type, data: body.data });
      // Typed clients see declared shapes; a model that changed since is reported at connect (schema_drift).
      this.emit('message', message as MessageOf<Model>);
      return;
    }
    switch (body.type) {
      case 'command_ack':
        if (body.request_id) this.#pending.resolve(body.request_id, undefined);
        break;
      case 'command_failed': {
        const data = (body.data ?? {}) as { code?: string; message?: string; field?: string; command?: string };
        const error = new ArclightError(data.code ?? 'internal_error', data.message ?? 'The command failed.', data.field ? { field: data.field } : {});
        if (!body.request_id || !this.#pending.reject(body.request_id, error)) this.#fail(error);
        break;
      }
      case 'frame_metadata': {
        const data = body.data as FrameMetadataData | undefined;
        if (!data || typeof data.track !== 'string' || typeof data.rtp_timestamp !== 'number') break;
        const event: FrameMetadataEvent = { track: data.track, rtpTimestamp: data.rtp_timestamp, metadata: decodeFrameMetadata(data.metadata) };
        let memory = this.#frameMetadata.get(data.track);
        if (!memory) this.#frameMetadata.set(data.track, (memory = new Map()));
        memory.set(event.rtpTimestamp, event.metadata);
        if (memory.size > FRAME_METADATA_MEMORY) memory.delete(memory.keys().next().value as number);
        this.emit('frameMetadata', event);
        return; // high rate: not repeated as a runtimeMessage
      }
      case 'frame_times': {
        const data = body.data as { track?: string; frames?: Array<[number, number]> } | undefined;
        if (data?.track && Array.isArray(data.frames)) this.#latency.get(data.track)?.addEmitTimes(data.frames);
        return; // high rate: not repeated as a runtimeMessage
      }
      case 'pong':
        if (body.request_id) this.#pending.resolve(body.request_id, { type: 'pong', data: body.data });
        break;
      case 'connection_info': {
        const data = body.data as { connection_id?: number } | undefined;
        if (typeof data?.connection_id === 'number') this.#setConnectionId(data.connection_id);
        this.#runtimeConfirmed?.();
        this.#runtimeConfirmed = undefined;
        break;
      }
      case 'media_stats': {
        const quality = body.data as MediaQuality | undefined;
        if (!quality || typeof quality !== 'object' || typeof quality.score !== 'number') break;
        this.#quality = quality;
        this.emit('mediaStats', quality);
        break;
      }
      case 'model_reloaded': {
        // `arclight dev` serves a new version of the model in place: the app's types may be stale now.
        const capabilities = ((body.data ?? {}) as { capabilities?: Capabilities }).capabilities;
        if (capabilities && typeof capabilities === 'object') this.#checkSchemaHash(capabilities);
        break;
      }
      case 'session_ended': {
        const reason = ((body.data ?? {}) as { reason?: string }).reason ?? 'ended';
        if (this.#disconnecting) break; // our own disconnect(false) ended it
        this.#lastError = new ArclightError('session_ended', `The session ended: ${reason}.`);
        this.emit('sessionEnded', reason);
        // Not from inside the data channel's callback: closing the peer there is unsafe in wrtc.
        setTimeout(() => this.#endedByServer(), 0);
        break;
      }
    }
    this.emit('runtimeMessage', message);
  }

  #endedByServer(): void {
    if (this.#sessionId === undefined) return;
    this.#closeTransport();
    this.#setSessionId(undefined);
    this.#session = undefined;
    this.#setConnectionId(undefined);
    this.#setStatus('disconnected');
  }

  #onLost(link: PeerLink, reason: LostReason): void {
    if (this.#link !== link || this.#disconnecting) return;
    if (this.#sessionId !== undefined && this.#options.autoReconnect !== false) {
      this.#recover(reason).catch(() => {}); // a failure is reported as an error event
      return;
    }
    // The connection dropped without a session end: keep the session so reconnect() can resume.
    this.#closeTransport();
    if (this.#sessionId !== undefined) this.#fail(new ArclightError('connection_failed', 'The connection to the runtime was lost; reconnect() to resume the session.'));
    this.#setStatus('disconnected');
  }

  /**
   * Gets the connection back without a new session: a fresh peer whose offer (new ICE
   * credentials, so an ICE restart) renegotiates the same connection id (PUT sdp_params), after
   * a jittered exponential backoff, at most `autoReconnect.maxAttempts` times. A refusal that
   * another try cannot change (403 from a token resolver that mints unbound tokens, an ended
   * session) stops at once. Published input tracks are published again. Rejects when it gives
   * up; the session is then kept for `reconnect()`.
   */
  async #recover(reason: LostReason | 'requested'): Promise<void> {
    const recovery = {};
    this.#recovery = recovery;
    const policy = { ...DEFAULT_RECONNECT_POLICY, ...(this.#options.autoReconnect || {}) };
    const lostAt = performance.now();
    const republish = [...this.#published].map(([name, track]) => ({ name, track, options: this.#publishOptions.get(name) ?? {} }));
    this.#closeTransport();
    this.#setStatus('connecting');
    let failure = new ArclightError('connection_failed', `The connection to the runtime was lost (${reason}).`);
    let attempts = 0;
    for (let attempt = 1; attempt <= policy.maxAttempts; attempt++) {
      attempts = attempt;
      const delayMs = reconnectDelayMs(attempt, policy);
      this.emit('reconnecting', { attempt, maxAttempts: policy.maxAttempts, delayMs, reason });
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      if (this.#recovery !== recovery) return;
      this.#abort = new AbortController();
      this.#api = new SessionApi({ baseUrl: this.#baseUrl, local: this.#options.local ?? false, modelName: this.#options.modelName, token: this.#token, signal: this.#abort.signal });
      try {
        await this.#openTransport(this.#connectionId, this.#connectionId !== undefined, 6);
      } catch (error) {
        if (this.#recovery !== recovery) return;
        failure = asError(error, 'connection_failed');
        this.#closeTransport();
        if (!worthRetrying(failure)) break;
        continue;
      }
      if (this.#recovery !== recovery) return;
      this.#recovery = undefined;
      this.emit('reconnected', { attempts: attempt, downtimeMs: Math.round(performance.now() - lostAt) });
      for (const { name, track, options } of republish) {
        await this.publishTrack(name, track, options).catch((error: unknown) => this.#fail(asError(error, 'internal_error')));
      }
      return;
    }
    this.#recovery = undefined;
    if (failure.code === 'session_ended' || failure.code === 'session_not_found') this.#setSessionId(undefined);
    const gaveUp = new ArclightError(failure.code, `The connection was lost (${reason}) and ${attempts} attempt(s) to renegotiate it failed: ${failure.message}`, {
      cause: failure,
      ...(failure.status !== undefined ? { status: failure.status } : {}),
    });
    this.#fail(gaveUp);
    this.#setStatus('disconnected');
    throw gaveUp;
  }

  #request(scope: 'application' | 'runtime', type: string, data: JsonObject, uploads?: Record<string, UploadReference>): Promise<CommandReply | undefined> {
    const requestId = this.#pending.nextId();
    const text = JSON.stringify({ scope, data: { type, data, request_id: requestId, ...(uploads ? { uploads } : {}) } });
    const limit = MAX_MESSAGE_BYTES;
    const bytes = new TextEncoder().encode(text).byteLength;
    if (bytes > limit) {
      return Promise.reject(new ArclightError('message_too_large', `The command is ${bytes} bytes; the limit is ${limit}.`));
    }
    const outcome = this.#pending.track(requestId, type, this.#options.commandTimeoutMs ?? 30_000);
    try {
      this.#link!.send(text);
    } catch (error) {
      this.#pending.reject(requestId, asError(error, 'not_ready'));
    }
    return outcome;
  }

  /** Closes the peer and fails what waited on it; the session is untouched. */
  #closeTransport(): void {
    this.#stopTimers();
    for (const tracker of this.#latency.values()) tracker.stop();
    this.#latency.clear();
    clearInterval(this.#latencyReportTimer);
    this.#latencyReportTimer = undefined;
    this.#quality = undefined;
    this.#abort?.abort(new ArclightError('connection_failed', 'Disconnected.'));
    this.#trickler?.stop();
    this.#trickler = undefined;
    const link = this.#link;
    this.#link = undefined;
    try {
      link?.close();
    } catch (error) {
      console.warn('[arclight] closing the peer connection failed', error);
    }
    this.#published.clear();
    this.#publishOptions.clear();
    for (const stamper of this.#stampers.values()) stamper.stop();
    this.#stampers.clear();
    this.#pending.rejectAll(new ArclightError('connection_failed', 'The connection closed before the command completed.'));
  }

  /** A SessionApi outside connect()'s abort signal: for calls that must go out whatever connect is doing. */
  #standaloneApi(): SessionApi {
    return new SessionApi({ baseUrl: this.#baseUrl, local: this.#options.local ?? false, modelName: this.#options.modelName, token: this.#token });
  }

  /** Ends the session (its creator) or retires this connection (a guest); failures are reported, not thrown. */
  async #leaveSession(mode: 'end-session' | 'close-connection'): Promise<void> {
    const sessionId = this.#sessionId;
    if (sessionId === undefined) return;
    // A fresh API object: the connect-time one may be aborted.
    const api = this.#standaloneApi();
    try {
      if (mode === 'end-session') await api.endSession(sessionId);
      else if (this.#connectionId !== undefined) await api.closeConnection(sessionId, this.#connectionId);
    } catch (error) {
      this.#fail(asError(error, 'internal_error'));
    }
  }

  #startTimers(): void {
    this.#stopTimers();
    this.#statsTimer = setInterval(() => void this.#sampleStats(), STATS_INTERVAL_MS);
    this.#pingTimer = setInterval(() => {
      try {
        this.#link?.send(JSON.stringify({ scope: 'runtime', data: { type: 'ping', data: {} } }));
      } catch {
        // channel closing; the lost handler takes over
      }
    }, PING_INTERVAL_MS);
  }

  #stopTimers(): void {
    clearInterval(this.#statsTimer);
    clearInterval(this.#pingTimer);
    this.#statsTimer = undefined;
    this.#pingTimer = undefined;
  }

  async #sampleStats(): Promise<void> {
    const pc = this.#link?.pc;
    if (!pc) return;
    try {
      const report = await pc.getStats();
      const summarised = this.#sampler.summarise(report as unknown as Map<string, { type: string }>);
      const latency = this.getLatency();
      const stats = latency.length > 0 ? { ...summarised, latency } : summarised;
      this.#stats = stats;
      this.emit('statsUpdate', this.#quality ? { ...stats, quality: this.#quality } : stats);
    } catch {
      // stats are best effort
    }
  }

  #withQuality(stats: ClientStats | undefined): ClientStats | undefined {
    const quality = this.#quality;
    if (!quality) return stats;
    return { ...(stats ?? { timestamp: Date.now() }), quality };
  }

  #track(name: string, direction: TrackCapability['direction']): TrackCapability {
    const tracks = this.#session?.capabilities.tracks ?? [];
    const track = tracks.find((t) => t.name === name);
    if (!track || track.direction !== direction) {
      const candidates = tracks.filter((t) => t.direction === direction).map((t) => t.name);
      throw new ArclightError('unknown_track', `The model has no ${direction === 'sendonly' ? 'input' : 'output'} track "${name}". ${direction === 'sendonly' ? 'Inputs' : 'Outputs'}: ${candidates.join(', ') || '(none)'}.`);
    }
    return track;
  }

  #assertReady(what: string): void {
    if (this.#status !== 'ready' || !this.#link) throw new ArclightError('not_ready', `${what}() needs status ready; it is ${this.#status}.`);
  }

  #setStatus(status: ClientStatus): void {
    if (this.#status === status) return;
    this.#status = status;
    this.#followLogs();
    this.emit('statusChanged', status);
  }

  #setSessionId(sessionId: string | undefined): void {
    if (this.#sessionId === sessionId) return;
    this.#sessionId = sessionId;
    if (sessionId !== undefined) this.#logSessionId = sessionId;
    this.emit('sessionIdChanged', sessionId);
  }

  #setConnectionId(connectionId: number | undefined): void {
    if (this.#connectionId === connectionId) return;
    this.#connectionId = connectionId;
    this.emit('connectionIdChanged', connectionId);
  }

  // ---- session logs ----

  /**
   * A page of the session's log: the current session's, else the last one this client was in
   * (logs stay readable five minutes after a session ends), else `sessionId`'s.
   */
  async getSessionLogs(query: SessionLogQuery & { readonly sessionId?: string } = {}): Promise<SessionLogPage> {
    const sessionId = query.sessionId ?? this.#sessionId ?? this.#logSessionId;
    if (sessionId === undefined) throw new ArclightError('invalid_request', 'getSessionLogs() needs a session: connect first, or pass sessionId.');
    return fetchSessionLogs({ baseUrl: this.#baseUrl, sessionId, token: this.#token }, {
      ...(query.after !== undefined ? { after: query.after } : {}),
      ...(query.limit !== undefined ? { limit: query.limit } : {}),
    });
  }

  override on<E extends keyof ClientEvents<Model>>(event: E, listener: (...args: ClientEvents<Model>[E]) => void): void {
    super.on(event, listener);
    if (event === 'log') this.#followLogs();
  }

  override off<E extends keyof ClientEvents<Model>>(event: E, listener: (...args: ClientEvents<Model>[E]) => void): void {
    super.off(event, listener);
    // Nobody listens any more: let the stream go (a new listener resumes after the last line).
    if (event === 'log' && !this.hasListeners('log')) this.#logFollower?.stop();
  }

  /** Follows the session's log while the client is ready and someone listens for `log`. */
  #followLogs(): void {
    if (this.#status !== 'ready' || !this.hasListeners('log')) {
      if (this.#status === 'disconnected') this.#logFollower?.stop();
      return;
    }
    const sessionId = this.#sessionId;
    const previous = this.#logFollower;
    if (sessionId === undefined || (previous?.sessionId === sessionId && !previous.stopped)) return;
    previous?.stop();
    // Back in the same session after a reconnect: carry on after the last line delivered.
    const after = previous?.sessionId === sessionId ? previous.lastSeq : 0;
    this.#logFollower = new SessionLogFollower({
      baseUrl: this.#baseUrl,
      sessionId,
      token: this.#token,
      after,
      onLine: (line) => this.emit('log', line),
    });
  }

  /**
   * Warns (event + one console line) when the runtime's model is not the one the app's types
   * describe: at connect, and when `arclight dev` reloads the model in place (`model_reloaded`).
   */
  #checkSchemaHash(capabilities: Capabilities): void {
    const expected = this.#options.schemaHash;
    const actual = capabilities.schema_hash;
    if (expected === undefined || actual === undefined || expected === actual) return;
    const warning: ClientWarning = {
      code: 'schema_drift',
      message: `The model "${this.#options.modelName}" has changed since this app's types were generated (schema hash ${actual}, expected ${expected}): commands or messages may not match. Regenerate them with \`arclight types\`.`,
      expected,
      actual,
    };
    console.warn(`[arclight] ${warning.message}`);
    this.emit('warning', warning);
  }

  #fail(error: ArclightError): void {
    this.#lastError = error;
    this.emit('error', error);
  }
}

function globalRtc(): RtcImplementation {
  const g = globalThis as { RTCPeerConnection?: typeof RTCPeerConnection; MediaStream?: typeof MediaStream };
  if (!g.RTCPeerConnection) {
    throw new ArclightError('invalid_request', 'No RTCPeerConnection here. In Node, import { ArclightClient } from "arclight/client/node" (it uses @roamhq/wrtc).');
  }
  return { RTCPeerConnection: g.RTCPeerConnection, ...(g.MediaStream ? { MediaStream: g.MediaStream } : {}) };
}

function asError(error: unknown, code: string): ArclightError {
  if (error instanceof ArclightError) return error;
  if ((error as Error)?.name === 'AbortError') return new ArclightError('connection_failed', 'Aborted by disconnect().', { cause: error });
  return new ArclightError(code, (error as Error)?.message ?? String(error), { cause: error });
}

/** PUTs an upload's bytes to its presigned URL (no other credentials); a network failure is `connection_failed`. */
async function putUpload(url: string, file: Blob, mimeType: string): Promise<Response> {
  try {
    return await fetch(url, { method: 'PUT', body: file, headers: { 'Content-Type': mimeType } });
  } catch (error) {
    throw new ArclightError('connection_failed', `The upload could not be sent: ${(error as Error).message}`, { cause: error });
  }
}

/** `promise`, or the error `timedOut()` makes once `ms` have passed. */
function withDeadline<T>(promise: Promise<T>, ms: number, timedOut: () => Error): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(timedOut()), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}
