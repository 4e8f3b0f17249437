/**
 * `startRuntime()` — the per-GPU runtime process: hosts one model, serves HTTP (sessions,
 * signalling, /schema, /metrics, /health, the playground) and the WebRTC media behind it.
 *
 * @example
 * ```ts
 * import { startRuntime } from 'arclight/runtime';
 * import model from './my-model.ts';
 * const runtime = await startRuntime({ model, port: 8080 });
 * console.log(runtime.url); // http://127.0.0.1:8080
 * await runtime.close();
 * ```
 */

import { mkdtemp, rm } from 'node:fs/promises';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serve, type ServerType } from '@hono/node-server';
import { Hono } from 'hono';
import { cors } from 'hono/cors';
import type { Capabilities } from '../protocol/capabilities.ts';
import { ArclightError } from '../protocol/errors.ts';
import { MAX_MESSAGE_BYTES, type LatencyMode } from '../protocol/messages.ts';
import type { IceServerEntry } from '../protocol/transport.ts';
import {
  API_ACCEPT_VERSION_HEADER,
  API_VERSION_HEADER,
  SERVER_VERSION,
  WEBRTC_VERSION_HEADER,
} from '../protocol/versions.ts';
import { createErrorHandler, notFound } from '../server-kit/http-errors.ts';
import { outlastClientIdleTimeouts } from '../server-kit/keep-alive.ts';
import { playgroundRoutes, type PlaygroundHostedOptions } from './http/playground-routes.ts';
import { sessionRoutes } from './http/session-routes.ts';
import { transportRoutes } from './http/transport-routes.ts';
import { uploadRoutes } from './http/upload-routes.ts';
import { clipRoutes } from './http/clip-routes.ts';
import { RecordingRegistry, type RecordingSettings } from './recording/recording-registry.ts';
import { LocalDiskStorage, type RecordingStorage } from './recording/recording-storage.ts';
import { DEFAULT_SEGMENT_SECONDS } from './recording/track-recorder.ts';
import { UploadStore, type UploadLimits } from './uploads/upload-store.ts';
import { UrlSigner } from './uploads/url-signer.ts';
import { createLogger, type Logger } from '../server-kit/log.ts';
import { RuntimeMetrics } from './metrics.ts';
import { callAuthorCode, installProcessGuards } from './model/author-code.ts';
import { CommandRouter } from './model/command-router.ts';
import { modelCapabilities } from './model/model-capabilities.ts';
import type { ModerationOptions } from './moderation/moderator.ts';
import type { ModelDefinition } from './model/definition.ts';
import { validateModelDefinition } from './model/validate-definition.ts';
import { ModelSlot, type ServedModel } from './model/model-slot.ts';
import { describeLoadError } from './model/load-error.ts';
import type { ModelLoadErrorInfo } from '../protocol/session-logs.ts';
import { buildOpenApi } from './openapi.ts';
import { LocalSessionHost } from './session/local-session-host.ts';
import { CoordinatorLink, type HostedOptions } from './hosted/coordinator-link.ts';
import { hostedRoutes, localSessionsClosed, requireRuntimeSecret } from './http/hosted-routes.ts';
import { IcePolicy, type IcePolicyOptions } from './webrtc/ice-policy.ts';
import { TurnCredentialIssuer, type TurnOptions } from './webrtc/turn-credentials.ts';
import { prepareDtlsCertificate, type PeerFaults, type VideoCodecPreference } from './webrtc/peer-factory.ts';
import { describeEncoderBackendSelection, listEncoderBackends } from './media/encoder-backends.ts';
import { nativeAddonStatus } from './native/native-addon.ts';
import { RuntimeEventLog } from './events/runtime-event-log.ts';
import { SessionLogRegistry, type SessionLogSettings } from './logs/session-log-registry.ts';
import { sessionLogRoutes } from './http/session-log-routes.ts';
import { eventRoutes } from './http/event-routes.ts';

