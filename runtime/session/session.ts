/**
 * A running session: its lifecycle (start, connections becoming ready and lost, the reconnect
 * grace, the duration limits, end), its model's hooks and run loop, and its client connections.
 * The rest is delegated, each to its own file: the tracks and who publishes the inputs
 * (session-tracks.ts), what each connection attached to them (media-bindings.ts), what model
 * code sees (model-facade.ts) and the data-channel protocol (message-handler.ts, which sees the
 * session through its own narrow port). The public members are what the HTTP routes, the session
 * host, the benches and the tests use; most of the track and media ones forward.
 *
 * Longer than ~400 lines because it is that whole public surface: the forwarding members are a
 * line or two each, and splitting them off would only move the surface, not shrink it.
 */

import { randomUUID } from 'node:crypto';
import type { Capabilities, TrackCapability } from '../../protocol/capabilities.ts';
import { ArclightError } from '../../protocol/errors.ts';
import type { EnvelopeBody, LatencyMode } from '../../protocol/messages.ts';
import type { JsonObject } from '../../protocol/json-schema.ts';
import type { SessionLogLevel } from '../../protocol/session-logs.ts';
import { withLogContext, type Logger } from '../../server-kit/log.ts';
import { runWithLogContext, type LogContextFields } from '../../server-kit/log-context.ts';
import type { EncoderBackendRegistry } from '../media/encoder-backends.ts';
import type { RuntimeMetrics } from '../metrics.ts';
import { callAuthorCode, DEFAULT_HOOK_DEADLINE_MS } from '../model/author-code.ts';
import type { UploadedFile, UploadStore } from '../uploads/upload-store.ts';
import type { ClipReply, RecordingRegistry } from '../recording/recording-registry.ts';
import type { CommandRouter } from '../model/command-router.ts';
import type { ModelDefinition } from '../model/definition.ts';
import type { ModelSession } from '../model/model-session.ts';
import { SessionSettings } from '../model/settings.ts';
import type { InputFrameAnnotation } from '../media/input-frame-aligner.ts';
import type { InputAudioTrack, InputVideoTrack } from '../media/input-tracks.ts';
import type { OutputVideoTrack } from '../media/output-video-track.ts';
import type { RuntimeEventSink } from '../events/runtime-event-log.ts';
import type { SessionLogBuffer } from '../logs/session-log-buffer.ts';
import type { SessionLogRegistry } from '../logs/session-log-registry.ts';
import { sessionLogger } from '../logs/session-logger.ts';
import type { PeerFactoryOptions } from '../transport/signalling/peer-factory.ts';
import type { MediaBinding, PeerConnection } from '../transport/peer-connection.ts';
import { Connection, type ConnectionOwner } from './connection.ts';
import { MediaBindings } from './media-bindings.ts';
import { MessageHandler } from './message-handler.ts';
import { createModelFacade, createStepHost, type FacadeSession } from './model-facade.ts';
import { SessionDeadlines, type DurationLimit } from './session-deadlines.ts';
import { SessionRunLoop } from './session-run-loop.ts';
import { SessionTracks, type SessionReports } from './session-tracks.ts';
import { UndeclaredMessageWarner } from './undeclared-messages.ts';
import type { BitrateBounds } from '../media/video-bitrate-adaptation.ts';

export type { DurationLimit } from './session-deadlines.ts';

/**
 * Where the session is in its life, stamped (`phase`) on every log record written during its
 * work: `starting` until its `session_started` hook has returned, then `waiting` (no client ready:
 * none yet, or one lost and the reconnect grace running) and `ready` (a client is), and `ending`
 * once it is being ended.
 */
type SessionPhase = 'starting' | 'waiting' | 'ready' | 'ending';

