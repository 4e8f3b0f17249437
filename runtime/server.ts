/**
 * `startRuntime()` — the per-GPU runtime process: hosts one model, serves HTTP (sessions,
 * signalling, /schema, /metrics, /health, the playground) and the WebRTC media behind it.
 *
 * This file only composes, as coordinator/coordinator.ts does: options → settings
 * (runtime-options.ts) → services (the model host, session files, the session host) → the HTTP
 * app (http/app.ts) → listen → hosted mode's coordinator registration → the `Runtime` handle,
 * whose close() takes them down in the reverse order. Each part says what it does in its own file.
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

import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve, type ServerType } from '@hono/node-server';
import type { ModelLoadErrorInfo } from '../protocol/session-logs.ts';
import type { IceServerEntry } from '../protocol/transport.ts';
import { outlastClientIdleTimeouts } from '../server-kit/keep-alive.ts';
import { createLogger } from '../server-kit/log.ts';
import { RuntimeEventLog } from './events/runtime-event-log.ts';
import { CoordinatorRegistration } from './hosting/coordinator-registration.ts';
import { prepareMedia } from './hosting/media-startup.ts';
import { ModelHost, type ModelReloadOutcome, type RuntimeState } from './hosting/model-host.ts';
import { servedVersionBuilder } from './hosting/served-version.ts';
import { openSessionFiles } from './hosting/session-files.ts';
import { createRuntimeApp } from './http/app.ts';
import type { SessionLogRegistry } from './logs/session-log-registry.ts';
import { processEncoderBackends } from './media/encoder-backends.ts';
import { RuntimeMetrics } from './metrics.ts';
import { installProcessGuards } from './model/author-code.ts';
import type { ModelDefinition } from './model/definition.ts';
import { validateModelDefinition } from './model/validate-definition.ts';
import { resolveRuntimeSettings, type RuntimeOptions } from './runtime-options.ts';
import { LocalSessionHost } from './session/local-session-host.ts';
import { createWeriftPeerConnection } from './transport/werift-peer-connection.ts';
import type { PeerFaults } from './faults/peer-faults.ts';
import { IcePolicy } from './transport/signalling/ice-policy.ts';
import { TurnCredentialIssuer } from './transport/signalling/turn-credentials.ts';

// Where these are imported from today; they are declared with the part they belong to.
export type { RecordingOptions, RuntimeIceOptions, RuntimeOptions } from './runtime-options.ts';
export type { ModelReloadOutcome, RuntimeState } from './hosting/model-host.ts';
export { capabilitiesOf } from './hosting/served-version.ts';

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

/** How long close() lets a hosted runtime's last reports (its session's end) reach the coordinator. */
const CLOSE_REPORT_GRACE_MS = 2_000;

export function startRuntime(options: RuntimeOptions): Promise<Runtime> {
  return composeRuntime(options, {});
}

/**
 * What only tests hand the runtime, kept off `RuntimeOptions` so no production option names it
 * (runtime/faults/start-runtime-with-faults.ts is the one caller that sets it).
 */
export interface RuntimeInternals {
  /** Impairments of every peer the runtime makes (runtime/faults/peer-faults.ts). */
  readonly peerFaults?: PeerFaults;
}