export interface RuntimeOptions {
  readonly model: ModelDefinition<never>;
  /** HTTP port; 0 picks a free one. Default 8080. */
  readonly port?: number;
  /** HTTP listen address. Default 127.0.0.1. */
  readonly host?: string;
  /**
   * ICE: which addresses and UDP ports the runtime's peers use and advertise, and the STUN/TURN
   * servers clients get from `GET .../transport/webrtc/ice_servers` (see RuntimeIceOptions and
   * docs/operations.md "Media reachability (TURN)"). Default: every interface, any free port,
   * no servers.
   */
  readonly ice?: RuntimeIceOptions;
  /**
   * Video latency mode for every session: `realtime` (browsers render each frame as soon as it
   * is decoded: lowest latency, no smoothing) or `smooth` (bounded buffering for lossy links).
   * Default: the model's `latencyMode`, else `smooth`. Sessions can switch at run time.
   */
  readonly latencyMode?: LatencyMode;
  /**
   * Origins allowed to call the runtime from a browser page served elsewhere (CORS). Default
   * `*`: a local runtime is a development server, and nothing it serves depends on cookies.
   * Operators behind a coordinator can pin this to their app's origin.
   */
  readonly corsOrigins?: '*' | readonly string[];
  /** Serve the playground at `/`. Default true. */
  readonly playground?: boolean;
  /**
   * Lets the playground also connect in hosted mode, through this coordinator, with tokens the
   * runtime mints for the page (`POST /playground/token`; the API key stays in this process).
   * Default: local mode only. `arclight stack` sets it (dev/local-stack.ts).
   */
  readonly playgroundHosted?: PlaygroundHostedOptions;
  /** A session with no connected client ends after this long. Default 60 s. */
  readonly reconnectGraceSeconds?: number;
  /** Ends every session this long after it starts. Default: no limit in local mode. */
  readonly maxSessionSeconds?: number;
  /** Largest data-channel message accepted. Default 256 KiB. */
  readonly maxMessageBytes?: number;
  readonly logger?: Logger;
  /** @internal Deliberate network impairments on every peer, for tests (see PeerFaults). Default none. */
  readonly faults?: PeerFaults;
  /**
   * Output video codecs in order of preference; each client gets the first one it offers.
   * Default: H.264 then VP8, with H.265 first when a hardware H.265 encoder was found.
   */
  readonly videoCodecs?: readonly VideoCodecPreference[];
  /**
   * Hosted mode: register with a coordinator, which opens sessions here and relays clients'
   * transport calls (docs/coordinator.md). The local session endpoints close, and session paths
   * need the runtime secret. Default: local mode.
   */
  readonly hosted?: HostedOptions;
  /**
   * Uploads (`POST /sessions/{id}/uploads`, presigned PUT/GET): size and type limits, and where
   * files are kept (default a fresh folder under the OS temp dir, removed at close).
   */
  readonly uploads?: UploadLimits & {
    readonly directory?: string;
    /** Milliseconds since the epoch for URL expiry; default `Date.now` (tests move it). */
    readonly now?: () => number;
  };
  /**
   * Checks the free-text parameters a model marked `moderated()` with this moderator before
   * the command runs (docs/model-authors.md "Moderation"). Default: nothing is moderated.
   */
  readonly moderation?: ModerationOptions;
  /**
   * Records one output video track of each session (the first, or `recording.track`) with the
   * first output audio track as fMP4 HLS segments (H.264 + AAC, ~4 s) for
   * requestClip/requestRecording. It costs one more encode per frame, so it is opt-in here;
   * `arclight serve` turns it on (`--no-recording` to skip). Default: off.
   */
  readonly recording?: RecordingOptions;
  /**
   * Each session's log — its model's `session.log` lines and the runtime's account of the session
   * (connections, commands with outcome and latency, errors, recording, why it ended) — readable
   * with the session's credentials (`GET /sessions/{id}/logs`, `…/logs/stream`). Bounds default to
   * 10,000 lines or 10 MB; after the session ends it stays as long as its recording would (five
   * minutes), on the recording's clock unless `now` is given.
   */
  readonly sessionLogs?: SessionLogSettings;
  /**
   * Development mode (`arclight dev`): also serves `GET /dev/status` — the model version serving
   * and the last load error (`model_load_failed`, with file and line) — for the playground and
   * tools. Default off.
   */
  readonly dev?: boolean;
}