export interface SessionOptions {
  readonly model: ModelDefinition<unknown>;
  readonly router: CommandRouter;
  readonly capabilities: Capabilities;
  readonly peerOptions: PeerFactoryOptions;
  readonly log: Logger;
  readonly metrics?: RuntimeMetrics;
  /** A session with no live connection for this long ends (`idle_timeout`). */
  readonly reconnectGraceMs: number;
  /** The video latency mode the session starts in. */
  readonly latencyMode: LatencyMode;
  /** Ends the session (`max_duration`) this long after it starts; undefined = no limit. */
  readonly maxDurationMs?: number;
  /**
   * Hosted mode: the coordinator's maximum duration for the session. Unlike `maxDurationMs` it is
   * counted from `ready` — where the coordinator counts it and bills from — so its clock starts
   * when startDurationLimit is called, not when the session opens.
   */
  readonly durationLimit?: DurationLimit;
  /** Largest accepted data-channel message in bytes. */
  readonly maxMessageBytes: number;
  readonly onEnded?: (session: Session, reason: string) => void;
  /** Called when a client connection becomes ready (hosted mode: the coordinator starts billing). */
  readonly onConnectionReady?: (session: Session) => void;
  /** The session id; default a fresh UUID (hosted mode: the coordinator's id). */
  readonly id?: string;
  /** Where the session's uploaded files are kept (deleted when it ends). */
  readonly uploads?: UploadStore;
  /** Records the first output video track for clips (off: no recording). */
  readonly recordings?: RecordingRegistry;
  /** Where clients reach this session over HTTP (clip URLs point there). */
  readonly publicUrl?: string;
  /** Keeps the session's log (its model's lines and the runtime's account of it) for its owner. */
  readonly sessionLogs?: SessionLogRegistry;
  /** The runtime's event stream (`GET /events`): sessions, connections, encoders, recording. */
  readonly runtimeEvents?: RuntimeEventSink;
  /** Makes the peers of the session's connections (the transport: werift's, from the composition root). */
  readonly createPeer: (options: PeerFactoryOptions) => PeerConnection;
  /** Which encoder serves each codec (the runtime's registry; a lone session defaults to the process's). */
  readonly encoderBackends?: EncoderBackendRegistry;
  /** Network adaptation's bounds for its video streams (RuntimeOptions `video`); default ADAPTATION's. */
  readonly videoBitrate?: BitrateBounds;
}

export class Session implements ConnectionOwner {
  readonly id: string;
  readonly createdAt = Date.now();
  readonly log: Logger;
  readonly tracks: readonly TrackCapability[];
  readonly peerOptions: PeerFactoryOptions;
  readonly #options: SessionOptions;
  readonly #abort = new AbortController();
  /** The model's declared settings: one store for all of this session's facades. */
  readonly #settings: SessionSettings;
  readonly #connections = new Map<number, Connection>();
  readonly #tracks: SessionTracks;
  readonly #media: MediaBindings;
  readonly #messages: MessageHandler;
  readonly #facade: ModelSession<unknown>;
  /** The session's log (absent when the runtime keeps none). */
  readonly #logBuffer: SessionLogBuffer | undefined;
  readonly #undeclaredMessages = new UndeclaredMessageWarner();
  /** The process logger for this session, before teeing: the model's logger derives from it. */
  readonly #baseLog: Logger;
  /**
   * What every record written during the session's work carries (server-kit/log-context.ts): its
   * loggers write in it, and it is entered where the session runs model code (hooks, the run
   * loop, command handlers), so the records of whatever runs there — router, workers, the model's
   * own — are stamped too. Read at each record: the phase is the one at the time.
   */
  readonly #logContext = (): LogContextFields => ({ session: this.id, phase: this.#phase() });
  /** The `session_started` hook has returned (the phase is past `starting`). */
  #started = false;
  /**
   * The connection a 2.9.0 client negotiates through `.../transport/webrtc/sdp_params` (its
   * signalling has no connection id: POST opens a new one, PUT and GET address this one).
   */
  legacyConnectionId: number | undefined;
  #nextConnectionId = 1;
  /** Connections currently ready, for the connections gauge. */
  #readyCount = 0;
  #latencyMode: LatencyMode;
  #ended: string | undefined;
  readonly #deadlines: SessionDeadlines;
  readonly #runLoop: SessionRunLoop;
  /** What the session's model offers now (commands with their schemas, tracks): `request_schema` answers it. */
  get capabilities(): Capabilities {
    return this.#capabilities;
  }

  #endedPromise: Promise<void> | undefined;
  /** The model version the session runs: replaced in place by adoptModel (arclight dev). */
  #model: ModelDefinition<unknown>;
  #capabilities: Capabilities;

