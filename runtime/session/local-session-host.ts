/**
 * Local mode: the runtime is its own coordinator for one session at a time (one runtime = one
 * GPU = one session). `/start_session` opens it, `/stop_session` ends it; several connections
 * may share it.
 *
 * Starting while a session is open: if any client is connected (or connecting) the request is
 * refused with 409 `session_conflict`, so a second browser tab cannot kill the first one's
 * session; if nobody is connected, the stale session is ended (`replaced`) and a new one starts,
 * so a developer who closed a tab without stopping is never locked out.
 */

import type { Capabilities } from '../../protocol/capabilities.ts';
import { ArclightError } from '../../protocol/errors.ts';
import type { SessionResponse } from '../../protocol/session.ts';
import type { LatencyMode } from '../../protocol/messages.ts';
import { SERVER_VERSION, WEBRTC_VERSION } from '../../protocol/versions.ts';
import type { Logger } from '../../server-kit/log.ts';
import type { EncoderBackendRegistry } from '../media/encoder-backends.ts';
import type { PeerConnection } from '../transport/peer-connection.ts';
import type { RuntimeMetrics } from '../metrics.ts';
import type { CommandRouter } from '../model/command-router.ts';
import type { ModelDefinition } from '../model/definition.ts';
import type { PeerFactoryOptions } from '../transport/signalling/peer-factory.ts';
import type { UploadStore } from '../uploads/upload-store.ts';
import type { RecordingRegistry } from '../recording/recording-registry.ts';
import type { SessionLogRegistry } from '../logs/session-log-registry.ts';
import type { RuntimeEventSink } from '../events/runtime-event-log.ts';
import { Session, type DurationLimit } from './session.ts';
import type { JsonValue } from '../../protocol/json-schema.ts';
import type { BitrateBounds } from '../media/video-bitrate-adaptation.ts';

/** Whether a session's tracks and frame rate — what its peers and encoders were built for — are the same in both versions. */
function sameMedia(before: ModelDefinition<unknown>, after: ModelDefinition<unknown>): boolean {
  return before.fps === after.fps && JSON.stringify(before.tracks) === JSON.stringify(after.tracks);
}

export interface SessionHostOptions {
  readonly model: ModelDefinition<unknown>;
  readonly router: CommandRouter;
  readonly capabilities: Capabilities;
  readonly peerOptions: PeerFactoryOptions;
  /** Makes each connection's peer (the transport): `createWeriftPeerConnection` in the runtime. */
  readonly createPeer: (options: PeerFactoryOptions) => PeerConnection;
  /** Which encoder serves each codec: the runtime's registry. */
  readonly encoderBackends?: EncoderBackendRegistry;
  readonly log: Logger;
  readonly metrics?: RuntimeMetrics;
  readonly reconnectGraceMs: number;
  readonly maxDurationMs?: number;
  readonly maxMessageBytes: number;
  readonly latencyMode: LatencyMode;
  /** Network adaptation's bounds for every session's video (RuntimeOptions `video`); default ADAPTATION's. */
  readonly videoBitrate?: BitrateBounds;
  /** Hosted mode: told when a session gets a ready client and when it ends. */
  readonly events?: SessionHostEvents;
  /** Where sessions keep uploaded files. */
  readonly uploads?: UploadStore;
  /** Records sessions for clips (absent: recording off). */
  readonly recordings?: RecordingRegistry;
  /** Keeps each session's log. */
  readonly sessionLogs?: SessionLogRegistry;
  /** The runtime's event stream. */
  readonly runtimeEvents?: RuntimeEventSink;
}

export interface SessionHostEvents {
  connectionReady(session: Session): void;
  ended(session: Session, reason: string): void;
}

/** What `adoptModel` did with the open session. */
export type ModelAdoption = 'no_session' | 'kept' | 'ended';

export class LocalSessionHost {
  readonly #options: SessionHostOptions;
  /** The model version new sessions get; replaced by adoptModel (arclight dev). */
  #model: ModelDefinition<unknown>;
  #router: CommandRouter;
  #capabilities: Capabilities;
  #current: Session | undefined;
  /** The open session's start (its model's setup), which a repeated start of the same id awaits. */
  #starting: Promise<void> | undefined;
  /** Ended sessions are remembered briefly so their id answers 410 rather than 404. */
  readonly #ended = new Map<string, string>();

  constructor(options: SessionHostOptions) {
    this.#options = options;
    this.#model = options.model;
    this.#router = options.router;
    this.#capabilities = options.capabilities;
  }

