/**
 * The client's engine (as livekit's `RTCEngine` is to its `Room`): one session and the connection
 * to it — the status machine (`disconnected → connecting → waiting → ready`), connect, reconnect,
 * disconnect, the recovery of a broken link with the reconnect policy, and the session's
 * identity (session id, connection id, capabilities, last error). The link itself is
 * PeerTransport's. The features built on the engine see it through `ConnectionView`, a narrow
 * interface, and it reaches them only through `ConnectionHooks`; neither side touches the facade.
 *
 * Just over ~400 lines: one status machine (connect, recover, end), kept whole so its transitions
 * are read together.
 */

import type { Capabilities, TrackCapability } from '../protocol/capabilities.ts';
import { ArclightError } from '../protocol/errors.ts';
import type { JsonObject } from '../protocol/json-schema.ts';
import type { SessionResponse } from '../protocol/session.ts';
import type { UploadReference } from '../protocol/uploads.ts';
import {
  DEFAULT_API_URL,
  DEFAULT_LOCAL_RUNTIME_URL,
  type ArclightClientOptions,
  type ClientStatus,
  type ConnectOptions,
} from './client-types.ts';
import type { RequestScope, RequestSender } from './command-channel.ts';
import { DEFAULT_RECONNECT_POLICY, reconnectDelayMs, worthRetrying } from './connection-recovery.ts';
import { asError } from './error-coercion.ts';
import type { LostReason } from './peer-link.ts';
import { PeerTransport, type TransportHooks } from './peer-transport.ts';
import type { CommandReply } from './pending-commands.ts';
import { SessionApi } from './session-api.ts';
import type { TokenSource } from './token.ts';

/** What a feature may ask of the connection. */
export interface ConnectionView extends RequestSender {
  readonly status: ClientStatus;
  readonly sessionId: string | undefined;
  /** The session this client was last in, kept after it ends (its log stays readable a while). */
  readonly lastSessionId: string | undefined;
  readonly capabilities: Capabilities | undefined;
  /** The runtime (local mode) or the coordinator (hosted). */
  readonly baseUrl: string;
  readonly token: TokenSource | undefined;
  readonly peerConnection: RTCPeerConnection | undefined;
  /** Throws `not_ready` unless the status is `ready` with a link. */
  assertReady(what: string): void;
  /** The model's track `name` in `direction`; `unknown_track` otherwise. */
  track(name: string, direction: TrackCapability['direction']): TrackCapability;
  /** An input track's sender on the current link. */
  sender(track: string): RTCRtpSender | undefined;
  /** Sends `message()` without an outcome to wait for, only while ready; a closing channel drops it. */
  sendWhileReady(message: () => string): void;
  /** Reports an error: `lastError` and an `error` event. */
  fail(error: ArclightError): void;
  /** A SessionApi outside connect()'s abort signal: for calls that must go out whatever connect is doing. */
  standaloneApi(): SessionApi;
}

/** What the parts do at the engine's steps, besides the transport's (the facade wires them). */
export interface ConnectionHooks extends TransportHooks {
  /** connect() (`fresh`) or reconnect() passed its checks: take its options. */
  configure(options: ConnectOptions, fresh: boolean): void;
  /** The status changes; called before `statusChanged` is emitted. */
  statusChanging(): void;
  /** The session's capabilities at connect, after `capabilitiesReceived`. */
  capabilitiesReceived(capabilities: Capabilities): void;
  /** A recovery starts: what to restore once the connection is back (published tracks). */
  captureForRecovery(): () => Promise<void>;
}

export class SessionConnection implements ConnectionView {
  readonly #options: ArclightClientOptions;
  readonly #hooks: ConnectionHooks;
  readonly #transport: PeerTransport;
  readonly baseUrl: string;
  #status: ClientStatus = 'disconnected';
  #lastError: ArclightError | undefined;
  #token: TokenSource | undefined;
  #api: SessionApi | undefined;
  #abort: AbortController | undefined;
  #session: SessionResponse | undefined;
  #sessionId: string | undefined;
  #lastSessionId: string | undefined;
  #connectionId: number | undefined;
  /** True when this client attached to a session it did not create: disconnect(false) leaves it running. */
  #adopted = false;
  /** The recovery in progress (see #recover); replaced or cleared to stop it. */
  #recovery: object | undefined;
  #disconnecting = false;

