/**
 * The coordinator's HTTP surface, composed from one route module per resource. The spec's
 * endpoints (`POST /tokens`, sessions, `GET /pricing`) plus `/.well-known/jwks.json`, and for
 * operators `GET /health` (the database answers) and `GET /metrics` (Prometheus).
 */

import { Hono } from 'hono';
import { cors } from 'hono/cors';
import { API_KEY_HEADER } from '../../protocol/coordinator.ts';
import { API_ACCEPT_VERSION_HEADER, API_VERSION_HEADER, SERVER_VERSION, WEBRTC_VERSION_HEADER } from '../../protocol/versions.ts';
import { ArclightError } from '../../protocol/errors.ts';
import type { ApiKeyStore } from '../accounts/api-keys.ts';
import type { ModelCatalog } from '../models/model-catalog.ts';
import { pricingResponse, type PricingSettings } from '../pricing/pricing.ts';
import type { CreditLedger } from '../billing/credit-ledger.ts';
import type { PurchaseService } from '../billing/purchases.ts';
import type { RuntimeRegistry } from '../runtimes/runtime-registry.ts';
import type { SessionLifecycle } from '../sessions/session-lifecycle.ts';
import type { CoordinatorStorage } from '../storage/database.ts';
import type { SessionStore } from '../sessions/session-store.ts';
import type { SigningKeyring } from '../tokens/signing-keyring.ts';
import { parseTokenRequest } from '../tokens/token-request.ts';
import type { TokenService } from '../tokens/token-service.ts';
import { sql } from 'kysely';
import { routePath } from 'hono/route';
import type { CoordinatorMetrics } from '../metrics.ts';
import { DashboardAuth } from '../dashboard/dashboard-auth.ts';
import type { DashboardSessionStore } from '../dashboard/dashboard-sessions.ts';
import { createBearerAuthenticator } from './bearer-auth.ts';
import { createErrorHandler, notFound, type ErrorLogger } from '../../server-kit/http-errors.ts';
import { hasNul, readJson } from './request-body.ts';
import { registerDashboardRoutes } from './dashboard-routes.ts';
import { registerPlatformRoutes } from './platform-routes.ts';
import { registerRuntimeRoutes } from './runtime-routes.ts';
import { registerSessionRoutes } from './session-routes.ts';

export interface CoordinatorServices {
  readonly apiKeys: ApiKeyStore;
  readonly catalog: ModelCatalog;
  readonly keyring: SigningKeyring;
  readonly tokens: TokenService;
  readonly sessions: SessionStore;
  readonly ledger: CreditLedger;
  readonly purchases: PurchaseService;
  /** The account dashboard's sign-ins (coordinator/dashboard/). */
  readonly dashboardSessions: DashboardSessionStore;
  /** The payment provider's name; undefined when purchases are off. */
  readonly paymentProvider: string | undefined;
  readonly storage: CoordinatorStorage;
  readonly registry: RuntimeRegistry;
  readonly lifecycle: SessionLifecycle;
  readonly runtimeSecret: string | undefined;
  /** Runs housekeeping soon (a runtime registered or freed capacity). */
  readonly onCapacity: () => void;
  readonly cluster: string;
  readonly pricing: PricingSettings;
  readonly logError: ErrorLogger;
  /** Browser origins allowed on the session API and /pricing: `'*'` (default) or a list. */
  readonly corsOrigins: '*' | readonly string[];
  readonly metrics: CoordinatorMetrics;
  /** `--public-url`, when set: the origin presigned URLs carry. */
  readonly publicUrl: string | undefined;
  /** Milliseconds since the epoch (tests move time). */
  readonly now: () => number;
}

/**
 * CORS only where browsers belong: the session API (a bearer token, never a cookie, so `*` leaks
 * nothing) and the public pricing. `/tokens`, `/platform/*` and `/runtimes/*` take API keys and
 * runtime secrets, which live on servers; they answer no preflight.
 */
const BROWSER_PATHS = ['/sessions', '/sessions/*', '/pricing'];
const BROWSER_REQUEST_HEADERS = [
  'Authorization',
  'Content-Type',
  API_VERSION_HEADER,
  API_ACCEPT_VERSION_HEADER,
  WEBRTC_VERSION_HEADER,
  'Idempotency-Key',
  'Last-Event-ID',
];
const BROWSER_EXPOSED_HEADERS = ['Retry-After'];