  constructor(options: SessionOptions) {
    this.id = options.id ?? randomUUID();
    this.#options = options;
    this.#model = options.model;
    this.#baseLog = withLogContext(options.log.child({ session: this.id }), this.#logContext);
    this.#logBuffer = options.sessionLogs?.begin(this.id);
    // Everything logged about the session (its connections and tracks log through children of
    // this) is also kept in its log.
    this.log = this.#logBuffer ? sessionLogger(this.#baseLog, this.#logBuffer, 'runtime') : this.#baseLog;
    this.tracks = options.capabilities.tracks;
    this.#capabilities = options.capabilities;
    this.peerOptions = options.peerOptions;
    this.#latencyMode = options.latencyMode;
    const reports: SessionReports = {
      sessionId: this.id,
      recordEvent: (level, message, fields) => this.recordEvent(level, message, fields),
      runtimeEvents: options.runtimeEvents,
    };
    this.#tracks = new SessionTracks(
      options.model.tracks,
      options.model.fps,
      this.log,
      options.metrics,
      reports,
      options.encoderBackends,
      options.videoBitrate,
    );
    this.#media = new MediaBindings({
      tracks: this.#tracks,
      spec: (name) => this.#model.tracks.find((t) => t.name === name),
      capabilities: this.tracks,
      log: this.log,
      metrics: options.metrics,
      latencyMode: () => this.#latencyMode,
      ended: () => this.ended,
    });
    if (options.recordings) this.#tracks.record(options.recordings, options.model, options.publicUrl ?? '', this.log, reports);
    this.#deadlines = new SessionDeadlines(
      options,
      (reason) => void this.end(reason),
      () => this.liveConnections.length,
      () => this.ended,
    );
    const session = this;
    this.#runLoop = new SessionRunLoop({
      log: this.log,
      signal: this.#abort.signal,
      get ended(): boolean {
        return session.ended;
      },
      facade: (signal) => this.#createFacade(this.#facade.state, signal),
      stepHost: () => createStepHost(this.#facadeSession(), this.#model.fps, this.log, this.#runLoop.gate, () => this.#readyCount > 0),
      failed: () => void this.end('model_error'),
    });
    this.#messages = new MessageHandler(this, options.router, options.maxMessageBytes, this.log);
    this.#settings = new SessionSettings(options.model.settings);
    this.#facade = this.#inLogContext(() =>
      this.#createFacade(options.model.createSessionState?.() ?? ({} as unknown), this.#abort.signal),
    );
  }

  get ended(): boolean {
    return this.#ended !== undefined;
  }

  get endReason(): string | undefined {
    return this.#ended;
  }

  get model(): ModelSession<unknown> {
    return this.#facade;
  }

  get connections(): Connection[] {
    return [...this.#connections.values()];
  }

  /** Connections negotiating or ready: the ones that keep a session from idling out. */
  get liveConnections(): Connection[] {
    return this.connections.filter((c) => c.state === 'ready' || c.state === 'negotiating');
  }

  get latencyMode(): LatencyMode {
    return this.#latencyMode;
  }

  /** A client's own measurement of glass-to-glass latency on a track (see the client's trackLatency). */
  recordClientLatency(track: string, p50Ms: number, p95Ms: number): void {
    if (!this.#tracks.outputVideo.has(track)) throw new ArclightError('unknown_track', `The model has no output video track "${track}".`);
    this.#options.metrics?.clientLatency.set({ track, quantile: '0.5' }, p50Ms / 1000);
    this.#options.metrics?.clientLatency.set({ track, quantile: '0.95' }, p95Ms / 1000);
  }

  /** Applies to every connection from the next frame on. */
  setLatencyMode(mode: LatencyMode): void {
    if (mode === this.#latencyMode) return;
    this.#latencyMode = mode;
    this.log.info('latency mode changed', { mode });
  }

  outputVideoTrack(name: string): OutputVideoTrack | undefined {
    return this.#tracks.outputVideo.get(name);
  }

  inputVideoTrack(name: string): InputVideoTrack | undefined {
    return this.#tracks.inputVideo.get(name);
  }

  inputAudioTrack(name: string): InputAudioTrack | undefined {
    return this.#tracks.inputAudio.get(name);
  }

  /**
   * A line for the session's log alone (not the process log): the runtime's account of what
   * happened to the session — connections, commands and their outcomes — which its owner reads
   * and operators have in metrics. No credentials: callers pass ids, names, codes and times.
   */
  recordEvent(level: SessionLogLevel, message: string, fields?: JsonObject): void {
    this.#logBuffer?.append({ level, source: 'runtime', message, ...(fields ? { fields } : {}) });
  }

  /** The model sent a message of `type` itself (broadcast or a connection's send): one warning per undeclared type. */
  modelMessageSent(type: string): void {
    this.#undeclaredMessages.check(this.#model.messages, type, (message, fields) => this.log.warn(message, fields));
  }

  /** Fires `session_started`, then runs the model loop in the background. */
  start(): Promise<void> {
    return this.#inLogContext(() => this.#start());
  }

  async #start(): Promise<void> {
    this.recordEvent('info', 'session opened', { model: this.#model.name });
    this.#options.runtimeEvents?.publish({ type: 'session_opened', session_id: this.id });
    this.#options.metrics?.sessions.inc();
    this.#options.metrics?.sessionsStarted.inc();
    this.#deadlines.started();
    const hooks = this.#model.hooks;
    if (hooks?.session_started) {
      await callAuthorCode(this.log, 'hook session_started', () => hooks.session_started!(this.#facade), DEFAULT_HOOK_DEADLINE_MS);
    }
    this.#started = true;
    this.#runLoop.start(this.#model);
  }

  /**
   * Starts the hosted maximum duration's clock at `origin` (a `performance.now()` time): the
   * session ends `durationLimit.ms` later with `durationLimit.reason`, told to every client and
   * reported to the coordinator like any end here. Once: later calls (more clients becoming
   * ready) change nothing. Without a `durationLimit` it does nothing.
   */
  startDurationLimit(origin: number): void {
    this.#deadlines.startDurationLimit(origin);
  }

  /**
   * Runs a new version of the model in this session without ending it (same tracks and fps —
   * the caller checks): commands go to `router`'s handlers at once, hooks are the new ones from
   * now on, and the run loop is restarted on the new definition with `session.state` kept (the
   * new `createSessionState` is not called). The old loop is aborted through its own signal and
   * awaited (at most 2 s) before the new one starts, so two versions never emit at once.
   */
  async adoptModel(model: ModelDefinition<unknown>, router: CommandRouter, capabilities?: Capabilities): Promise<void> {
    if (this.ended) return;
    this.#model = model;
    if (capabilities) this.#capabilities = capabilities;
    this.#messages.useRouter(router);
    await this.#inLogContext(() => this.#runLoop.restart(model));
    this.recordEvent('info', 'model reloaded; run loop restarted', { model: model.name });
  }

  /** Tells every ready client something about the runtime (e.g. `model_reloaded`). */
  notifyClients(body: EnvelopeBody): void {
    for (const connection of this.#connections.values()) {
      if (connection.state === 'ready') connection.sendMessage('runtime', body);
    }
  }

  /**
   * Runs author code (a command handler, a hook) where it may run: for a step model, between
   * steps (its StepGate); for a `run` model, at once.
   */
  readonly betweenSteps = <T>(fn: () => Promise<T>): Promise<T> => (this.#model.generate ? this.#runLoop.gate.between(fn) : fn());

  registerConnection(): Connection {
    if (this.ended) throw new ArclightError('session_ended', `Session ${this.id} has ended.`);
    const connection = new Connection(this.#nextConnectionId++, this);
    this.#connections.set(connection.id, connection);
    this.recordEvent('info', 'connection opened', { connection: connection.id });
    this.#options.runtimeEvents?.publish({ type: 'connection_opened', session_id: this.id, connection_id: connection.id });
    return connection;
  }

  connection(id: number): Connection | undefined {
    return this.#connections.get(id);
  }

  /**
   * Ends the session once: every client is told why, connections close without per-client
   * `disconnected` hooks, the run loop is aborted, then `session_ended` fires.
   */
  end(reason: string): Promise<void> {
    this.#endedPromise ??= this.#inLogContext(() => this.#end(reason));
    return this.#endedPromise;
  }

  async #end(reason: string): Promise<void> {
    this.#ended = reason;
    this.#deadlines.clear();
    this.log.info('session ending', { reason });
    // Abort first: model loops stop before anything else is torn down under them.
    this.#abort.abort(new ArclightError('session_ended', `Session ended: ${reason}`));
    for (const connection of this.#connections.values()) {
      connection.sendMessage('runtime', { type: 'session_ended', data: { session_id: this.id, reason } });
    }
    // Let the notice be acknowledged before the peers close under it.
    await Promise.all([...this.#connections.values()].map((c) => c.drain(1_000)));
    for (const connection of this.#connections.values()) connection.closeSilently();
    this.#options.metrics?.connections.dec(this.#readyCount);
    await this.#tracks.close();
    // The run loop sees the aborted signal; give it a moment to return, without waiting forever.
    await this.#runLoop.settled();
    const hooks = this.#model.hooks;
    if (hooks?.session_ended) {
      await callAuthorCode(this.log, 'hook session_ended', () => hooks.session_ended!(this.#facade, reason), DEFAULT_HOOK_DEADLINE_MS);
    }
    await this.#options.recordings?.ended(this.id);
    await this.#options.uploads
      ?.dropSession(this.id)
      .catch((error: unknown) => this.log.warn("deleting the session's uploads failed", { error }));
    this.#options.metrics?.sessions.dec();
    this.recordEvent('info', 'session ended', { reason });
    this.#options.sessionLogs?.ended(this.id, reason);
    this.#options.runtimeEvents?.publish({ type: 'session_ended', session_id: this.id, reason });
    this.#options.onEnded?.(this, reason);
  }

  /** A clip of the last `durationSeconds` (undefined: the whole recording), for the requesting client. */
  async requestClip(durationSeconds: number | undefined): Promise<ClipReply> {
    if (!this.#options.recordings) throw new ArclightError('recording_error', 'Recording is off on this runtime.');
    return this.#options.recordings.requestClip(this.id, durationSeconds);
  }

  /** The session's uploaded file `uploadId` (throws not_found / not_ready ArclightErrors). */
  uploadedFile(uploadId: string): UploadedFile {
    if (!this.#options.uploads) throw new ArclightError('not_found', 'This runtime takes no uploads.');
    return this.#options.uploads.file(this.id, uploadId);
  }

  /** A client announced a finished upload: the model's `file_uploaded` hook runs (isolated, bounded). */
  async fileUploaded(connection: Connection, file: UploadedFile): Promise<void> {
    const hook = this.#model.hooks?.file_uploaded;
    if (hook)
      await this.#inLogContext(() =>
        this.betweenSteps(() =>
          callAuthorCode(this.log, 'hook file_uploaded', () => hook(this.#facade, file, connection.handle), DEFAULT_HOOK_DEADLINE_MS),
        ),
      );
  }

  // ---- ConnectionOwner ----

  connectionReady(connection: Connection): void {
    if (this.ended) return;
    this.#readyCount++;
    this.#options.metrics?.connections.inc();
    this.#options.metrics?.webrtcConnectDuration.observe(connection.connectSeconds);
    this.#deadlines.cancelIdle();
    this.#media.connectionReady(connection);
    connection.sendMessage('runtime', { type: 'connection_info', data: { session_id: this.id, connection_id: connection.id } });
    const steps = connection.connectSteps;
    this.recordEvent('info', 'connection ready', {
      connection: connection.id,
      connect_ms: Math.round(connection.connectSeconds * 1000),
      ...(steps ? { steps } : {}),
    });
    this.#options.runtimeEvents?.publish({ type: 'connection_ready', session_id: this.id, connection_id: connection.id });
    this.#options.onConnectionReady?.(this);
    this.#runLoop.gate.nudge(); // a step model waiting for a viewer starts
    const hook = this.#model.hooks?.connected;
    if (hook)
      void this.#inLogContext(() =>
        this.betweenSteps(() =>
          callAuthorCode(this.log, 'hook connected', () => hook(this.#facade, connection.handle), DEFAULT_HOOK_DEADLINE_MS),
        ),
      );
  }

  connectionLost(connection: Connection): void {
    if (this.ended) return;
    this.#readyCount--;
    this.#options.metrics?.connections.dec();
    this.recordEvent('info', 'connection lost', { connection: connection.id });
    this.#options.runtimeEvents?.publish({ type: 'connection_lost', session_id: this.id, connection_id: connection.id });
    this.releaseInputs(connection.id);
    this.#deadlines.armIdle();
    this.#runLoop.gate.nudge();
    const hook = this.#model.hooks?.disconnected;
    if (hook)
      void this.#inLogContext(() =>
        this.betweenSteps(() =>
          callAuthorCode(this.log, 'hook disconnected', () => hook(this.#facade, connection.handle), DEFAULT_HOOK_DEADLINE_MS),
        ),
      );
  }

  messageReceived(connection: Connection, raw: string | Buffer): void {
    if (this.ended) return;
    void this.#inLogContext(() => this.#messages.handle(connection, raw));
  }

  /** A fresh peer for one of this session's connections (see SessionOptions.createPeer). */
  createPeer(): PeerConnection {
    return this.#options.createPeer(this.peerOptions);
  }

  /**
   * Attaches output sinks and input receivers for these bindings of a connection's peer: all of
   * a freshly negotiated peer's, or those a renegotiation in place adds (beside what is there).
   */
  bindMedia(connection: Connection, bindings: readonly MediaBinding[], pausedTracks: ReadonlySet<string>): void {
    this.#media.bind(connection, bindings, pausedTracks);
  }

  /**
   * Detaches what `bindMedia` attached for a connection: for the named tracks only (a
   * renegotiation in place ended or changed them; input claims on them are released), or all.
   */
  unbindMedia(connection: Connection, trackNames?: readonly string[]): void {
    this.#media.unbind(connection, trackNames);
  }

  // ---- track control, used by the message handler ----

  /** Pauses or resumes one output track for one connection. */
  setSubscribed(connection: Connection, trackName: string, subscribed: boolean): void {
    this.#media.setSubscribed(connection, trackName, subscribed);
  }

  /**
   * Claims an input track for a connection; only one connection publishes a track at a time.
   * `frameMetadata`: the publisher will annotate each video frame (`annotateInput`).
   */
  claimInput(connectionId: number, trackName: string, frameMetadata = false): void {
    this.#tracks.claim(connectionId, trackName, frameMetadata, (holder) => this.#connections.get(holder)?.state === 'ready');
  }

  /** Per-frame annotations from the publisher of an input video track (keyed by RTP timestamp). */
  annotateInput(connectionId: number, trackName: string, frames: ReadonlyArray<{ rtpTimestamp: number } & InputFrameAnnotation>): void {
    this.#tracks.annotate(connectionId, trackName, frames);
  }

  releaseInput(connectionId: number, trackName: string): void {
    this.#tracks.release(connectionId, trackName);
  }

  releaseInputs(connectionId: number): void {
    this.#tracks.releaseAll(connectionId);
  }

  broadcast(body: EnvelopeBody): void {
    for (const connection of this.#connections.values()) {
      if (connection.state === 'ready') connection.sendMessage('application', body);
    }
  }

  // ---- internals ----

  /** Runs `fn` (and what it starts) in the session's log context. */
  #inLogContext<T>(fn: () => T): T {
    return runWithLogContext(this.#logContext, fn);
  }

  #phase(): SessionPhase {
    if (this.#ended !== undefined) return 'ending';
    if (!this.#started) return 'starting';
    return this.#readyCount > 0 ? 'ready' : 'waiting';
  }

  /** `signal`: the session's, or (a run loop's facade) one that also aborts when that run is restarted. */
  #createFacade(state: unknown, signal: AbortSignal): ModelSession<unknown> {
    const modelLog = this.#baseLog.child({ source: 'model' });
    const log = this.#logBuffer ? sessionLogger(modelLog, this.#logBuffer, 'model') : modelLog;
    return createModelFacade(this.#facadeSession(), this.#model.fps, state, signal, log);
  }

  /** The session as model-facade.ts sees it. */
  #facadeSession(): FacadeSession {
    const session = this;
    return {
      id: this.id,
      get ended(): boolean {
        return session.ended;
      },
      tracks: this.#tracks,
      settings: this.#settings,
      readyConnections: () => this.connections.filter((c) => c.state === 'ready').map((c) => c.handle),
      modelMessageSent: (type) => this.modelMessageSent(type),
      broadcast: (body) => this.broadcast(body),
    };
  }
}
