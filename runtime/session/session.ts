/**
 * A running session: the model's per-session state and run loop, its output and input tracks,
 * and its client connections. Everything model code sees of it is the `ModelSession` facade.
 */

import { randomUUID } from 'node:crypto';
import type { RTCRtpTransceiver } from 'werift';
import type { Capabilities, TrackCapability } from '../../protocol/capabilities.ts';
import { ArclightError } from '../../protocol/errors.ts';
import { encodeFrameMetadata } from '../../protocol/frame-metadata.ts';
import type { JsonValue } from '../../protocol/json-schema.ts';
import type { EnvelopeBody, LatencyMode } from '../../protocol/messages.ts';
import type { Logger } from '../../server-kit/log.ts';
import type { RuntimeMetrics } from '../metrics.ts';
import { callAuthorCode, DEFAULT_HOOK_DEADLINE_MS, isSessionEnded } from '../model/author-code.ts';
import { driveSteps, StepGate, type StepHost } from '../model/step-driver.ts';
import type { UploadedFile, UploadStore } from '../uploads/upload-store.ts';
import type { ClipReply, RecordingRegistry } from '../recording/recording-registry.ts';
import type { CommandRouter } from '../model/command-router.ts';
import type { ModelDefinition, OutputAudioTrackSpec, OutputVideoTrackSpec, TrackSpec } from '../model/definition.ts';
import type { ConnectionHandle, EmitOptions, InputAudio, InputVideo, ModelSession } from '../model/model-session.ts';
import { AudioReceiver } from '../media/audio-receiver.ts';
import { audioBatch, emitAfterEndError, unknownOutputTrackError, videoBatch, type EmitFrames } from '../media/emit-checks.ts';
import type { AudioFrame, VideoFrame } from '../media/frames.ts';
import type { InputFrameAnnotation } from '../media/input-frame-aligner.ts';
import { InputAudioTrack, InputVideoTrack } from '../media/input-tracks.ts';
import { OutputAudioTrack, type AudioSink } from '../media/output-audio-track.ts';
import { OutputVideoTrack, type VideoSink } from '../media/output-video-track.ts';
import { VideoReceiver, type RtpInput } from '../media/video-receiver.ts';
import { negotiatedH264Profile, type TrackBinding } from '../webrtc/answer-offer.ts';
import type { PeerFactoryOptions } from '../webrtc/peer-factory.ts';
import { Connection, type ConnectionOwner } from './connection.ts';
import { MessageHandler } from './message-handler.ts';
import { FrameClock } from './frame-clock.ts';
import { systemClock } from './clock.ts';
import type { JsonObject } from '../../protocol/json-schema.ts';
import type { SessionLogLevel } from '../../protocol/session-logs.ts';
import type { RuntimeEventSink } from '../events/runtime-event-log.ts';
import type { SessionLogBuffer } from '../logs/session-log-buffer.ts';
import type { SessionLogRegistry } from '../logs/session-log-registry.ts';
import { UndeclaredMessageWarner } from './undeclared-messages.ts';
import { sessionLogger } from '../logs/session-logger.ts';
import type { VideoEncoderEvents } from '../media/output-video-track.ts';
import { bindSessionSettings, SessionSettings } from '../model/settings.ts';

/** RTCP payload-specific feedback (RFC 4585) and its PLI / FIR formats (RFC 5104). */
const RTCP_PAYLOAD_SPECIFIC_FEEDBACK = 206;
const PLI_FORMAT = 1;
const FIR_FORMAT = 4;
/** Encoder restarts reported at most this often per track (the session log, the event stream). */
const ENCODER_RESTART_REPORT_INTERVAL_MS = 1000;
/** The longest delay setTimeout takes (~24.8 days); a longer one would fire at once. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** Hosted mode: how long the session may run once `ready`, and what its clients are told at the end. */
export interface DurationLimit {
  readonly ms: number;
  readonly reason: string;
}

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
}

/** What one connection has attached to one of the session's tracks, detached as a unit. */
interface TrackAttachment {
  /** Output tracks: the connection's sink. */
  sink?: VideoSink | AudioSink;
  readonly receivers: Array<VideoReceiver | AudioReceiver>;
  readonly disposers: Array<() => void>;
}

