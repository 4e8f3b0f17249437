/**
 * WebRTC signalling under /sessions/{sid}/transport/webrtc.
 *
 *   GET    ice_servers                          STUN/TURN servers for the client's peer (TURN
 *                                                credentials are minted per request: no-store)
 *   POST   connections                          mint a connection id (201)
 *   DELETE connections/{cid}                    retire a connection for good
 *   POST   connections/{cid}/sdp_params         offer (202 {connection_id}); PUT renegotiates
 *   GET    connections/{cid}/sdp_params         202 while pending, 200 {sdp_answer, connection_id}
 *   POST   connections/{cid}/ice_candidates     trickled client candidates for the newest offer (200)
 *   POST|PUT|GET sdp_params                     the same for 2.9.0, whose signalling has no cid
 *
 * An offer is answered within the POST when that is quick (it usually is): the 202 then carries
 * the answer (`sdp_answer`, an Arclight extension our client reads instead of a GET), and the
 * first GET finds it too; the POST still answers exactly 202, as 2.9.0 requires. A PUT on a
 * live connection from its current client peer is answered in place on the live peer; one from
 * a fresh client peer (or an ICE restart) keeps the live peer until the new one has answered.
 * Either way an offer that fails costs the client nothing.
 */

import { Hono, type Context } from 'hono';
import { ArclightError } from '../../protocol/errors.ts';
import { iceCandidatesRequestSchema, sdpOfferRequestSchema } from '../../protocol/schemas.ts';
import type {
  IceCandidatesAccepted,
  IceCandidatesRequest,
  IceServerEntry,
  IceServersResponse,
  RegisterConnectionResponse,
  SdpOfferAccepted,
  SdpOfferRequest,
} from '../../protocol/transport.ts';
import type { Connection } from '../session/connection.ts';
import type { LocalSessionHost } from '../session/local-session-host.ts';
import type { Session } from '../session/session.ts';
import { errorResponse } from '../../server-kit/http-errors.ts';
import { readJsonBody } from './json-body.ts';
import { checkWebrtcVersion } from './versions.ts';

/** How long a POST waits for its answer before replying 202 and leaving the rest to polling. */
const INLINE_ANSWER_MS = 2_000;

/** `iceServers(sessionId)`: what a client of that session gets, fresh TURN credentials included. */
export function transportRoutes(host: LocalSessionHost, iceServers: (sessionId: string) => readonly IceServerEntry[]): Hono {
  const app = new Hono();
  const base = '/sessions/:sid/transport/webrtc';
  app.use(`${base}/*`, checkWebrtcVersion);

  app.get(`${base}/ice_servers`, (c) => {
    const session = host.get(c.req.param('sid'));
    const body: IceServersResponse = { ice_servers: iceServers(session.id) };
    // Time-limited credentials: no cache may keep them past their expiry or hand them to another client.
    return c.json(body, 200, { 'cache-control': 'no-store' });
  });

  app.post(`${base}/connections`, (c) => {
    const session = host.get(c.req.param('sid'));
    const connection = session.registerConnection();
    const body: RegisterConnectionResponse = {
      connection_id: connection.id,
      track_map: Object.fromEntries(session.tracks.map((t) => [t.name, { kind: t.kind, direction: t.direction }])),
    };
    return c.json(body, 201);
  });

  app.delete(`${base}/connections/:cid`, (c) => {
    const connection = findConnection(host.get(c.req.param('sid')), c.req.param('cid'), true);
    connection.close();
    return c.json({ connection_id: connection.id, state: 'closed' }, 200);
  });

  const offer = (legacy: boolean, renegotiate: boolean) => async (c: Context) => {
    const session = host.get(c.req.param('sid') ?? '');
    const body = await readJsonBody<SdpOfferRequest>(c, sdpOfferRequestSchema);
    let connection: Connection;
    if (legacy) {
      const previous = session.legacyConnectionId === undefined ? undefined : session.connection(session.legacyConnectionId);
      connection = renegotiate && previous && previous.state !== 'closed' ? previous : session.registerConnection();
      session.legacyConnectionId = connection.id;
    } else {
      connection = findConnection(session, c.req.param('cid') ?? '', false);
    }
    // A failed offer leaves a live connection's peer alone (negotiate checks an offer in place
    // before applying it, and builds a new peer before retiring the old one);
    // the failure is answered here when quick, else recorded for the answer poll.
    const negotiation = connection.negotiate(body);
    negotiation.catch(() => {}); // the outcome is read through connection.answer
    const settledInTime = await Promise.race([
      negotiation.then(
        () => true,
        () => true,
      ),
      new Promise<boolean>((resolve) => setTimeout(() => resolve(false), INLINE_ANSWER_MS)),
    ]);
    const status = connection.answer;
    if (settledInTime && status.state === 'failed') return errorResponse(c, status.error);
    const accepted: SdpOfferAccepted = {
      connection_id: connection.id,
      ...(settledInTime && status.state === 'ready' ? { sdp_answer: status.sdp } : {}),
    };
    return c.json(accepted, 202);
  };

  const answer = (legacy: boolean) => (c: Context) => {
    const session = host.get(c.req.param('sid') ?? '');
    const id = legacy ? session.legacyConnectionId : undefined;
    if (legacy && id === undefined) throw new ArclightError('connection_not_found', 'No offer has been sent for this session.');
    const connection = legacy ? session.connection(id!)! : findConnection(session, c.req.param('cid') ?? '', true);
    const status = connection.answer;
    switch (status.state) {
      case 'ready':
        return c.json({ sdp_answer: status.sdp, connection_id: connection.id }, 200);
      case 'pending':
        return c.body(null, 202);
      case 'failed':
        return errorResponse(c, status.error);
      case 'none':
        throw new ArclightError('invalid_request', `Connection ${connection.id} has no offer yet; POST one to sdp_params first.`);
    }
  };

  app.post(`${base}/connections/:cid/ice_candidates`, async (c) => {
    const connection = findConnection(host.get(c.req.param('sid')), c.req.param('cid'), false);
    const body = await readJsonBody<IceCandidatesRequest>(c, iceCandidatesRequestSchema);
    if (body.candidates.length === 0 && body.end_of_candidates !== true) {
      throw new ArclightError('invalid_request', 'Send at least one candidate, or end_of_candidates: true.', { field: '/candidates' });
    }
    const added = await connection.addIceCandidates(body);
    const reply: IceCandidatesAccepted = { connection_id: connection.id, added };
    return c.json(reply, 200);
  });

  app.post(`${base}/sdp_params`, offer(true, false));
  app.put(`${base}/sdp_params`, offer(true, true));
  app.get(`${base}/sdp_params`, answer(true));
  app.post(`${base}/connections/:cid/sdp_params`, offer(false, false));
  app.put(`${base}/connections/:cid/sdp_params`, offer(false, true));
  app.get(`${base}/connections/:cid/sdp_params`, answer(false));
  return app;
}

function findConnection(session: Session, rawId: string, allowClosed: boolean): Connection {
  const id = Number(rawId);
  if (!/^[1-9][0-9]{0,9}$/.test(rawId) || !Number.isSafeInteger(id)) {
    throw new ArclightError('invalid_request', `Connection id must be a positive integer; got "${rawId}".`);
  }
  const connection = session.connection(id);
  if (!connection) throw new ArclightError('connection_not_found', `Session ${session.id} has no connection ${id}.`);
  if (!allowClosed && connection.state === 'closed') {
    throw new ArclightError('connection_closed', `Connection ${id} is closed; register a new one.`);
  }
  return connection;
}