  constructor(options: ArclightClientOptions, hooks: ConnectionHooks) {
    this.#options = options;
    this.#hooks = hooks;
    this.baseUrl = (options.local ? (options.localRuntimeUrl ?? DEFAULT_LOCAL_RUNTIME_URL) : (options.apiUrl ?? DEFAULT_API_URL)).replace(
      /\/+$/,
      '',
    );
    this.#transport = new PeerTransport(
      {
        rtc: options.rtc,
        iceTransportPolicy: options.iceTransportPolicy ?? 'all',
        iceGatheringTimeoutMs: options.iceGatheringTimeoutMs,
        connectTimeoutMs: options.connectTimeoutMs ?? 15_000,
        commandTimeoutMs: options.commandTimeoutMs ?? 30_000,
      },
      hooks,
      {
        connectionIdKnown: (connectionId) => this.#setConnectionId(connectionId),
        lost: (reason) => this.#onLost(reason),
        sessionEnded: (reason) => this.#onSessionEnded(reason),
        fail: (error) => this.fail(error),
      },
    );
  }

  get status(): ClientStatus {
    return this.#status;
  }
  get lastError(): ArclightError | undefined {
    return this.#lastError;
  }
  get sessionId(): string | undefined {
    return this.#sessionId;
  }
  get lastSessionId(): string | undefined {
    return this.#lastSessionId;
  }
  get connectionId(): number | undefined {
    return this.#connectionId;
  }
  get session(): SessionResponse | undefined {
    return this.#session;
  }
  get capabilities(): Capabilities | undefined {
    return this.#session?.capabilities;
  }
  get token(): TokenSource | undefined {
    return this.#token;
  }
  get peerConnection(): RTCPeerConnection | undefined {
    return this.#transport.peerConnection;
  }

  async connect(jwtToken: TokenSource | undefined, options: ConnectOptions): Promise<void> {
    if (this.#status !== 'disconnected')
      throw new ArclightError('invalid_request', `connect() needs status disconnected; it is ${this.#status}.`);
    if (jwtToken === undefined && !this.#options.local) {
      throw new ArclightError('invalid_request', 'A jwtToken is required unless the client is in local mode.');
    }
    this.#token = jwtToken;
    this.#hooks.configure(options, true);
    this.#setStatus('connecting');
    this.#api = this.#connectApi();
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
      this.#hooks.emit('capabilitiesReceived', session.capabilities);
      this.#hooks.capabilitiesReceived(session.capabilities);
      await this.#openTransport(options.connectionId, false, options.maxAttempts ?? 6);
    } catch (error) {
      const failure = asError(error, 'connection_failed');
      this.#closeTransport();
      // A session this call created would otherwise hold a GPU until it idles out.
      if (!this.#adopted && this.#sessionId !== undefined) await this.#leaveSession('end-session');
      this.#setSessionId(undefined);
      this.#setConnectionId(undefined);
      this.#session = undefined;
      this.fail(failure);
      this.#setStatus('disconnected');
      throw failure;
    }
  }

  async disconnect(recoverable: boolean): Promise<void> {
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

  async restartIce(): Promise<void> {
    this.assertReady('restartIce');
    await this.#recover('requested');
  }

  async reconnect(options: ConnectOptions): Promise<void> {
    if (this.#status !== 'disconnected')
      throw new ArclightError('invalid_request', `reconnect() needs status disconnected; it is ${this.#status}.`);
    if (this.#sessionId === undefined || !this.#api) {
      throw new ArclightError('invalid_request', 'reconnect() needs a session kept by disconnect(true).');
    }
    this.#hooks.configure(options, false);
    this.#api = this.#connectApi();
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
      this.fail(failure);
      this.#setStatus('disconnected');
      throw failure;
    }
  }

  // ---- ConnectionView ----

  request(
    scope: RequestScope,
    type: string,
    data: JsonObject,
    uploads?: Record<string, UploadReference>,
  ): Promise<CommandReply | undefined> {
    return this.#transport.commands.request(scope, type, data, uploads);
  }

  assertReady(what: string): void {
    if (this.#status !== 'ready' || !this.#transport.isOpen)
      throw new ArclightError('not_ready', `${what}() needs status ready; it is ${this.#status}.`);
  }

  track(name: string, direction: TrackCapability['direction']): TrackCapability {
    const tracks = this.#session?.capabilities.tracks ?? [];
    const track = tracks.find((t) => t.name === name);
    if (!track || track.direction !== direction) {
      const candidates = tracks.filter((t) => t.direction === direction).map((t) => t.name);
      throw new ArclightError(
        'unknown_track',
        `The model has no ${direction === 'sendonly' ? 'input' : 'output'} track "${name}". ${direction === 'sendonly' ? 'Inputs' : 'Outputs'}: ${candidates.join(', ') || '(none)'}.`,
      );
    }
    return track;
  }

  sender(track: string): RTCRtpSender | undefined {
    return this.#transport.sender(track);
  }

  sendWhileReady(message: () => string): void {
    if (this.#status !== 'ready' || !this.#transport.isOpen) return;
    const text = message();
    try {
      this.#transport.send(text);
    } catch {
      // the channel is closing; the connection-lost path takes over
    }
  }

  fail(error: ArclightError): void {
    this.#lastError = error;
    this.#hooks.emit('error', error);
  }

  standaloneApi(): SessionApi {
    return new SessionApi({
      baseUrl: this.baseUrl,
      local: this.#options.local ?? false,
      modelName: this.#options.modelName,
      token: this.#token,
    });
  }

  // ---- internals ----

  /** A SessionApi under a fresh abort signal, which closing the transport aborts. */
  #connectApi(): SessionApi {
    this.#abort = new AbortController();
    return new SessionApi({
      baseUrl: this.baseUrl,
      local: this.#options.local ?? false,
      modelName: this.#options.modelName,
      token: this.#token,
      signal: this.#abort.signal,
    });
  }

  async #openTransport(connectionId: number | undefined, renegotiate: boolean, maxAttempts: number): Promise<void> {
    await this.#transport.open(this.#api!, this.#sessionId!, this.#session!.capabilities, connectionId, renegotiate, maxAttempts);
    this.#setStatus('ready');
  }

  /** Closes the peer and fails what waited on it; the session is untouched. */
  #closeTransport(): void {
    this.#abort?.abort(new ArclightError('connection_failed', 'Disconnected.'));
    this.#transport.close();
  }

  #onSessionEnded(reason: string): void {
    if (this.#disconnecting) return; // our own disconnect(false) ended it
    this.#lastError = new ArclightError('session_ended', `The session ended: ${reason}.`);
    this.#hooks.emit('sessionEnded', reason);
    // Not from inside the data channel's callback: closing the peer there is unsafe in wrtc.
    setTimeout(() => this.#endedByServer(), 0);
  }

  #endedByServer(): void {
    if (this.#sessionId === undefined) return;
    this.#closeTransport();
    this.#setSessionId(undefined);
    this.#session = undefined;
    this.#setConnectionId(undefined);
    this.#setStatus('disconnected');
  }

  #onLost(reason: LostReason): void {
    if (this.#disconnecting) return;
    if (this.#sessionId !== undefined && this.#options.autoReconnect !== false) {
      this.#recover(reason).catch(() => {}); // a failure is reported as an error event
      return;
    }
    // The connection dropped without a session end: keep the session so reconnect() can resume.
    this.#closeTransport();
    if (this.#sessionId !== undefined)
      this.fail(new ArclightError('connection_failed', 'The connection to the runtime was lost; reconnect() to resume the session.'));
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
    const republish = this.#hooks.captureForRecovery();
    this.#closeTransport();
    this.#setStatus('connecting');
    let failure = new ArclightError('connection_failed', `The connection to the runtime was lost (${reason}).`);
    let attempts = 0;
    for (let attempt = 1; attempt <= policy.maxAttempts; attempt++) {
      attempts = attempt;
      const delayMs = reconnectDelayMs(attempt, policy);
      this.#hooks.emit('reconnecting', { attempt, maxAttempts: policy.maxAttempts, delayMs, reason });
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      if (this.#recovery !== recovery) return;
      this.#api = this.#connectApi();
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
      this.#hooks.emit('reconnected', { attempts: attempt, downtimeMs: Math.round(performance.now() - lostAt) });
      await republish();
      return;
    }
    this.#recovery = undefined;
    if (failure.code === 'session_ended' || failure.code === 'session_not_found') this.#setSessionId(undefined);
    const gaveUp = new ArclightError(
      failure.code,
      `The connection was lost (${reason}) and ${attempts} attempt(s) to renegotiate it failed: ${failure.message}`,
      {
        cause: failure,
        ...(failure.status !== undefined ? { status: failure.status } : {}),
      },
    );
    this.fail(gaveUp);
    this.#setStatus('disconnected');
    throw gaveUp;
  }

  /** Ends the session (its creator) or retires this connection (a guest); failures are reported, not thrown. */
  async #leaveSession(mode: 'end-session' | 'close-connection'): Promise<void> {
    const sessionId = this.#sessionId;
    if (sessionId === undefined) return;
    // A fresh API object: the connect-time one may be aborted.
    const api = this.standaloneApi();
    try {
      if (mode === 'end-session') await api.endSession(sessionId);
      else if (this.#connectionId !== undefined) await api.closeConnection(sessionId, this.#connectionId);
    } catch (error) {
      this.fail(asError(error, 'internal_error'));
    }
  }

  #setStatus(status: ClientStatus): void {
    if (this.#status === status) return;
    this.#status = status;
    this.#hooks.statusChanging();
    this.#hooks.emit('statusChanged', status);
  }

  #setSessionId(sessionId: string | undefined): void {
    if (this.#sessionId === sessionId) return;
    this.#sessionId = sessionId;
    if (sessionId !== undefined) this.#lastSessionId = sessionId;
    this.#hooks.emit('sessionIdChanged', sessionId);
  }

  #setConnectionId(connectionId: number | undefined): void {
    if (this.#connectionId === connectionId) return;
    this.#connectionId = connectionId;
    this.#hooks.emit('connectionIdChanged', connectionId);
  }
}