  /**
   * A new version of the model: new sessions get it, and the open one runs it in place when its
   * tracks and fps are unchanged (Session.adoptModel: same session, state kept, run restarted;
   * its clients are told `model_reloaded` with the new capabilities). Otherwise the open session
   * ends with reason `model_reloaded` — its media no longer matches — and clients start anew.
   */
  async adoptModel(model: ModelDefinition<unknown>, router: CommandRouter, capabilities: Capabilities): Promise<ModelAdoption> {
    const compatible = sameMedia(this.#model, model);
    this.#model = model;
    this.#router = router;
    this.#capabilities = capabilities;
    const session = this.#current;
    if (!session || session.ended) return 'no_session';
    if (!compatible) {
      await session.end('model_reloaded');
      return 'ended';
    }
    await session.adoptModel(model, router, capabilities);
    session.notifyClients({ type: 'model_reloaded', data: { capabilities: capabilities as unknown as JsonValue } });
    return 'kept';
  }

  get current(): Session | undefined {
    return this.#current;
  }

  /**
   * Opens a session. Hosted mode gives the coordinator's `id` and its reconnect window (how long
   * the session outlives its last client), which override the runtime's own, and the session's
   * maximum duration counted from `ready` (`durationLimit`; see Session.startDurationLimit).
   */
  async start(
    id?: string,
    overrides: { readonly reconnectGraceMs?: number; readonly publicUrl?: string; readonly durationLimit?: DurationLimit } = {},
  ): Promise<Session> {
    const existing = this.#current;
    if (id !== undefined && existing && !existing.ended && existing.id === id) {
      // The coordinator asked again for the session already open here (a retry after a lost
      // answer, or a second placement pass): the same session, not a replacement.
      await this.#starting;
      return existing;
    }
    if (id !== undefined && this.#ended.has(id)) {
      throw new ArclightError('session_ended', `Session ${id} has ended (${this.#ended.get(id)}); it is not opened again.`);
    }
    if (existing && !existing.ended) {
      if (existing.liveConnections.length > 0) {
        throw new ArclightError(
          'session_conflict',
          `Session ${existing.id} is open with connected clients. Stop it first (POST /stop_session) or attach to it with its session id.`,
        );
      }
      await existing.end('replaced');
    }
    const events = this.#options.events;
    const session = new Session({
      ...this.#options,
      model: this.#model,
      router: this.#router,
      capabilities: this.#capabilities,
      ...(id === undefined ? {} : { id }),
      ...(overrides.reconnectGraceMs === undefined ? {} : { reconnectGraceMs: overrides.reconnectGraceMs }),
      ...(overrides.publicUrl === undefined ? {} : { publicUrl: overrides.publicUrl }),
      ...(overrides.durationLimit === undefined ? {} : { durationLimit: overrides.durationLimit }),
      onEnded: (ended, reason) => {
        this.#remember(ended.id, reason);
        if (this.#current === ended) this.#current = undefined;
        events?.ended(ended, reason);
      },
      ...(events ? { onConnectionReady: (ready: Session) => events.connectionReady(ready) } : {}),
    });
    this.#current = session;
    this.#starting = session.start();
    await this.#starting;
    return session;
  }

  /** The open session with this id. */
  get(sessionId: string): Session {
    const session = this.#current;
    if (session && session.id === sessionId) {
      // While a session is ending (hooks and teardown can take seconds) its id already answers 410.
      if (session.ended) throw new ArclightError('session_ended', `Session ${sessionId} has ended (${session.endReason}).`);
      return session;
    }
    const reason = this.#ended.get(sessionId);
    if (reason !== undefined) throw new ArclightError('session_ended', `Session ${sessionId} has ended (${reason}).`);
    throw new ArclightError('session_not_found', `No open session has id "${sessionId}".`);
  }

  /** Ends the open session (the given one, when an id is given). */
  async stop(sessionId: string | undefined, reason: string, options: { readonly refuseLateStart?: boolean } = {}): Promise<Session> {
    if (options.refuseLateStart && sessionId !== undefined && this.#current?.id !== sessionId && !this.#ended.has(sessionId)) {
      // Ended before it was opened here: the coordinator's start may still be on its way (a
      // client ended the session while it was being placed). Remembered, so that start is
      // refused (410) instead of opening a session nobody will end.
      this.#remember(sessionId, reason);
    }
    const session = sessionId === undefined ? this.#current : this.get(sessionId);
    if (!session || session.ended) throw new ArclightError('session_not_found', 'No session is open.');
    await session.end(reason);
    return session;
  }

  async close(): Promise<void> {
    if (this.#current) await this.#current.end('shutdown');
  }

  describe(session: Session): SessionResponse {
    return {
      session_id: session.id,
      state: session.ended ? 'CLOSED' : 'ACTIVE',
      cluster: 'local',
      model: { name: this.#model.name, ...(this.#model.version ? { version: this.#model.version } : {}) },
      server_info: { server_version: SERVER_VERSION },
      selected_transport: { protocol: 'webrtc', version: WEBRTC_VERSION },
      capabilities: this.#capabilities,
      created_at: session.createdAt,
      connections: session.connections.filter((c) => c.state === 'ready').map((c) => c.id),
      latency_mode: session.latencyMode,
    };
  }

  #remember(sessionId: string, reason: string): void {
    this.#ended.set(sessionId, reason);
    // Bounded memory: keep the last 100 ended ids.
    if (this.#ended.size > 100) this.#ended.delete(this.#ended.keys().next().value as string);
  }
}