/** What `Runtime.reloadModel` did. */
export type ModelReloadOutcome =
  /** The new version serves; `sessions`: the open session runs it in place (`kept`), ended with reason `model_reloaded` (`ended`, its tracks or fps changed), or there was none. */
  | { readonly ok: true; readonly version: number; readonly sessions: 'no_session' | 'kept' | 'ended'; readonly loadMs: number }
  /** It could not be loaded; the previous version keeps serving. */
  | { readonly ok: false; readonly error: ModelLoadErrorInfo };

/** `RuntimeOptions.ice`. */
export interface RuntimeIceOptions extends IcePolicyOptions {
  /**
   * Servers handed to every client as they are (e.g. a public STUN server, or a TURN server with
   * fixed credentials). The runtime's own peers use them too. Default none.
   */
  readonly servers?: readonly IceServerEntry[];
  /**
   * A TURN server sharing a secret with the runtime (coturn `use-auth-secret` +
   * `static-auth-secret`): each `ice_servers` response adds an entry for `urls` with a fresh
   * credential valid for `ttlSeconds` (username `<unix expiry>:<session id>`, password
   * base64(HMAC-SHA1(secret, username))). The secret never leaves the process. Clients behind
   * restrictive networks (or with `iceTransportPolicy: 'relay'`) then reach the runtime through
   * the TURN server, which must be able to send UDP to the runtime's host candidates. The
   * runtime's own peers do not allocate on it. Default: no TURN entry.
   */
  readonly turn?: TurnOptions;
}

export interface RecordingOptions extends Omit<RecordingSettings, 'storage'> {
  /** Default: local disk under `directory` (default a fresh folder in the OS temp dir, removed at close). */
  readonly storage?: RecordingStorage;
  readonly directory?: string;
  /** Milliseconds since the epoch (the 5-minute window after a session ends); tests move it. */
  readonly now?: () => number;
}

export type RuntimeState = 'loading' | 'available' | 'serving' | 'terminated';

export interface Runtime {
  readonly url: string;
  readonly port: number;
  /** @internal The runtime's Prometheus registry (what `GET /metrics` serves); for tests and tools. */
  readonly metrics: RuntimeMetrics;
  /** @internal The session host; for tests and tools, not a stable API. */
  readonly sessions: LocalSessionHost;
  /** @internal What `GET /events` streams: the runtime's state changes. */
  readonly events: RuntimeEventLog;
  /** @internal Every session's log (what `GET /sessions/{id}/logs` reads). */
  readonly sessionLogs: SessionLogRegistry;
  readonly state: RuntimeState;
  /** Resolves when the model's `load()` has finished (or failed). */
  readonly loaded: Promise<void>;
  /** Why the model's last version could not be loaded; undefined once a version loads. */
  readonly lastLoadError: ModelLoadErrorInfo | undefined;
  /**
   * Serves a new version of the model without restarting (what `arclight dev` does on each save).
   * Its `load()` runs first (the runtime reports `loading`; the old version serves meanwhile). Then,
   * if its tracks and fps are unchanged, the open session is kept: commands go to the new handlers
   * at once, new hooks apply, its run loop restarts on the new definition with `session.state`
   * kept, and its clients get a `model_reloaded` runtime message with the new capabilities.
   * Otherwise the open session ends with reason `model_reloaded`. An invalid definition or a
   * failing `load()` keeps the old version serving and resolves `{ ok: false, error }` (also
   * `lastLoadError`, and a `model_load` event with phase `failed`). Reloads run one at a time.
   * Meant for local mode: a hosted runtime's coordinator keeps the capabilities it registered with.
   */
  reloadModel(definition: ModelDefinition<never>): Promise<ModelReloadOutcome>;
  /**
   * Records that a new version of the model could not even be imported (a syntax or import error
   * found by whoever imports it, e.g. `arclight dev`): it becomes `lastLoadError` and a `model_load`
   * event (phase `failed`). The current version keeps serving. Returns what was recorded.
   */
  reportModelError(error: unknown): ModelLoadErrorInfo;
  /**
   * Hosted mode, on SIGTERM: takes no new sessions (the coordinator hears at once) and resolves
   * when the open session has ended or after `deadlineMs`. Local mode: resolves at once.
   */
  drain(deadlineMs: number): Promise<void>;
  close(): Promise<void>;
}

