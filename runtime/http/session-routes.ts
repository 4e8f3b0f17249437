/**
 * Local-mode session endpoints: the runtime as its own single-session coordinator.
 *
 *   POST   /start_session        open the session (200, SessionResponse)
 *   POST   /stop_session         end it (200)
 *   GET    /session              the open session, if any (reference runtime 3.2)
 *   GET    /sessions/{sid}       one session (our client attaches and reconnects with it)
 *   DELETE /sessions/{sid}       end it (same as stop_session for that id)
 */

import { Hono } from 'hono';
import { ArclightError } from '../../protocol/errors.ts';
import { startSessionRequestSchema, stopSessionRequestSchema } from '../../protocol/schemas.ts';
import type { StartSessionRequest, StopSessionRequest } from '../../protocol/session.ts';
import type { LocalSessionHost } from '../session/local-session-host.ts';
import { readJsonBody } from './json-body.ts';
import { checkApiVersion } from './versions.ts';

export interface ModelReadiness {
  /** Throws `model_not_ready` while the model loads or after its load failed. */
  assertReady(): void;
}

export function sessionRoutes(host: LocalSessionHost, readiness: ModelReadiness): Hono {
  const app = new Hono();
  app.use('/start_session', checkApiVersion);
  app.use('/stop_session', checkApiVersion);
  app.use('/sessions/:sid', checkApiVersion);

  app.post('/start_session', async (c) => {
    await readJsonBody<StartSessionRequest>(c, startSessionRequestSchema, true);
    readiness.assertReady();
    // Clip URLs point at the origin the client used to open the session.
    const session = await host.start(undefined, { publicUrl: new URL(c.req.url).origin });
    return c.json(host.describe(session), 200);
  });

  app.post('/stop_session', async (c) => {
    const body = await readJsonBody<StopSessionRequest>(c, stopSessionRequestSchema, true);
    const session = await host.stop(body.session_id, body.reason || 'stopped');
    return c.json({ session_id: session.id, state: 'CLOSED' as const }, 200);
  });

  app.get('/session', (c) => {
    const session = host.current;
    if (!session) throw new ArclightError('session_not_found', 'No session is open.');
    return c.json(host.describe(session), 200);
  });

  app.get('/sessions/:sid', (c) => c.json(host.describe(host.get(c.req.param('sid'))), 200));

  app.delete('/sessions/:sid', async (c) => {
    const body = await readJsonBody<StopSessionRequest>(c, stopSessionRequestSchema, true);
    const session = await host.stop(c.req.param('sid'), body.reason || 'stopped');
    return c.json({ session_id: session.id, state: 'CLOSED' as const }, 200);
  });

  return app;
}