/** startRuntime, with `internals`. */
export async function composeRuntime(options: RuntimeOptions, internals: RuntimeInternals): Promise<Runtime> {
  const model = validateModelDefinition(options.model, `model "${(options.model as { name?: string }).name ?? '?'}"`);
  const log = (options.logger ?? createLogger()).child({ model: model.name });
  installProcessGuards(log);
  // Which encoder serves each codec is a fact about the machine, found once per process: the
  // runtime hands the process's registry to everything that opens encoders or reports them.
  const encoderBackends = processEncoderBackends;
  const metrics = new RuntimeMetrics({ encoderBackends });
  const events = new RuntimeEventLog();
  // Each version of the model, with what is derived from it; the first is built here and a bad
  // schema still fails the start, as before.
  const buildVersion = servedVersionBuilder(log, metrics, options.moderation);
  const first = buildVersion(model, 1);
  // Checked here, so a bad ICE configuration fails the start, not a client's first request.
  const icePolicy = new IcePolicy(options.ice);
  const turn = options.ice?.turn ? new TurnCredentialIssuer(options.ice.turn) : undefined;
  const { hardwareH265 } = await prepareMedia(log, metrics, events, encoderBackends);
  const settings = resolveRuntimeSettings(options, { model, hardwareH265 });
  const clientIceServers = (sessionId: string): readonly IceServerEntry[] =>
    turn ? [...settings.iceServers, turn.issue(sessionId)] : settings.iceServers;
  const files = await openSessionFiles(options, log);
  const registration = options.hosted ? new CoordinatorRegistration(options.hosted, log) : undefined;
  const sessions = new LocalSessionHost({
    uploads: files.uploads,
    sessionLogs: files.sessionLogs,
    runtimeEvents: events,
    ...(files.recordings ? { recordings: files.recordings } : {}),
    model,
    router: first.router,
    capabilities: first.capabilities,
    createPeer: (peerOptions) => createWeriftPeerConnection(peerOptions, internals.peerFaults),
    encoderBackends,
    peerOptions: {
      icePolicy,
      iceServers: settings.iceServers,
      videoCodecs: settings.videoCodecs,
    },
    log,
    metrics,
    reconnectGraceMs: settings.reconnectGraceMs,
    ...(settings.maxDurationMs === undefined ? {} : { maxDurationMs: settings.maxDurationMs }),
    maxMessageBytes: settings.maxMessageBytes,
    latencyMode: settings.latencyMode,
    ...(settings.videoBitrate ? { videoBitrate: settings.videoBitrate } : {}),
    ...(registration ? { events: registration.sessionEvents } : {}),
  });
  // Starts the model's load() now; the server listens meanwhile and reports `loading`.
  const modelHost = new ModelHost({ first, buildVersion, sessions, events, metrics, log });

  const app = createRuntimeApp({
    modelHost,
    sessions,
    files,
    events,
    metrics,
    clientIceServers,
    logError: (message, fields) => log.error(message, fields),
    corsOrigins: settings.corsOrigins,
    playground: settings.playground,
    playgroundHosted: options.playgroundHosted,
    dev: settings.dev,
    hosted: options.hosted,
    uploadsNow: options.uploads?.now,
  });

  const listenHost = settings.listenHost;
  const server: ServerType = await new Promise((resolve, reject) => {
    const s = serve({ fetch: app.fetch, port: settings.port, hostname: listenHost }, () => resolve(s));
    s.once('error', reject);
  });
  outlastClientIdleTimeouts(server as Server);
  const port = (server.address() as AddressInfo).port;
  const urlHost = listenHost.includes(':') ? `[${listenHost}]` : listenHost === '0.0.0.0' ? '127.0.0.1' : listenHost;
  const url = `http://${urlHost}:${port}`;
  log.info('runtime listening', { url });
  if (registration) {
    // Register once the model is loaded: a runtime that cannot serve must not be given sessions.
    void modelHost.loaded.then(() => {
      if (modelHost.closed || modelHost.loadState !== 'loaded') return;
      registration.register({ url, model: model.name, capabilities: first.capabilities });
    });
  }

  return {
    url,
    port,
    metrics,
    sessions,
    events,
    sessionLogs: files.sessionLogs,
    get state() {
      return modelHost.state;
    },
    loaded: modelHost.loaded,
    get lastLoadError() {
      return modelHost.lastLoadError;
    },
    reloadModel(definition) {
      return modelHost.reload(definition);
    },
    reportModelError(error) {
      return modelHost.reportLoadError(error);
    },
    async drain(deadlineMs) {
      if (!registration) return;
      await registration.drain();
      const deadline = performance.now() + deadlineMs;
      while (sessions.current !== undefined && !modelHost.closed && performance.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    },
    async close() {
      if (modelHost.closed) return;
      // End the session first (then the model unloads), so its end is reported to the
      // coordinator before the registration stops.
      await modelHost.close();
      await registration?.stop(CLOSE_REPORT_GRACE_MS);
      await files.close();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Keep-alive sockets would hold close() open for seconds.
        (server as { closeAllConnections?: () => void }).closeAllConnections?.();
      });
    },
  };
}