/** While the model loads, a `model_load` event says it still is this often. */
const MODEL_LOAD_PROGRESS_MS = 5_000;

/** How long close() lets a hosted runtime's last reports (its session's end) reach the coordinator. */
const CLOSE_REPORT_GRACE_MS = 2_000;

/** Every route and its methods: any other method on these paths gets 405 with an Allow header. */
const ROUTE_METHODS: Readonly<Record<string, readonly string[]>> = {
  '/health': ['GET'],
  '/metrics': ['GET'],
  '/schema': ['GET'],
  '/capabilities': ['GET'],
  '/start_session': ['POST'],
  '/stop_session': ['POST'],
  '/session': ['GET'],
  '/sessions/:sid': ['GET', 'DELETE'],
  '/sessions/:sid/transport/webrtc/ice_servers': ['GET'],
  '/sessions/:sid/transport/webrtc/connections': ['POST'],
  '/sessions/:sid/transport/webrtc/connections/:cid': ['DELETE'],
  '/sessions/:sid/transport/webrtc/connections/:cid/sdp_params': ['GET', 'POST', 'PUT'],
  '/sessions/:sid/transport/webrtc/sdp_params': ['GET', 'POST', 'PUT'],
  '/sessions/:sid/uploads': ['POST'],
  '/sessions/:sid/uploads/:id': ['GET', 'PUT'],
  '/sessions/:sid/clips/:clip/playlist.m3u8': ['GET'],
  '/sessions/:sid/recording/:track/:file': ['GET'],
  '/sessions/:sid/logs': ['GET'],
  '/sessions/:sid/logs/stream': ['GET'],
  '/events': ['GET'],
  '/hosted/sessions': ['POST'],
  '/hosted/sessions/:sid': ['DELETE'],
};

function rejectOtherMethods(app: Hono, playground: boolean, dev: boolean): void {
  const routes = { ...ROUTE_METHODS, ...(playground ? { '/': ['GET'] } : {}), ...(dev ? { '/dev/status': ['GET'] } : {}) };
  for (const [path, methods] of Object.entries(routes)) {
    // Registered after the real handlers, so it only runs when none of them matched the method.
    app.all(path, (c) => {
      const error = new ArclightError('method_not_allowed', `${c.req.method} is not allowed on ${c.req.path}; use ${methods.join(' or ')}.`);
      return c.json(error.toBody(), 405, { Allow: [...methods, 'OPTIONS'].join(', ') });
    });
  }
}

/** @internal What a client is told about the model at connect (tracks, commands, messages, schema hash). */
export function capabilitiesOf(model: ModelDefinition<unknown>, router: CommandRouter): Capabilities {
  return modelCapabilities(model, router.capabilities());
}

