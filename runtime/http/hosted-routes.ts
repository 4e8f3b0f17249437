/**
 * Hosted mode, the routes: the coordinator opens and ends sessions here, and relays the clients'
 * transport calls, all with the runtime secret. The local-mode session endpoints are closed —
 * sessions come from the coordinator, which admits and bills them — and so is every other
 * session path without the secret, so a client cannot reach the runtime around the coordinator.
 */

import { timingSafeEqual } from 'node:crypto';
import { Hono, type Context, type MiddlewareHandler } from 'hono';
import { ArclightError } from '../../protocol/errors.ts';
import { maxDurationReason, RUNTIME_SECRET_HEADER } from '../../protocol/coordinator.ts';
import type { LocalSessionHost } from '../session/local-session-host.ts';
import type { ModelReadiness } from './session-routes.ts';
import { readBodyText } from '../../server-kit/body-limit.ts';
import { MAX_BODY_BYTES } from './json-body.ts';

/** The coordinator's reconnect window, at most an hour (a GPU held longer for nobody is waste). */
const MAX_RECONNECT_WINDOW_SECONDS = 3600;

export function requireRuntimeSecret(secret: string): MiddlewareHandler {
  const expected = Buffer.from(secret);
  return async (c, next) => {
    const given = Buffer.from(c.req.header(RUNTIME_SECRET_HEADER) ?? '');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      throw new ArclightError('unauthorized', 'This runtime is hosted: reach it through the coordinator.');
    }
    await next();
  };
}

export const localSessionsClosed: MiddlewareHandler = async () => {
  throw new ArclightError('forbidden', 'This runtime is hosted: sessions are opened through the coordinator (POST /sessions).');
};

/**
 * The coordinator's JSON body, read under the same size limit as every other body (these routes sit
 * behind the runtime secret, but a limit applied while reading costs nothing); anything that is not
 * a JSON object reads as `{}`, and the checks below name what is missing.
 */
async function coordinatorBody(c: Context): Promise<Record<string, unknown>> {
  const text = await readBodyText(c.req.raw, MAX_BODY_BYTES);
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

export function hostedRoutes(host: LocalSessionHost, readiness: ModelReadiness): Hono {
  const app = new Hono();
  app.post('/hosted/sessions', async (c) => {
    const body = (await coordinatorBody(c)) as {
      session_id?: unknown;
      reconnect_window_seconds?: unknown;
      public_url?: unknown;
      max_duration_seconds?: unknown;
    };
    if (typeof body.session_id !== 'string' || body.session_id.length === 0 || body.session_id.length > 128) {
      throw new ArclightError('invalid_request', 'session_id is required.', { field: '/session_id' });
    }
    const window = body.reconnect_window_seconds;
    if (
      window !== undefined &&
      !(typeof window === 'number' && Number.isInteger(window) && window >= 1 && window <= MAX_RECONNECT_WINDOW_SECONDS)
    ) {
      throw new ArclightError(
        'invalid_request',
        `reconnect_window_seconds must be a whole number of seconds, 1 to ${MAX_RECONNECT_WINDOW_SECONDS}.`,
        { field: '/reconnect_window_seconds' },
      );
    }
    // The session's maximum duration (the lower of the token's and the account's), which this
    // runtime enforces itself from the session's `ready` (Session.startDurationLimit), so media
    // stops at the limit rather than at the coordinator's next housekeeping pass. Absent (an older
    // coordinator): the coordinator alone ends it.
    const maxDuration = body.max_duration_seconds;
    if (maxDuration !== undefined && !(typeof maxDuration === 'number' && Number.isSafeInteger(maxDuration) && maxDuration >= 1)) {
      throw new ArclightError('invalid_request', 'max_duration_seconds must be a whole number of seconds, 1 or more.', {
        field: '/max_duration_seconds',
      });
    }
    readiness.assertReady();
    // Clients reach the session through the coordinator: its clip URLs point there.
    const publicUrl = typeof body.public_url === 'string' && /^https?:\/\/[^/?#]+$/.test(body.public_url) ? body.public_url : undefined;
    const session = await host.start(body.session_id, {
      ...(window === undefined ? {} : { reconnectGraceMs: window * 1000 }),
      ...(publicUrl ? { publicUrl } : {}),
      // Ended with the coordinator's own words for it, so clients hear the same whichever side ends it.
      ...(maxDuration === undefined ? {} : { durationLimit: { ms: maxDuration * 1000, reason: maxDurationReason(maxDuration) } }),
    });
    return c.json(host.describe(session), 200);
  });
  app.delete('/hosted/sessions/:sid', async (c) => {
    const body = (await coordinatorBody(c)) as { reason?: unknown };
    const reason = typeof body.reason === 'string' && body.reason ? body.reason.slice(0, 256) : 'ended by the coordinator';
    const session = await host.stop(c.req.param('sid'), reason, { refuseLateStart: true });
    return c.json({ session_id: session.id, state: 'CLOSED' as const }, 200);
  });
  return app;
}