/** What one connection has attached to the session's tracks: per track, so a renegotiation in place can change one. */
interface MediaAttachment {
  readonly tracks: Map<string, TrackAttachment>;
  /** Picture loss handlers of the connection's output video senders, by sender SSRC (see bindMedia). */
  readonly pictureLossBySsrc: Map<number, () => void>;
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
  #settings: SessionSettings;
  readonly #connections = new Map<number, Connection>();
  readonly #attachments = new Map<Connection, MediaAttachment>();
  readonly #outputVideo = new Map<string, OutputVideoTrack>();
  readonly #outputAudio = new Map<string, OutputAudioTrack>();
  readonly #inputVideo = new Map<string, InputVideoTrack>();
  /** Per input track, connections that unpublished it explicitly: their late packets claim nothing. */
  readonly #unpublished = new Map<string, Set<number>>();
  readonly #inputAudio = new Map<string, InputAudioTrack>();
  readonly #messages: MessageHandler;
  readonly #facade: ModelSession<unknown>;
  /** The session's log (absent when the runtime keeps none). */
  readonly #logBuffer: SessionLogBuffer | undefined;
  readonly #undeclaredMessages = new UndeclaredMessageWarner();
  /** The process logger for this session, before teeing: the model's logger derives from it. */
  readonly #baseLog: Logger;
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
  #idleTimer: NodeJS.Timeout | undefined;
  #maxDurationTimer: NodeJS.Timeout | undefined;
  #durationLimitTimer: NodeJS.Timeout | undefined;
  #durationLimitStarted = false;
  #running: Promise<void> = Promise.resolve();
  /** A step model's lock: steps, command handlers and hooks take turns (model/step-driver.ts). */
  readonly #gate = new StepGate();
  /** What the session's model offers now (commands with their schemas, tracks): `request_schema` answers it. */
  get capabilities(): Capabilities {
    return this.#capabilities;
  }

  /** Aborts the current run loop alone (a new version of the model restarts it; see adoptModel). */
  #runAbort = new AbortController();
  #endedPromise: Promise<void> | undefined;
  /** The model version the session runs: replaced in place by adoptModel (arclight dev). */
  #model: ModelDefinition<unknown>;
  #capabilities: Capabilities;