export function createCoordinatorApp(services: CoordinatorServices): Hono {
  const app = new Hono();
  app.onError(createErrorHandler(services.logError, 'coordinator'));
  app.notFound(notFound);
  const browserCors = cors({
    origin: services.corsOrigins === '*' ? '*' : [...services.corsOrigins],
    allowMethods: ['GET', 'POST', 'PATCH', 'PUT', 'DELETE'],
    allowHeaders: BROWSER_REQUEST_HEADERS,
    exposeHeaders: BROWSER_EXPOSED_HEADERS,
    maxAge: 600,
  });
  for (const path of BROWSER_PATHS) app.use(path, browserCors);

  // A NUL (U+0000) names nothing here — no id, slug or key contains one — and PostgreSQL's text
  // cannot even hold it (the query would fail with a 500 where SQLite finds no row): a path with
  // one is answered like any path that names nothing, before a route looks anything up.
  app.use('*', async (c, next) => {
    if (hasNul(c.req.path)) return notFound(c);
    await next();
  });

  // Requests by route pattern (never the raw path: ids would make a series per session).
  app.use('*', async (c, next) => {
    const started = performance.now();
    await next();
    const route = routePath(c, -1) || 'unmatched';
    services.metrics.requests.inc({ method: c.req.method, route, status: String(c.res.status) });
    services.metrics.requestDuration.observe({ method: c.req.method, route }, (performance.now() - started) / 1000);
  });

  // Readiness for load balancers and Kubernetes: this replica answers and its database does.
  app.get('/health', async (c) => {
    try {
      await sql`select 1`.execute(services.storage.db);
    } catch {
      throw new ArclightError('unavailable', 'The coordinator cannot reach its database.');
    }
    return c.json({ status: 'healthy', database: services.storage.engine, version: SERVER_VERSION }, 200);
  });

  app.get('/metrics', async (c) =>
    c.body(await services.metrics.registry.metrics(), 200, { 'content-type': services.metrics.registry.contentType }),
  );

  app.post('/tokens', async (c) => {
    const key = c.req.header(API_KEY_HEADER);
    if (!key) throw new ArclightError('unauthorized', `Send the API key in the ${API_KEY_HEADER} header.`);
    const owner = await services.apiKeys.authenticate(key);
    if (!owner) throw new ArclightError('unauthorized', 'The API key is not valid (unknown, revoked or malformed).');
    const request = parseTokenRequest(await readJson(c));
    return c.json(await services.tokens.mint(owner, request), 200);
  });

  const auth = createBearerAuthenticator(services.tokens, services.apiKeys);
  const dashboard = new DashboardAuth(services.dashboardSessions, { publicUrl: services.publicUrl });
  registerDashboardRoutes(app, {
    apiKeys: services.apiKeys,
    store: services.dashboardSessions,
    auth: dashboard,
    storage: services.storage,
  });
  registerPlatformRoutes(app, {
    auth,
    dashboard,
    lifecycle: services.lifecycle,
    apiKeys: services.apiKeys,
    catalog: services.catalog,
    ledger: services.ledger,
    purchases: services.purchases,
    paymentProvider: services.paymentProvider,
    storage: services.storage,
    now: services.now,
  });
  registerRuntimeRoutes(app, {
    registry: services.registry,
    catalog: services.catalog,
    sessions: services.sessions,
    lifecycle: services.lifecycle,
    runtimeSecret: services.runtimeSecret,
    onCapacity: services.onCapacity,
  });
  registerSessionRoutes(app, {
    registry: services.registry,
    lifecycle: services.lifecycle,
    runtimes: services.lifecycle.runtimes,
    auth,
    sessions: services.sessions,
    catalog: services.catalog,
    cluster: services.cluster,
    publicUrl: services.publicUrl,
  });

  app.get('/pricing', async (c) => {
    // Public and the same for everyone: caches may keep it for a minute.
    c.header('Cache-Control', 'public, max-age=60');
    return c.json(pricingResponse(services.pricing, await services.catalog.listPublic()));
  });

  app.get('/.well-known/jwks.json', async (c) => {
    c.header('Cache-Control', 'public, max-age=300');
    return c.json(await services.keyring.jwks());
  });

  return app;
}