export async function startRuntime(options: RuntimeOptions): Promise<Runtime> {
  const model = validateModelDefinition(options.model, `model "${(options.model as { name?: string }).name ?? '?'}"`);
  const log = (options.logger ?? createLogger()).child({ model: model.name });
  installProcessGuards(log);
  const metrics = new RuntimeMetrics();
  const events = new RuntimeEventLog();
  // Each version of the model, with what is derived from it; the first is built here and a bad
  // schema still fails the start, as before.
  const buildServedModel = (definition: ModelDefinition<unknown>, version: number): ServedModel => {
    const router = new CommandRouter(definition.commands ?? {}, log, metrics, options.moderation);
    const capabilities = capabilitiesOf(definition, router);
    return { definition, router, capabilities, openApi: buildOpenApi(definition, capabilities), version };
  };
  const slot = new ModelSlot(buildServedModel(model, 1));
  const { router, capabilities } = slot.current;
  const iceServers = options.ice?.servers ?? [];
  // Checked here, so a bad ICE configuration fails the start, not a client's first request.
  const icePolicy = new IcePolicy(options.ice);
  const turn = options.ice?.turn ? new TurnCredentialIssuer(options.ice.turn) : undefined;
  const clientIceServers = (sessionId: string): readonly IceServerEntry[] => (turn ? [...iceServers, turn.issue(sessionId)] : iceServers);
  // The process's DTLS certificate, made now rather than during the first client's connect.
  await prepareDtlsCertificate();
  // Which encoder serves each codec is decided once, here, by opening the candidates.
  const backends = await listEncoderBackends();
  for (const listing of backends) {
    if (listing.backend) {
      metrics.encoderBackend.set({ codec: listing.codec, backend: listing.backend.name, hardware: String(listing.backend.hardware) }, 1);
    }
  }
  log.info('encoder backends', { selection: backends.map(describeEncoderBackendSelection) });
  events.publish({
    type: 'encoder_backends',
    selection: backends.map((b) => ({ codec: b.codec, backend: b.backend?.name ?? null, hardware: b.backend?.hardware ?? false })),
  });
  const native = nativeAddonStatus();
  // Without the addon, neither native colour conversion nor the allocator trim after an encoder is freed (native/allocator.ts).
  log.info('native addon', native.loaded ? { loaded: true, version: native.version } : { loaded: false, reason: native.reason, colour_conversion: 'JavaScript', allocator_trim: false });
  const hardwareH265 = backends.some((b) => b.codec === 'h265' && b.backend?.hardware);
  const videoCodecs = options.videoCodecs ?? (hardwareH265 ? ['h265', 'h264', 'vp8'] : ['h264', 'vp8']);
  const uploadDirectory = options.uploads?.directory ?? (await mkdtemp(join(tmpdir(), 'arclight-uploads-')));
  const uploads = new UploadStore(uploadDirectory, options.uploads);
  const urlSigner = new UrlSigner(options.uploads?.now ? { now: options.uploads.now } : {});
  const recording = options.recording;
  // A track name the model does not have would leave every session unrecorded: fail the start,
  // where the operator sees it, not each clip request. (A model reloaded by `arclight dev` without
  // that track is only warned about, per session: the runtime keeps serving.)
  if (recording?.track !== undefined && !model.tracks.some((t) => t.kind === 'video' && t.direction === 'recvonly' && t.name === recording.track)) {
    const outputs = model.tracks.filter((t) => t.kind === 'video' && t.direction === 'recvonly').map((t) => t.name);
    throw new TypeError(`recording.track "${recording.track}" is not an output video track of model "${model.name}" (its output video tracks: ${outputs.join(', ') || 'none'})`);
  }
  // A clip is whole segments and never longer than the cap: the cap must hold one segment.
  if (recording?.maxClipSeconds !== undefined && recording.maxClipSeconds < (recording.segmentSeconds ?? DEFAULT_SEGMENT_SECONDS)) {
    throw new TypeError(`recording.maxClipSeconds (${recording.maxClipSeconds}) must be at least the segment length (${recording.segmentSeconds ?? DEFAULT_SEGMENT_SECONDS} s)`);
  }
  const recordingDirectory = recording && !recording.storage ? (recording.directory ?? (await mkdtemp(join(tmpdir(), 'arclight-recordings-')))) : undefined;
  // One signer for the clip URLs it issues and checks (its own clock when the recording has one).
  const clipSigner = recording?.now ? new UrlSigner({ now: recording.now }) : urlSigner;
  const recordings = recording
    ? new RecordingRegistry(
        { ...recording, storage: recording.storage ?? new LocalDiskStorage(recordingDirectory!) },
        clipSigner,
        log.child({ component: 'recording' }),
        recording.now,
      )
    : undefined;
  // The session logs' window and clock are the recordings' (the spec's five minutes).
  const sessionLogs = new SessionLogRegistry({
    ...(recording?.retainAfterEndMs !== undefined ? { retainAfterEndMs: recording.retainAfterEndMs } : {}),
    ...(recording?.now ? { now: recording.now } : {}),
    ...options.sessionLogs,
  });
  const host = new LocalSessionHost({
    uploads,
    sessionLogs,
    runtimeEvents: events,
    ...(recordings ? { recordings } : {}),
    model,
    router,
    capabilities,
    peerOptions: {
      icePolicy,
      iceServers,
      ...(options.faults ? { faults: options.faults } : {}),
      videoCodecs,
    },
    log,
    metrics,
    reconnectGraceMs: (options.reconnectGraceSeconds ?? 60) * 1000,
    ...(options.maxSessionSeconds === undefined ? {} : { maxDurationMs: options.maxSessionSeconds * 1000 }),
    maxMessageBytes: options.maxMessageBytes ?? MAX_MESSAGE_BYTES,
    latencyMode: options.latencyMode ?? model.latencyMode ?? 'smooth',
    ...(options.hosted
      ? {
          events: {
            connectionReady: (session) => {
              // The coordinator's maximum duration counts from `ready` as the coordinator records
              // it (its ready_at, stamped when this report arrives), so the clock starts once the
              // report is acknowledged: the runtime's deadline then never comes before the
              // coordinator's. Unacknowledged, it counts from this moment (the coordinator does
              // not bill a session it never heard was ready).
              const readyAt = performance.now();
              void (link?.sessionReady(session.id) ?? Promise.resolve(false)).then((acknowledged) =>
                session.startDurationLimit(acknowledged ? performance.now() : readyAt),
              );
            },
            ended: (session, reason) => link?.sessionEnded(session.id, reason),
          },
        }
      : {}),
  });
  // Created once the server listens (it registers the runtime's URL).
  let link: CoordinatorLink | undefined;

  let loadState: 'loading' | 'loaded' | 'failed' = 'loading';
  let closed = false;
  /** A new version is loading (reloadModel) while the current one serves: reported as `loading`. */
  let reloading = false;
  let lastLoadError: ModelLoadErrorInfo | undefined;
  const loadFailed = (error: unknown, elapsedSeconds: number): ModelLoadErrorInfo => {
    lastLoadError = describeLoadError(error);
    events.publish({ type: 'model_load', phase: 'failed', elapsed_seconds: elapsedSeconds, error: lastLoadError });
    return lastLoadError;
  };
  /** Runs a version's load(), reporting its progress as `model_load` events; the error when it throws. */
  const runLoad = async (definition: ModelDefinition<unknown>): Promise<{ ok: true; seconds: number } | { ok: false; error: ModelLoadErrorInfo }> => {
    const started = performance.now();
    const seconds = (): number => Math.round(performance.now() - started) / 1000;
    let latest: { progress: number; message?: string } | undefined;
    let publishedAt = -Infinity;
    /** A report held back by the rate limit, published when the limit allows (the last one wins). */
    let trailing: NodeJS.Timeout | undefined;
    const publishLoading = (): void => {
      clearTimeout(trailing);
      trailing = undefined;
      publishedAt = performance.now();
      events.publish({ type: 'model_load', phase: 'loading', elapsed_seconds: seconds(), ...latest });
    };
    publishLoading();
    // A load() that reports no progress of its own: say every few seconds that it still runs.
    const heartbeat = setInterval(publishLoading, MODEL_LOAD_PROGRESS_MS);
    heartbeat.unref();
    try {
      if (definition.load) {
        const context = {
          progress(fraction: number, message?: string): void {
            if (typeof fraction !== 'number' || Number.isNaN(fraction)) return;
            latest = { progress: Math.min(1, Math.max(0, fraction)), ...(typeof message === 'string' ? { message } : {}) };
            // A model may report per tensor: at most ten events a second reach the stream.
            const wait = publishedAt + 100 - performance.now();
            if (wait <= 0 || latest.progress === 1) publishLoading();
            else trailing ??= setTimeout(publishLoading, wait);
          },
        };
        const outcome = await callAuthorCode(log, 'load', () => definition.load!(context));
        if (!outcome.ok) return { ok: false, error: loadFailed(outcome.error, seconds()) };
      }
    } finally {
      clearInterval(heartbeat);
      clearTimeout(trailing);
    }
    events.publish({ type: 'model_load', phase: 'loaded', elapsed_seconds: seconds() });
    return { ok: true, seconds: (performance.now() - started) / 1000 };
  };
  const loaded = (async () => {
    const outcome = await runLoad(model);
    if (!outcome.ok) {
      loadState = 'failed';
      return;
    }
    metrics.modelLoadDuration.set(outcome.seconds);
    loadState = 'loaded';
    lastLoadError = undefined;
    log.info('model loaded', { seconds: outcome.seconds });
  })();

  /** A version's unload(), isolated: the model's code must not take the runtime down. */
  const unloadModel = async (definition: ModelDefinition<unknown>): Promise<void> => {
    try {
      await definition.unload?.();
    } catch (error) {
      log.error('the model\'s unload() failed', { error: error instanceof Error ? error.message : String(error) });
    }
  };

  // Reloads one at a time, in the order asked.
  let reloadQueue: Promise<unknown> = loaded;
  const reloadModel = async (next: ModelDefinition<never>): Promise<ModelReloadOutcome> => {
    const started = performance.now();
    let definition: ModelDefinition<unknown>;
    let served: ServedModel;
    try {
      definition = validateModelDefinition(next, `model "${(next as { name?: string }).name ?? '?'}"`);
      served = buildServedModel(definition, slot.current.version + 1);
    } catch (error) {
      return { ok: false, error: loadFailed(error, 0) };
    }
    reloading = true;
    try {
      const outcome = await runLoad(definition);
      // A version that never serves gives back what its load() took, as a replaced one does.
      if (!outcome.ok) {
        await unloadModel(definition);
        return outcome;
      }
      if (closed) {
        await unloadModel(definition);
        return { ok: false, error: loadFailed(new Error('The runtime is shutting down.'), 0) };
      }
      const previous = slot.current.definition;
      slot.replace(served);
      const sessions = await host.adoptModel(served.definition, served.router, served.capabilities);
      // The old version's sessions have moved on (or ended): what its load() took can go.
      if (previous !== served.definition) await unloadModel(previous);
      loadState = 'loaded';
      lastLoadError = undefined;
      events.publish({ type: 'model_reloaded', version: served.version, sessions_kept: sessions === 'kept' });
      log.info('model reloaded', { version: served.version, sessions, seconds: outcome.seconds });
      return { ok: true, version: served.version, sessions, loadMs: performance.now() - started };
    } finally {
      reloading = false;
    }
  };

  const state = (): RuntimeState =>
    closed || loadState === 'failed' ? 'terminated' : loadState === 'loading' || reloading ? 'loading' : host.current ? 'serving' : 'available';

  const app = new Hono();
  app.onError(createErrorHandler((message, fields) => log.error(message, fields), 'runtime'));
  const origins = options.corsOrigins ?? '*';
  app.use('*', cors({
    origin: origins === '*' ? '*' : [...origins],
    allowMethods: ['GET', 'POST', 'PUT', 'DELETE', 'OPTIONS'],
    allowHeaders: ['Content-Type', 'Authorization', 'Last-Event-ID', API_VERSION_HEADER, API_ACCEPT_VERSION_HEADER, WEBRTC_VERSION_HEADER],
    maxAge: 600,
  }));
  app.notFound(notFound);
  app.get('/health', (c) => {
    const s = state();
    const healthy = loadState === 'loaded' && !closed;
    const detail = loadState === 'failed' ? 'model load() failed; see the runtime log' : loadState === 'loading' ? 'model is loading' : null;
    return c.json({ status: healthy ? 'healthy' : 'unhealthy', state: s, detail, version: SERVER_VERSION }, healthy ? 200 : 503);
  });
  app.get('/metrics', async (c) => c.body(await metrics.text(), 200, { 'content-type': metrics.contentType }));
  app.get('/schema', (c) => c.json(slot.current.openApi as object));
  app.get('/capabilities', (c) => c.json(slot.current.capabilities));
  if (options.dev) {
    // arclight dev: which version serves and why the last one did not load, for the playground.
    app.get('/dev/status', (c) => c.json({
      model: slot.current.definition.name,
      version: slot.current.version,
      state: state(),
      error: lastLoadError ?? null,
    }));
  }
  const readiness = {
    assertReady: () => {
      if (loadState === 'loading') throw new ArclightError('model_not_ready', 'The model is still loading; retry shortly.');
      if (loadState === 'failed') throw new ArclightError('model_not_ready', 'The model failed to load; see the runtime log.');
      if (closed) throw new ArclightError('model_not_ready', 'The runtime is shutting down.');
    },
  };
  if (options.hosted) {
    for (const path of ['/start_session', '/stop_session', '/session']) app.use(path, localSessionsClosed);
    const secret = requireRuntimeSecret(options.hosted.secret);
    app.use('/sessions/*', secret);
    app.use('/hosted/*', secret);
    app.use('/events', secret);
    app.route('/', hostedRoutes(host, readiness));
  }
  app.route('/', sessionRoutes(host, readiness));
  app.route('/', uploadRoutes({
    host,
    store: uploads,
    signer: urlSigner,
    trustPublicUrlHeader: options.hosted !== undefined,
    ...(options.uploads?.now ? { now: options.uploads.now } : {}),
  }));
  if (recordings) app.route('/', clipRoutes(recordings, clipSigner));
  app.route('/', sessionLogRoutes(sessionLogs));
  app.route('/', eventRoutes(events));
  app.route('/', transportRoutes(host, clientIceServers));
  if (options.playground ?? true) app.route('/', playgroundRoutes(options.playgroundHosted ? { hosted: options.playgroundHosted } : {}));
  rejectOtherMethods(app, options.playground ?? true, options.dev ?? false);

  const listenHost = options.host ?? '127.0.0.1';
  const server: ServerType = await new Promise((resolve, reject) => {
    const s = serve({ fetch: app.fetch, port: options.port ?? 8080, hostname: listenHost }, () => resolve(s));
    s.once('error', reject);
  });
  outlastClientIdleTimeouts(server as Server);
  const port = (server.address() as AddressInfo).port;
  const urlHost = listenHost.includes(':') ? `[${listenHost}]` : listenHost === '0.0.0.0' ? '127.0.0.1' : listenHost;
  log.info('runtime listening', { url: `http://${urlHost}:${port}` });
  if (options.hosted) {
    const hosted = options.hosted;
    // Register once the model is loaded: a runtime that cannot serve must not be given sessions.
    void loaded.then(() => {
      if (closed || loadState !== 'loaded') return;
      link = new CoordinatorLink(hosted, { url: `http://${urlHost}:${port}`, model: model.name, capabilities }, log);
      link.start();
    });
  }

  return {
    url: `http://${urlHost}:${port}`,
    port,
    metrics,
    sessions: host,
    events,
    sessionLogs,
    get state() {
      return state();
    },
    loaded,
    get lastLoadError() {
      return lastLoadError;
    },
    reloadModel(definition) {
      const outcome = reloadQueue.then(() => reloadModel(definition));
      reloadQueue = outcome.catch(() => {});
      return outcome;
    },
    reportModelError(error) {
      return loadFailed(error, 0);
    },
    async drain(deadlineMs) {
      if (!options.hosted) return;
      await link?.drain();
      const deadline = performance.now() + deadlineMs;
      while (host.current !== undefined && !closed && performance.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    },
    async close() {
      if (closed) return;
      closed = true;
      // End the session first, so its end is reported to the coordinator before the link stops.
      await host.close();
      await unloadModel(slot.current.definition);
      await link?.stop(CLOSE_REPORT_GRACE_MS);
      if (options.uploads?.directory === undefined) await rm(uploadDirectory, { recursive: true, force: true });
      await recordings?.close();
      sessionLogs.close();
      if (recordingDirectory && recording?.directory === undefined) await rm(recordingDirectory, { recursive: true, force: true });
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Keep-alive sockets would hold close() open for seconds.
        (server as { closeAllConnections?: () => void }).closeAllConnections?.();
      });
    },
  };
}
