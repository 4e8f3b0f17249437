/**
 * The runtimes' side of the coordinator: registration and heartbeats, authenticated with the
 * deployment's shared runtime secret (header `Arclight-Runtime-Secret`). Without a configured
 * secret these routes refuse everyone: no runtime can join an unconfigured coordinator.
 */

import { timingSafeEqual } from 'node:crypto';
import type { Context, Hono } from 'hono';
import type { Capabilities } from '../../protocol/capabilities.ts';
import { RUNTIME_SECRET_HEADER } from '../../protocol/coordinator.ts';
import { ArclightError } from '../../protocol/errors.ts';
import type { ModelCatalog } from '../models/model-catalog.ts';
import type { RuntimeRegistry } from '../runtimes/runtime-registry.ts';
import type { SessionLifecycle } from '../sessions/session-lifecycle.ts';
import type { SessionStore } from '../sessions/session-store.ts';
import { readJson } from './request-body.ts';

export interface RuntimeRouteServices {
  readonly registry: RuntimeRegistry;
  readonly catalog: ModelCatalog;
  readonly sessions: SessionStore;
  readonly lifecycle: SessionLifecycle;
  /** Undefined: runtime registration is off. */
  readonly runtimeSecret: string | undefined;
  /** Called after a registration or heartbeat: waiting sessions may now fit. */
  readonly onCapacity: () => void;
}

const RUNTIME_ID = /^[A-Za-z0-9._-]{1,128}$/;
const MAX_SLOTS = 64;

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function registerRuntimeRoutes(app: Hono, services: RuntimeRouteServices): void {
  const expected = services.runtimeSecret === undefined ? undefined : Buffer.from(services.runtimeSecret);
  const authenticate = (c: Context): void => {
    if (!expected)
      throw new ArclightError('forbidden', 'Runtime registration is not enabled on this coordinator (no runtime secret configured).');
    const given = Buffer.from(c.req.header(RUNTIME_SECRET_HEADER) ?? '');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      throw new ArclightError('unauthorized', `Send the runtime secret in the ${RUNTIME_SECRET_HEADER} header.`);
    }
  };

  app.post('/runtimes', async (c) => {
    authenticate(c);
    const body = await readJson(c);
    if (!isObject(body)) throw new ArclightError('invalid_request', 'The body must be a JSON object.', { field: '' });
    const { id, url, model, slots = 1, capabilities } = body;
    if (typeof id !== 'string' || !RUNTIME_ID.test(id))
      throw new ArclightError('invalid_request', 'id must be 1–128 letters, digits, ".", "_" or "-".', { field: '/id' });
    if (typeof url !== 'string' || !/^https?:\/\/[^\s/]+/.test(url))
      throw new ArclightError('invalid_request', "url must be the runtime's http(s) base URL.", { field: '/url' });
    if (typeof slots !== 'number' || !Number.isInteger(slots) || slots < 1 || slots > MAX_SLOTS) {
      throw new ArclightError('invalid_request', `slots must be an integer from 1 to ${MAX_SLOTS}.`, { field: '/slots' });
    }
    if (!isObject(capabilities) || !Array.isArray(capabilities['tracks'])) {
      throw new ArclightError('invalid_request', "capabilities must be the runtime's capabilities document.", { field: '/capabilities' });
    }
    const catalogModel = typeof model === 'string' ? await services.catalog.byName(model) : undefined;
    if (!catalogModel)
      throw new ArclightError('invalid_request', `model must name a model in the catalog; "${String(model)}" is not one.`, {
        field: '/model',
      });
    await services.registry.register({
      id,
      url: url.replace(/\/+$/, ''),
      modelId: catalogModel.id,
      slots,
      capabilities: capabilities as unknown as Capabilities,
    });
    services.onCapacity();
    return c.json({ id, heartbeat_interval_ms: services.registry.heartbeatIntervalMs }, 200);
  });

  /** A session this runtime holds, or 404. */
  const heldSession = async (runtimeId: string, sessionId: string) => {
    const session = await services.sessions.get(sessionId);
    if (!session || session.runtime_id !== runtimeId) throw new ArclightError('session_not_found', 'This runtime holds no such session.');
    return session;
  };

  // The runtime's first ready client: the session is ready and its meter starts.
  app.post('/runtimes/:id/sessions/:sid/ready', async (c) => {
    authenticate(c);
    const session = await heldSession(c.req.param('id'), c.req.param('sid'));
    await services.sessions.markReady(session.id);
    return c.json({ session_id: session.id }, 200);
  });

  // The runtime ended the session itself (idle timeout after a disconnect, the model ended it).
  app.post('/runtimes/:id/sessions/:sid/ended', async (c) => {
    authenticate(c);
    const session = await heldSession(c.req.param('id'), c.req.param('sid'));
    const body = await readJson(c);
    // Checked before anything ends: a body the runtime would never send (not an object, a
    // reason that is not text) is a fault to report, not a request to end the session.
    if (!isObject(body)) throw new ArclightError('invalid_request', 'The body must be a JSON object: {reason?}.', { field: '' });
    if (body['reason'] !== undefined && typeof body['reason'] !== 'string')
      throw new ArclightError('invalid_request', 'reason must be text.', { field: '/reason' });
    const reason = typeof body['reason'] === 'string' ? body['reason'].slice(0, 256) : 'ended by the runtime';
    await services.lifecycle.end(session.id, reason, { fromRuntime: true });
    services.onCapacity();
    return c.json({ session_id: session.id }, 200);
  });

  app.post('/runtimes/:id/heartbeat', async (c) => {
    authenticate(c);
    const body = await readJson(c);
    if (!isObject(body)) throw new ArclightError('invalid_request', 'The body must be a JSON object: {draining?}.', { field: '' });
    if (body['draining'] !== undefined && typeof body['draining'] !== 'boolean') {
      throw new ArclightError('invalid_request', 'draining must be true or false.', { field: '/draining' });
    }
    const draining = body['draining'] === true;
    if (!(await services.registry.heartbeat(c.req.param('id'), draining))) {
      throw new ArclightError('not_found', 'This runtime is not registered (or was declared gone); register again.');
    }
    services.onCapacity();
    return c.json({ heartbeat_interval_ms: services.registry.heartbeatIntervalMs }, 200);
  });
}