  constructor(options: SessionOptions) {
    this.id = options.id ?? randomUUID();
    this.#options = options;
    this.#model = options.model;
    this.#baseLog = options.log.child({ session: this.id });
    this.#logBuffer = options.sessionLogs?.begin(this.id);
    // Everything logged about the session (its connections and tracks log through children of
    // this) is also kept in its log.
    this.log = this.#logBuffer ? sessionLogger(this.#baseLog, this.#logBuffer, 'runtime') : this.#baseLog;
    this.tracks = options.capabilities.tracks;
    this.#capabilities = options.capabilities;
    this.peerOptions = options.peerOptions;
    this.#latencyMode = options.latencyMode;
    for (const spec of options.model.tracks) this.#createTrack(spec);
    // One picture per recording: the named output video track, else the first one.
    const wanted = options.recordings?.trackName;
    const recorded = options.model.tracks.find((t): t is OutputVideoTrackSpec => t.kind === 'video' && t.direction === 'recvonly' && (wanted === undefined || t.name === wanted));
    if (options.recordings && wanted !== undefined && !recorded) {
      this.log.warn(`recording.track "${wanted}" is not an output video track of this model; the session is not recorded`);
    }
    const heard = options.model.tracks.find((t): t is OutputAudioTrackSpec => t.kind === 'audio' && t.direction === 'recvonly');
    if (options.recordings && recorded) {
      const recording = options.recordings.begin(
        this.id,
        { name: recorded.name, width: recorded.width, height: recorded.height, fps: options.model.fps, ...(recorded.bitrateKbps ? { bitrateKbps: recorded.bitrateKbps } : {}) },
        options.publicUrl ?? '',
        heard ? { channels: heard.channels ?? 1 } : undefined,
        (segment) => {
          this.recordEvent('info', 'recording segment written', { track: recorded.name, sequence: segment.sequence, duration_ms: Math.round(segment.durationMs) });
          options.runtimeEvents?.publish({ type: 'recording_segment', session_id: this.id, track: recorded.name, sequence: segment.sequence, duration_ms: Math.round(segment.durationMs) });
        },
      );
      this.#outputVideo.get(recorded.name)?.setFrameTap((frame, wallTimeMs) => recording.recorder.push(frame, wallTimeMs));
      if (heard) this.#outputAudio.get(heard.name)?.setFrameTap((samples, wallTimeMs) => recording.recorder.pushAudio(samples, wallTimeMs));
    }
    this.#messages = new MessageHandler(this, options.router, options.maxMessageBytes, this.log);
    this.#settings = new SessionSettings(options.model.settings);
    this.#facade = this.#createFacade(options.model.createSessionState?.() ?? ({} as unknown), this.#abort.signal);
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
    if (!this.#outputVideo.has(track)) throw new ArclightError('unknown_track', `The model has no output video track "${track}".`);
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
    return this.#outputVideo.get(name);
  }

  inputVideoTrack(name: string): InputVideoTrack | undefined {
    return this.#inputVideo.get(name);
  }

  inputAudioTrack(name: string): InputAudioTrack | undefined {
    return this.#inputAudio.get(name);
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
  async start(): Promise<void> {
    this.recordEvent('info', 'session opened', { model: this.#model.name });
    this.#options.runtimeEvents?.publish({ type: 'session_opened', session_id: this.id });
    this.#options.metrics?.sessions.inc();
    this.#options.metrics?.sessionsStarted.inc();
    if (this.#options.maxDurationMs !== undefined) {
      this.#maxDurationTimer = setTimeout(() => void this.end('max_duration'), this.#options.maxDurationMs);
    }
    this.#armIdleTimer();
    const hooks = this.#model.hooks;
    if (hooks?.session_started) {
      await callAuthorCode(this.log, 'hook session_started', () => hooks.session_started!(this.#facade), DEFAULT_HOOK_DEADLINE_MS);
    }
    this.#startRun();
  }

  /**
   * Starts the hosted maximum duration's clock at `origin` (a `performance.now()` time): the
   * session ends `durationLimit.ms` later with `durationLimit.reason`, told to every client and
   * reported to the coordinator like any end here. Once: later calls (more clients becoming
   * ready) change nothing. Without a `durationLimit` it does nothing.
   */
  startDurationLimit(origin: number): void {
    const limit = this.#options.durationLimit;
    if (!limit || this.#durationLimitStarted || this.ended) return;
    this.#durationLimitStarted = true;
    const deadline = origin + limit.ms;
    // Re-armed in steps: a limit may exceed what one setTimeout can wait.
    const arm = (): void => {
      const wait = deadline - performance.now();
      if (wait <= 0) {
        void this.end(limit.reason);
        return;
      }
      this.#durationLimitTimer = setTimeout(arm, Math.min(wait, MAX_TIMER_MS));
    };
    arm();
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
    this.#runAbort.abort(new ArclightError('session_ended', 'The model was reloaded; its run loop restarts.'));
    await Promise.race([this.#running, new Promise((resolve) => setTimeout(resolve, 2_000))]);
    this.#runAbort = new AbortController();
    this.#startRun();
    this.recordEvent('info', 'model reloaded; run loop restarted', { model: model.name });
  }

  /** Tells every ready client something about the runtime (e.g. `model_reloaded`). */
  notifyClients(body: EnvelopeBody): void {
    for (const connection of this.#connections.values()) {
      if (connection.state === 'ready') connection.sendMessage('runtime', body);
    }
  }

  #startRun(): void {
    const model = this.#model;
    const run = model.run;
    if ((!run && !model.generate) || this.ended) return;
    const runAbort = this.#runAbort;
    // The loop gets a facade whose signal and ticks also end when only this run is aborted.
    const signal = AbortSignal.any([this.#abort.signal, runAbort.signal]);
    const facade = this.#createFacade(this.#facade.state, signal);
    const running = run
      ? callAuthorCode(this.log, 'run', () => run(facade), undefined, isSessionEnded)
      : driveSteps(model, facade, this.#stepHost(), signal);
    this.#running = running.then((outcome) => {
      if (!outcome.ok && !this.ended && !runAbort.signal.aborted) void this.end('model_error');
    });
  }

  /**
   * Runs author code (a command handler, a hook) where it may run: for a step model, between
   * steps (its StepGate); for a `run` model, at once.
   */
  readonly betweenSteps = <T>(fn: () => Promise<T>): Promise<T> => (this.#model.generate ? this.#gate.between(fn) : fn());

  /** What the step driver sees of this session: its tracks, the system clock, its connections. */
  #stepHost(): StepHost {
    return {
      clock: systemClock,
      fps: this.#model.fps,
      log: this.log,
      gate: this.#gate,
      watched: () => this.#readyCount > 0,
      emitVideo: (track, frames, metadata, productionMs, timeline) => {
        if (this.ended) return Promise.reject(emitAfterEndError(this.id));
        return this.#outputVideo.get(track)!.emit(frames, undefined, metadata, productionMs, timeline);
      },
      emitAudio: async (track, frames) => {
        if (this.ended) throw emitAfterEndError(this.id);
        const audio = this.#outputAudio.get(track)!;
        for (const frame of frames) await audio.emit(frame);
      },
      // A step's audio that its video on an adaptive track keeps time with (step-driver.ts);
      // both tracks' clocks are performance.now().
      placeAudio: async (track, frames) => {
        if (this.ended) throw emitAfterEndError(this.id);
        return this.#outputAudio.get(track)!.place(frames);
      },
      trackKind: (track) => (this.#outputVideo.has(track) ? 'video' : this.#outputAudio.has(track) ? 'audio' : undefined),
    };
  }

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
    this.#endedPromise ??= this.#end(reason);
    return this.#endedPromise;
  }

  async #end(reason: string): Promise<void> {
    this.#ended = reason;
    clearTimeout(this.#idleTimer);
    clearTimeout(this.#maxDurationTimer);
    clearTimeout(this.#durationLimitTimer);
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
    for (const track of this.#outputAudio.values()) track.close();
    for (const track of this.#inputVideo.values()) track.close();
    for (const track of this.#inputAudio.values()) track.close();
    await Promise.all([...this.#outputVideo.values()].map((t) => t.close()));
    // The run loop sees the aborted signal; give it a moment to return, without waiting forever.
    await Promise.race([this.#running, new Promise((resolve) => setTimeout(resolve, 2_000))]);
    const hooks = this.#model.hooks;
    if (hooks?.session_ended) {
      await callAuthorCode(this.log, 'hook session_ended', () => hooks.session_ended!(this.#facade, reason), DEFAULT_HOOK_DEADLINE_MS);
    }
    await this.#options.recordings?.ended(this.id);
    await this.#options.uploads?.dropSession(this.id).catch((error: unknown) => this.log.warn('deleting the session\'s uploads failed', { error }));
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
    if (hook) await this.betweenSteps(() => callAuthorCode(this.log, 'hook file_uploaded', () => hook(this.#facade, file, connection.handle), DEFAULT_HOOK_DEADLINE_MS));
  }

  // ---- ConnectionOwner ----

  connectionReady(connection: Connection): void {
    if (this.ended) return;
    this.#readyCount++;
    this.#options.metrics?.connections.inc();
    this.#options.metrics?.webrtcConnectDuration.observe(connection.connectSeconds);
    clearTimeout(this.#idleTimer);
    for (const [name, { sink }] of this.#attachments.get(connection)?.tracks ?? []) {
      if (sink) this.#outputVideo.get(name)?.sinkReady(sink as VideoSink);
    }
    connection.sendMessage('runtime', { type: 'connection_info', data: { session_id: this.id, connection_id: connection.id } });
    const steps = connection.connectSteps;
    this.recordEvent('info', 'connection ready', { connection: connection.id, connect_ms: Math.round(connection.connectSeconds * 1000), ...(steps ? { steps } : {}) });
    this.#options.runtimeEvents?.publish({ type: 'connection_ready', session_id: this.id, connection_id: connection.id });
    this.#options.onConnectionReady?.(this);
    this.#gate.nudge(); // a step model waiting for a viewer starts
    const hook = this.#model.hooks?.connected;
    if (hook) void this.betweenSteps(() => callAuthorCode(this.log, 'hook connected', () => hook(this.#facade, connection.handle), DEFAULT_HOOK_DEADLINE_MS));
  }

  connectionLost(connection: Connection): void {
    if (this.ended) return;
    this.#readyCount--;
    this.#options.metrics?.connections.dec();
    this.recordEvent('info', 'connection lost', { connection: connection.id });
    this.#options.runtimeEvents?.publish({ type: 'connection_lost', session_id: this.id, connection_id: connection.id });
    this.releaseInputs(connection.id);
    this.#armIdleTimer();
    this.#gate.nudge();
    const hook = this.#model.hooks?.disconnected;
    if (hook) void this.betweenSteps(() => callAuthorCode(this.log, 'hook disconnected', () => hook(this.#facade, connection.handle), DEFAULT_HOOK_DEADLINE_MS));
  }

  messageReceived(connection: Connection, raw: string | Buffer): void {
    if (this.ended) return;
    void this.#messages.handle(connection, raw);
  }

  /**
   * Attaches output sinks and input receivers for these bindings of a connection's peer: all of
   * a freshly negotiated peer's, or those a renegotiation in place adds (beside what is there).
   */
  bindMedia(connection: Connection, bindings: readonly TrackBinding[], pausedTracks: ReadonlySet<string>): void {
    let attachment = this.#attachments.get(connection);
    if (!attachment) this.#attachments.set(connection, (attachment = { tracks: new Map(), pictureLossBySsrc: new Map() }));
    const { pictureLossBySsrc } = attachment;
    for (const { transceiver, track } of bindings) {
      const bound: TrackAttachment = { receivers: [], disposers: [] };
      attachment.tracks.set(track.name, bound);
      if (track.direction === 'recvonly') {
        const onLoss = this.#bindOutput(connection, bound, transceiver, track, pausedTracks.has(track.name));
        if (onLoss) {
          const ssrc = transceiver.sender.ssrc;
          pictureLossBySsrc.set(ssrc, onLoss);
          bound.disposers.push(() => pictureLossBySsrc.delete(ssrc));
        }
        // A sink added to a connection that is already up (a renegotiation in place) opens now.
        if (bound.sink && connection.state === 'ready') this.#outputVideo.get(track.name)?.sinkReady(bound.sink as VideoSink);
      } else {
        this.#bindInput(connection, bound, transceiver, track);
      }
      // werift routes payload-specific feedback by the *sender* SSRC first. A browser that also
      // sends video (a webcam) stamps its PLIs with that outgoing SSRC, so they land on our
      // receiver, not on the output sender they are about, and the picture would only open at the
      // next periodic keyframe. Route PLI and FIR by their media SSRC here, from every receiver.
      const { unSubscribe } = transceiver.receiver.onRtcp.subscribe((packet) => {
        const feedback = (packet as { type?: number; feedback?: { count?: number; mediaSsrc?: number } }).feedback;
        if ((packet as { type?: number }).type !== RTCP_PAYLOAD_SPECIFIC_FEEDBACK || !feedback) return;
        if (feedback.count !== PLI_FORMAT && feedback.count !== FIR_FORMAT) return;
        pictureLossBySsrc.get(feedback.mediaSsrc ?? -1)?.();
      });
      bound.disposers.push(unSubscribe);
    }
  }

  /**
   * Detaches what `bindMedia` attached for a connection: for the named tracks only (a
   * renegotiation in place ended or changed them; input claims on them are released), or all.
   */
  unbindMedia(connection: Connection, trackNames?: readonly string[]): void {
    const attachment = this.#attachments.get(connection);
    if (!attachment) return;
    const names = trackNames ?? [...attachment.tracks.keys()];
    for (const name of names) {
      const bound = attachment.tracks.get(name);
      if (!bound) continue;
      attachment.tracks.delete(name);
      if (bound.sink) {
        this.#outputVideo.get(name)?.removeSink(bound.sink as VideoSink);
        this.#outputAudio.get(name)?.removeSink(bound.sink as AudioSink);
      }
      for (const receiver of bound.receivers) receiver.close();
      for (const dispose of bound.disposers) dispose();
      if (trackNames) {
        const input = this.#inputVideo.get(name) ?? this.#inputAudio.get(name);
        if (input?.publisher === connection.id) input.publisher = undefined;
      }
    }
    if (!trackNames) this.#attachments.delete(connection);
  }

  // ---- track control, used by the message handler ----

  /** Pauses or resumes one output track for one connection. */
  setSubscribed(connection: Connection, trackName: string, subscribed: boolean): void {
    const output = this.#attachments.get(connection)?.tracks.get(trackName);
    if (!output?.sink) {
      const known = this.tracks.some((t) => t.name === trackName && t.direction === 'recvonly');
      throw new ArclightError('unknown_track', known
        ? `Output track "${trackName}" is not negotiated on this connection.`
        : `The model has no output track "${trackName}".`);
    }
    this.#outputVideo.get(trackName)?.setPaused(output.sink as VideoSink, !subscribed);
    this.#outputAudio.get(trackName)?.setPaused(output.sink as AudioSink, !subscribed);
  }

  /**
   * Claims an input track for a connection; only one connection publishes a track at a time.
   * `frameMetadata`: the publisher will annotate each video frame (`annotateInput`).
   */
  claimInput(connectionId: number, trackName: string, frameMetadata = false): void {
    const track = this.#inputVideo.get(trackName) ?? this.#inputAudio.get(trackName);
    if (!track) throw new ArclightError('unknown_track', `The model has no input track "${trackName}".`);
    if (frameMetadata && !(track instanceof InputVideoTrack)) {
      throw new ArclightError('invalid_params', `Frame metadata is carried on input video tracks; "${trackName}" is audio.`, { field: '/frame_metadata' });
    }
    const holder = track.publisher;
    if (holder !== undefined && holder !== connectionId && this.#connections.get(holder)?.state === 'ready') {
      throw new ArclightError('track_busy', `Input track "${trackName}" is published by connection ${holder}.`);
    }
    track.publisher = connectionId;
    this.#unpublished.get(trackName)?.delete(connectionId);
    if (track instanceof InputVideoTrack) track.expectAnnotations(frameMetadata);
  }

  /** Per-frame annotations from the publisher of an input video track (keyed by RTP timestamp). */
  annotateInput(connectionId: number, trackName: string, frames: ReadonlyArray<{ rtpTimestamp: number } & InputFrameAnnotation>): void {
    const track = this.#inputVideo.get(trackName);
    if (!track) throw new ArclightError('unknown_track', `The model has no input video track "${trackName}".`);
    if (track.publisher !== connectionId || !track.expectsAnnotations) {
      throw new ArclightError('not_ready', `Publish "${trackName}" with frame_metadata: true before annotating its frames.`);
    }
    for (const { rtpTimestamp, ...annotation } of frames) track.annotate(rtpTimestamp, annotation);
  }

  releaseInput(connectionId: number, trackName: string): void {
    const track = this.#inputVideo.get(trackName) ?? this.#inputAudio.get(trackName);
    if (!track) throw new ArclightError('unknown_track', `The model has no input track "${trackName}".`);
    if (track.publisher === connectionId) track.publisher = undefined;
    // Its packets still in flight (or resent on NACK) must not claim the track back.
    let unpublished = this.#unpublished.get(trackName);
    if (!unpublished) this.#unpublished.set(trackName, (unpublished = new Set()));
    unpublished.add(connectionId);
  }

  releaseInputs(connectionId: number): void {
    for (const track of [...this.#inputVideo.values(), ...this.#inputAudio.values()]) {
      if (track.publisher === connectionId) track.publisher = undefined;
    }
  }

  // ---- internals ----

  #createTrack(spec: TrackSpec): void {
    const metrics = this.#options.metrics;
    if (spec.kind === 'video' && spec.direction === 'recvonly') {
      this.#outputVideo.set(spec.name, new OutputVideoTrack(spec, this.#model.fps, this.log, metrics, this.#encoderEvents(spec.name)));
    } else if (spec.kind === 'audio' && spec.direction === 'recvonly') {
      this.#outputAudio.set(spec.name, new OutputAudioTrack(spec, this.log, metrics));
    } else if (spec.kind === 'video') {
      this.#inputVideo.set(spec.name, new InputVideoTrack(spec.name));
    } else {
      this.#inputAudio.set(spec.name, new InputAudioTrack(spec.name));
    }
  }

  /** Attaches an output; returns what to call when the client reports picture loss (video only). */
  #bindOutput(connection: Connection, bound: TrackAttachment, transceiver: RTCRtpTransceiver, track: TrackCapability, paused: boolean): (() => void) | undefined {
    const metrics = this.#options.metrics;
    const sender = connection.createTrackSender(transceiver, {
      latencyMode: () => this.#latencyMode,
      onRetransmit: (packets, bytes) => {
        metrics?.rtpRetransmitted.inc({ track: track.name }, packets);
        metrics?.rtpRetransmittedBytes.inc({ track: track.name }, bytes);
      },
      onRetransmissionsRefused: (reason, packets) => metrics?.rtpRetransmissionsRefused.inc({ track: track.name, reason }, packets),
      onKeyframeRequestThrottled: () => metrics?.keyframeRequestsThrottled.inc({ track: track.name }),
    });
    const video = this.#outputVideo.get(track.name);
    if (video) {
      const codec = sender.codec;
      if (codec !== 'h264' && codec !== 'h265' && codec !== 'vp8') {
        this.log.warn('no common video codec with client; track not sent', { track: track.name, codec });
        return undefined;
      }
      const sink: VideoSink = {
        connectionId: connection.id,
        codec,
        ...(codec === 'h264' ? { h264Profile: negotiatedH264Profile(transceiver) } : {}),
        sendFrame: (p, ts, mediaTimeMs) => sender.sendFrame(p, ts, mediaTimeMs),
        noteEmitTime: (wireTimestamp, emittedAtMs) => connection.frameTimes.note(track.name, wireTimestamp, emittedAtMs),
        estimatedBitrateKbps: () => {
          const remb = transceiver.sender.receiverEstimatedMaxBitrate;
          return remb > 0n ? Number(remb) / 1000 : undefined;
        },
        sendMetadata: (wireTimestamp, metadata) =>
          connection.sendMessage('runtime', {
            type: 'frame_metadata',
            data: { track: track.name, rtp_timestamp: wireTimestamp, metadata: encodeFrameMetadata(metadata) as JsonValue },
          }),
      };
      video.addSink(sink, { paused });
      // Keyframe requests are throttled per viewer (loss-recovery.ts); the sender also asks for
      // one itself when it leaves a NACKed loss unrepaired.
      const pictureLost = (): void => {
        if (sender.pictureLost()) video.pictureLost(sink);
      };
      sender.onKeyframeNeeded(() => {
        metrics?.lossKeyframes.inc({ track: track.name });
        video.pictureLost(sink);
      });
      const { unSubscribe } = transceiver.sender.onPictureLossIndication.subscribe(pictureLost);
      bound.sink = sink;
      bound.disposers.push(unSubscribe, () => sender.close());
      return pictureLost;
    }
    const audio = this.#outputAudio.get(track.name);
    if (audio) {
      const sink: AudioSink = { connectionId: connection.id, sendFrame: (p, ts, mediaTimeMs) => sender.sendFrame(p, ts, mediaTimeMs) };
      audio.addSink(sink, { paused });
      bound.sink = sink;
      bound.disposers.push(() => sender.close());
    }
    return undefined;
  }

  #bindInput(connection: Connection, bound: TrackAttachment, transceiver: RTCRtpTransceiver, track: TrackCapability): void {
    const inputVideo = this.#inputVideo.get(track.name);
    const inputAudio = this.#inputAudio.get(track.name);
    const spec = this.#model.tracks.find((t) => t.name === track.name);
    let receiver: VideoReceiver | AudioReceiver | undefined;
    const onRtp = (rtp: { header: { payloadType: number; marker: boolean; sequenceNumber: number; timestamp: number; ssrc: number }; payload: Buffer }): void => {
      const input = inputVideo ?? inputAudio;
      if (!input || this.ended) return;
      // A client that publishes without claiming (2.9.0) claims the track with its first packet —
      // unless it unpublished the track explicitly (then only publish_track claims it again).
      if (input.publisher === undefined && !this.#unpublished.get(track.name)?.has(connection.id)) input.publisher = connection.id;
      if (input.publisher !== connection.id) return;
      if (!receiver) {
        receiver = this.#createReceiver(connection, transceiver, track, rtp.header.payloadType, rtp.header.ssrc, spec);
        if (!receiver) return;
        bound.receivers.push(receiver);
      }
      const packet: RtpInput = {
        payload: rtp.payload,
        marker: rtp.header.marker,
        sequenceNumber: rtp.header.sequenceNumber,
        timestamp: rtp.header.timestamp,
      };
      receiver.push(packet);
    };
    const subscribeTrack = (remote: { onReceiveRtp: { subscribe: (fn: typeof onRtp) => { unSubscribe: () => void } } }): void => {
      bound.disposers.push(remote.onReceiveRtp.subscribe(onRtp).unSubscribe);
    };
    for (const remote of transceiver.receiver.tracks) subscribeTrack(remote);
    bound.disposers.push(transceiver.onTrack.subscribe((remote) => subscribeTrack(remote)).unSubscribe);
  }

  #createReceiver(
    connection: Connection,
    transceiver: RTCRtpTransceiver,
    track: TrackCapability,
    payloadType: number,
    ssrc: number,
    spec: TrackSpec | undefined,
  ): VideoReceiver | AudioReceiver | undefined {
    const mime = transceiver.codecs.find((c) => c.payloadType === payloadType)?.mimeType.toLowerCase();
    const log = this.log.child({ connection: connection.id, track: track.name });
    if (track.kind === 'audio') {
      const input = this.#inputAudio.get(track.name)!;
      const channels = spec?.kind === 'audio' ? (spec.channels ?? 1) : 1;
      return new AudioReceiver({ channels, deliver: (f: AudioFrame) => input.deliver(f), log });
    }
    const codec = mime === 'video/h264' ? 'h264' : mime === 'video/h265' ? 'h265' : mime === 'video/vp8' ? 'vp8' : undefined;
    if (!codec) {
      log.warn('input video arrives in a codec the runtime does not decode', { mime, payloadType });
      return undefined;
    }
    const input = this.#inputVideo.get(track.name)!;
    const format = spec?.kind === 'video' && spec.direction === 'sendonly' ? (spec.format ?? 'i420') : 'i420';
    return new VideoReceiver({
      codec,
      track: track.name,
      format,
      deliver: (frame: VideoFrame, rtpTimestamp: number) => input.deliver(frame, rtpTimestamp),
      requestKeyframe: () => void transceiver.receiver.sendRtcpPLI(ssrc).catch(() => {}),
      log,
      ...(this.#options.metrics ? { metrics: this.#options.metrics } : {}),
    });
  }

  #encoderEvents(track: string): VideoEncoderEvents {
    // A last-candidate encoder that fails every frame is restarted every frame: report restarts
    // at most once a second, with how many were not reported; fallbacks always.
    let restartReportedAt = -Infinity;
    let restartsUnreported = 0;
    return {
      opened: (stream, backend) => {
        this.recordEvent('info', 'video encoder opened', { track, stream, backend: backend.name, hardware: backend.hardware });
        this.#options.runtimeEvents?.publish({ type: 'encoder_opened', session_id: this.id, track, codec: stream, backend: backend.name, hardware: backend.hardware });
      },
      failed: (stream, backend, phase, action, reason) => {
        if (action === 'restart') {
          const now = performance.now();
          if (now - restartReportedAt < ENCODER_RESTART_REPORT_INTERVAL_MS) {
            restartsUnreported++;
            return;
          }
          restartReportedAt = now;
          if (restartsUnreported > 0) reason = `${reason} (${restartsUnreported} more restarts since the last report)`;
          restartsUnreported = 0;
        }
        this.recordEvent(action === 'fallback' ? 'error' : 'warn', `video encoder failed (${phase}); ${action === 'fallback' ? 'its backend is demoted' : 'a fresh one follows'}`, { track, stream, backend: backend.name, phase, action, reason });
        this.#options.runtimeEvents?.publish({ type: 'encoder_failed', session_id: this.id, track, codec: stream, backend: backend.name, phase, action, reason });
      },
    };
  }

  #armIdleTimer(): void {
    clearTimeout(this.#idleTimer);
    if (this.ended || this.liveConnections.length > 0) return;
    this.#idleTimer = setTimeout(() => {
      if (this.liveConnections.length === 0) void this.end('idle_timeout');
    }, this.#options.reconnectGraceMs);
  }

  /** `signal`: the session's, or (a run loop's facade) one that also aborts when that run is restarted. */
  #createFacade(state: unknown, signal: AbortSignal): ModelSession<unknown> {
    const session = this;
    const fps = this.#model.fps;
    const modelLog = this.#baseLog.child({ source: 'model' });
    const log = this.#logBuffer ? sessionLogger(modelLog, this.#logBuffer, 'model') : modelLog;
    return bindSessionSettings(Object.freeze({
      id: this.id,
      signal,
      state,
      get settings(): Readonly<Record<string, unknown>> {
        return session.#settings.current;
      },
      fps,
      log: { info: log.info, warn: log.warn, error: log.error },
      get connections(): readonly ConnectionHandle[] {
        return session.connections.filter((c) => c.state === 'ready').map((c) => c.handle);
      },
      emit: async (
        track: string,
        frames: EmitFrames,
        options?: EmitOptions,
      ): Promise<void> => {
        // Rejecting (rather than resolving at once) stops a loop paced only by emit() from
        // spinning; the runtime treats this rejection as a normal end.
        if (session.ended) throw emitAfterEndError(session.id);
        // A run loop replaced by a new version of the model stops here, like one whose session ended.
        if (signal.aborted) throw new ArclightError('session_ended', 'This run loop was restarted on a new version of the model; emit() is closed to it.');
        const video = session.#outputVideo.get(track);
        if (video) return video.emit(videoBatch(track, frames), options?.dropPolicy, options?.metadata);
        const audio = session.#outputAudio.get(track);
        if (audio) {
          for (const frame of audioBatch(track, frames)) await audio.emit(frame);
          return;
        }
        throw unknownOutputTrackError(track);
      },
      flush: async (track?: string): Promise<void> => {
        if (track !== undefined && !session.#outputVideo.has(track)) {
          throw new TypeError(`flush("${track}"): the model declares no output video track "${track}"`);
        }
        for (const [name, video] of session.#outputVideo) if (track === undefined || name === track) video.flush();
      },
      inputVideo: (track: string): InputVideo => {
        const input = session.#inputVideo.get(track);
        if (!input) throw new TypeError(`inputVideo("${track}"): the model declares no input video track "${track}"`);
        return input;
      },
      inputAudio: (track: string): InputAudio => {
        const input = session.#inputAudio.get(track);
        if (!input) throw new TypeError(`inputAudio("${track}"): the model declares no input audio track "${track}"`);
        return input;
      },
      broadcast: (type: string, data?: JsonValue): void => {
        session.modelMessageSent(type);
        session.broadcast({ type, ...(data === undefined ? {} : { data }) });
      },
      ticks: (rate?: number): AsyncIterable<number> => new FrameClock(rate ?? fps, signal),
      sleep: async (ms: number): Promise<void> => {
        await systemClock.sleep(ms, signal);
      },
    }), this.#settings);
  }

  broadcast(body: EnvelopeBody): void {
    for (const connection of this.#connections.values()) {
      if (connection.state === 'ready') connection.sendMessage('application', body);
    }
  }
}
