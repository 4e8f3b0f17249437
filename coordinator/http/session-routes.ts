/**
 * `POST /sessions`, `GET /sessions/{id}`, `DELETE /sessions/{id}` — shaped for
 * `@reactor-team/js-sdk@2.9.0` in hosted mode (docs/coordinator.md): it posts
 * `{model: {name}, client_info, supported_transports}`, accepts any 2xx, then polls the GET until
 * the session has `capabilities` and `selected_transport`, and ends with a bodiless DELETE.
 */

import type { Context, Hono } from 'hono';
import { ArclightError } from '../../protocol/errors.ts';
import type { Capabilities } from '../../protocol/capabilities.ts';
import {
  API_VERSION_HEADER,
  SERVER_VERSION,
  WEBRTC_VERSION,
  WEBRTC_VERSION_HEADER,
  checkApiVersionHeader,
  checkWebrtcVersionHeader,
} from '../../protocol/versions.ts';
import type { RuntimeClient } from '../runtimes/runtime-client.ts';
import type { RuntimeRegistry } from '../runtimes/runtime-registry.ts';
import type { SessionLifecycle } from '../sessions/session-lifecycle.ts';
import type { ModelCatalog } from '../models/model-catalog.ts';
import type { SessionRecord, SessionStore } from '../sessions/session-store.ts';
import type { SessionStatus } from '../storage/schema.ts';
import type { BearerAuthenticator } from './bearer-auth.ts';
import { readJson } from './request-body.ts';

/** The wire protocol's session states (2.9.0 treats CLOSED and INACTIVE as terminal). */
const WIRE_STATE: Record<SessionStatus, string> = { connecting: 'PENDING', waiting: 'WAITING', ready: 'ACTIVE', ended: 'CLOSED' };
/** Longest end reason kept (it is shown to people). */
const MAX_REASON_LENGTH = 256;

/** `Idempotency-Key` on `POST /sessions`: what a client picks per logical request (a UUID, say). */
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

/** The header's key, or undefined without one; printable ASCII, 1–255 characters, or 400. */
function idempotencyKey(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  if (!IDEMPOTENCY_KEY.test(header)) {
    throw new ArclightError('invalid_request', 'Idempotency-Key must be 1–255 printable ASCII characters without spaces.', {
      field: 'Idempotency-Key',
    });
  }
  return header;
}

export interface SessionRouteServices {
  readonly auth: BearerAuthenticator;
  readonly sessions: SessionStore;
  readonly registry: RuntimeRegistry;
  readonly lifecycle: SessionLifecycle;
  readonly runtimes: RuntimeClient;
  readonly catalog: ModelCatalog;
  /** The `cluster` every session record names (2.9.0 requires the field). */
  readonly cluster: string;
  /**
   * Where clients reach this service (`--public-url`, behind a load balancer): the origin of the
   * presigned URLs the runtime signs. Unset: the origin the request came to.
   */
  readonly publicUrl: string | undefined;
}

