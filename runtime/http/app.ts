/**
 * The runtime's HTTP surface, composed from one route module per resource and built from the
 * services startRuntime() made (server.ts), as the coordinator's is (coordinator/http/app.ts):
 * CORS, the operator endpoints (/health /metrics /schema /capabilities, and /dev/status under
 * `arclight dev`), hosted mode's gate, every route module, and last a 405 with an Allow header
 * for any other method on a known path. Errors leave through server-kit/http-errors.ts.
 */

import { Hono } from 'hono';
import { cors } from 'hono/cors';
import { ArclightError } from '../../protocol/errors.ts';
import type { IceServerEntry } from '../../protocol/transport.ts';
import { API_ACCEPT_VERSION_HEADER, API_VERSION_HEADER, SERVER_VERSION, WEBRTC_VERSION_HEADER } from '../../protocol/versions.ts';
import { createErrorHandler, notFound, type ErrorLogger } from '../../server-kit/http-errors.ts';
import type { RuntimeEventLog } from '../events/runtime-event-log.ts';
import type { ModelHost } from '../hosting/model-host.ts';
import type { SessionFiles } from '../hosting/session-files.ts';
import type { RuntimeMetrics } from '../metrics.ts';
import type { LocalSessionHost } from '../session/local-session-host.ts';
import { clipRoutes } from './clip-routes.ts';
import { eventRoutes } from './event-routes.ts';
import { hostedRoutes, localSessionsClosed, requireRuntimeSecret } from './hosted-routes.ts';
import { playgroundRoutes, type PlaygroundHostedOptions } from './playground-routes.ts';
import { sessionLogRoutes } from './session-log-routes.ts';
import { sessionRoutes } from './session-routes.ts';
import { transportRoutes } from './transport-routes.ts';
import { uploadRoutes } from './upload-routes.ts';

export interface RuntimeServices {
  /** The model: its state, readiness and served version (/health, /schema, /capabilities, sessions). */
  readonly modelHost: ModelHost;
  readonly sessions: LocalSessionHost;
  /** Uploads, recordings (clips) and session logs, with their URL signers. */
  readonly files: SessionFiles;
  readonly events: RuntimeEventLog;
  readonly metrics: RuntimeMetrics;
  /** What one session's clients get from `ice_servers`. */
  readonly clientIceServers: (sessionId: string) => readonly IceServerEntry[];
  readonly logError: ErrorLogger;
  /** Browser origins allowed (CORS): `'*'` or a list. */
  readonly corsOrigins: '*' | readonly string[];
  /** Serve the playground at `/`. */
  readonly playground: boolean;
  readonly playgroundHosted: PlaygroundHostedOptions | undefined;
  /** `arclight dev`: also serve `GET /dev/status`. */
  readonly dev: boolean;
  /** Hosted mode (its runtime secret): the local session endpoints close and session paths need the secret. Undefined: local mode. */
  readonly hosted: { readonly secret: string } | undefined;
  /** The uploads' clock for URL expiry (tests move it); default `Date.now`. */
  readonly uploadsNow: (() => number) | undefined;
}

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
      const error = new ArclightError(
        'method_not_allowed',
        `${c.req.method} is not allowed on ${c.req.path}; use ${methods.join(' or ')}.`,
      );
      return c.json(error.toBody(), 405, { Allow: [...methods, 'OPTIONS'].join(', ') });
    });
  }
}

export function createRuntimeApp(services: RuntimeServices): Hono {
  const { modelHost, sessions, files, metrics } = services;
  const app = new Hono();
  app.onError(createErrorHandler(services.logError, 'runtime'));
  const origins = services.corsOrigins;
  app.use(
    '*',
    cors({
      origin: origins === '*' ? '*' : [...origins],
      allowMethods: ['GET', 'POST', 'PUT', 'DELETE', 'OPTIONS'],
      allowHeaders: [
        'Content-Type',
        'Authorization',
        'Last-Event-ID',
        API_VERSION_HEADER,
        API_ACCEPT_VERSION_HEADER,
        WEBRTC_VERSION_HEADER,
      ],
      maxAge: 600,
    }),
  );
  app.notFound(notFound);
  app.get('/health', (c) => {
    const s = modelHost.state;
    const healthy = modelHost.loadState === 'loaded' && !modelHost.closed;
    const detail =
      modelHost.loadState === 'failed'
        ? 'model load() failed; see the runtime log'
        : modelHost.loadState === 'loading'
          ? 'model is loading'
          : null;
    return c.json({ status: healthy ? 'healthy' : 'unhealthy', state: s, detail, version: SERVER_VERSION }, healthy ? 200 : 503);
  });
  app.get('/metrics', async (c) => c.body(await metrics.text(), 200, { 'content-type': metrics.contentType }));
  app.get('/schema', (c) => c.json(modelHost.current.openApi as object));
  app.get('/capabilities', (c) => c.json(modelHost.current.capabilities));
  if (services.dev) {
    // arclight dev: which version serves and why the last one did not load, for the playground.
    app.get('/dev/status', (c) =>
      c.json({
        model: modelHost.current.definition.name,
        version: modelHost.current.version,
        state: modelHost.state,
        error: modelHost.lastLoadError ?? null,
      }),
    );
  }
  if (services.hosted) {
    for (const path of ['/start_session', '/stop_session', '/session']) app.use(path, localSessionsClosed);
    const secret = requireRuntimeSecret(services.hosted.secret);
    app.use('/sessions/*', secret);
    app.use('/hosted/*', secret);
    app.use('/events', secret);
    app.route('/', hostedRoutes(sessions, modelHost));
  }
  app.route('/', sessionRoutes(sessions, modelHost));
  app.route(
    '/',
    uploadRoutes({
      host: sessions,
      store: files.uploads,
      signer: files.urlSigner,
      trustPublicUrlHeader: services.hosted !== undefined,
      ...(services.uploadsNow ? { now: services.uploadsNow } : {}),
    }),
  );
  if (files.recordings) app.route('/', clipRoutes(files.recordings, files.clipSigner));
  app.route('/', sessionLogRoutes(files.sessionLogs));
  app.route('/', eventRoutes(services.events));
  app.route('/', transportRoutes(sessions, services.clientIceServers));
  if (services.playground) app.route('/', playgroundRoutes(services.playgroundHosted ? { hosted: services.playgroundHosted } : {}));
  rejectOtherMethods(app, services.playground, services.dev);
  return app;
}