export function registerSessionRoutes(app: Hono, services: SessionRouteServices): void {
  const { auth, sessions, catalog } = services;
  // 2.9.0 names its API version on every session call; a newer one is 501, an older one 426.
  app.use('/sessions', async (c, next) => {
    checkApiVersionHeader(c.req.header(API_VERSION_HEADER));
    await next();
  });
  app.use('/sessions/*', async (c, next) => {
    checkApiVersionHeader(c.req.header(API_VERSION_HEADER));
    await next();
  });

  /** The runtime holding the session, if any is (still) registered. */
  const runtimeOf = async (session: SessionRecord) => (session.runtime_id === null ? undefined : services.registry.get(session.runtime_id));
  /** The runtime serving an open session: 410 once it has ended, 409 before a GPU is assigned. */
  const servingRuntime = async (session: SessionRecord) => {
    if (session.status === 'ended')
      throw new ArclightError('session_ended', `Session ${session.id} has ended${session.end_reason ? ` (${session.end_reason})` : ''}.`);
    const runtime = await runtimeOf(session);
    if (!runtime)
      throw new ArclightError('not_ready', 'No GPU is serving this session yet; poll GET /sessions/{id} until it has capabilities.');
    return runtime;
  };

  // Transport calls (ICE servers, SDP offers and answers) go to the runtime holding the session.
  app.all('/sessions/:id/transport/webrtc/*', async (c) => {
    checkWebrtcVersionHeader(c.req.header(WEBRTC_VERSION_HEADER));
    const session = await sessions.authorize(await auth.actor(c), c.req.param('id'));
    return services.runtimes.relay(await servingRuntime(session), c.req.raw, new URL(c.req.url).pathname);
  });
  // Uploads: the reservation is the session's (bearer token, bound set); the presigned PUT and
  // GET carry their own credential (the runtime checks the signature), so they need no token.
  app.post('/sessions/:id/uploads', async (c) => {
    const session = await sessions.authorize(await auth.actor(c), c.req.param('id'));
    const url = new URL(c.req.url);
    return services.runtimes.relayUpload(await servingRuntime(session), c.req.raw, url.pathname, services.publicUrl ?? url.origin);
  });
  /**
   * A presigned URL, relayed to the session's runtime as it is. Uploads need the session open;
   * clips outlive it (the runtime keeps recordings five minutes, then answers 410 itself).
   */
  const relayPresigned = (afterEnd: boolean) => async (c: Context) => {
    const session = await sessions.get(c.req.param('id') ?? '');
    // Unknown and foreign ids alike: the runtime would refuse the signature anyway.
    if (!session) throw new ArclightError('forbidden', 'This URL is not a valid presigned URL.');
    const runtime = afterEnd ? await runtimeOf(session) : await servingRuntime(session);
    if (!runtime) throw new ArclightError('recording_gone', 'The GPU that recorded this session is gone.');
    const url = new URL(c.req.url);
    return services.runtimes.relayUpload(runtime, c.req.raw, url.pathname + url.search, services.publicUrl ?? url.origin);
  };
  /**
   * The session's log (paged, or live as server-sent events): the session's token, bound set
   * checked like every session call, then relayed as it streams to the runtime that holds — or,
   * for five minutes after the end, held — the session. The runtime answers 410 `logs_gone` after.
   */
  const relayLogs = async (c: Context) => {
    // A server may read them with the API key, as it may GET the session.
    const session = await sessions.authorize(await auth.actor(c, { allowApiKey: true }), c.req.param('id') ?? '');
    const runtime = await runtimeOf(session);
    if (!runtime) {
      throw session.status === 'ended'
        ? new ArclightError('logs_gone', 'The GPU that served this session is gone, and its log with it.')
        : new ArclightError('not_ready', 'No GPU is serving this session yet; its log starts when one does.');
    }
    const url = new URL(c.req.url);
    return services.runtimes.relayStream(runtime, c.req.raw, url.pathname + url.search);
  };
  app.get('/sessions/:id/logs', relayLogs);
  app.get('/sessions/:id/logs/stream', relayLogs);
  app.put('/sessions/:id/uploads/:upload', relayPresigned(false));
  app.get('/sessions/:id/uploads/:upload', relayPresigned(false));
  app.get('/sessions/:id/clips/:clip/playlist.m3u8', relayPresigned(true));
  app.get('/sessions/:id/recording/:track/:file', relayPresigned(true));

  const modelNames = new Map<string, string>();
  const record = async (session: SessionRecord) => {
    let name = modelNames.get(session.model_id);
    if (name === undefined) {
      name = (await catalog.byId(session.model_id))?.name ?? 'unknown';
      modelNames.set(session.model_id, name);
    }
    return {
      session_id: session.id,
      state: WIRE_STATE[session.status],
      status: session.status,
      cluster: services.cluster,
      model: { name },
      server_info: { server_version: SERVER_VERSION },
      created_at: session.created_at,
      max_duration_seconds: session.max_duration_seconds,
      ...(session.ready_at !== null ? { ready_at: session.ready_at } : {}),
      ...(session.ended_at !== null ? { ended_at: session.ended_at, end_reason: session.end_reason } : {}),
      ...(await assignment(session)),
    };
  };
  /** Once a runtime holds the session: its capabilities and the transport (what 2.9.0 polls for). */
  const assignment = async (session: SessionRecord) => {
    const runtime = session.status === 'ended' ? undefined : await runtimeOf(session);
    if (!runtime) return {};
    return {
      selected_transport: { protocol: 'webrtc' as const, version: WEBRTC_VERSION },
      capabilities: JSON.parse(runtime.capabilities) as Capabilities,
    };
  };

  app.post('/sessions', async (c) => {
    const actor = await auth.actor(c);
    if (actor.kind !== 'token') throw new ArclightError('forbidden', 'Create sessions with a token.');
    const body = await readJson(c);
    const name = typeof body === 'object' && body !== null ? (body as { model?: { name?: unknown } }).model?.name : undefined;
    if (typeof name !== 'string' || name.length === 0) {
      throw new ArclightError('invalid_request', 'model.name (the model slug) is required.', { field: '/model/name' });
    }
    const { token } = actor;
    const model = (await catalog.visibleTo(token.accountId, [name])).get(name);
    if (!model || (token.models !== undefined && !token.models.includes(name))) {
      throw new ArclightError('forbidden', `This token cannot open sessions of model "${name}".`);
    }
    const { session: created, replayed } = await sessions.create(token, model, idempotencyKey(c.req.header('idempotency-key')));
    if (replayed) return c.json(await record(created), 200); // placed (or waiting) since the first attempt
    // A free slot now, if there is one; otherwise it waits and housekeeping places it later.
    const runtime = await services.lifecycle.place(created);
    return c.json(await record(runtime ? { ...created, runtime_id: runtime.id } : created), 200);
  });

  app.get('/sessions/:id', async (c) => {
    const actor = await auth.actor(c, { allowApiKey: true });
    const session = await sessions.authorize(actor, c.req.param('id'));
    // 202 while no GPU is assigned: 2.9.0 keeps polling until capabilities appear.
    const pending = (session.status === 'connecting' || session.status === 'waiting') && session.runtime_id === null;
    return c.json(await record(session), pending ? 202 : 200);
  });

  app.delete('/sessions/:id', async (c) => {
    const actor = await auth.actor(c, { allowApiKey: true });
    const session = await sessions.authorize(actor, c.req.param('id'));
    const body = (await readJson(c)) ?? {};
    // Only an object (or no body, or null) may end the session: `[]`, `42` or `"x"` are refused, not read as "no reason".
    if (typeof body !== 'object' || Array.isArray(body)) {
      throw new ArclightError('invalid_request', 'The body must be a JSON object: {reason?}.', { field: '' });
    }
    const reason = (body as { reason?: unknown }).reason;
    if (reason !== undefined && (typeof reason !== 'string' || reason.length > MAX_REASON_LENGTH)) {
      throw new ArclightError('invalid_request', `reason must be a string of at most ${MAX_REASON_LENGTH} characters.`, {
        field: '/reason',
      });
    }
    // The meter stops at termination (its last seconds are charged now); the runtime tells every client why.
    const ended = await services.lifecycle.end(session.id, reason ?? 'The session was ended by its owner.');
    return c.json(await record(ended), 200);
  });
}
