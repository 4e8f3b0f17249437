/**
 * The OpenAPI 3.1 document served at `GET /schema`: the runtime's HTTP endpoints, and the
 * model's interface — each command as a request body (its params schema) with its reply as a
 * response, the tracks, and the emission rate — under `components` and `x-arclight`.
 */

import type { Capabilities } from '../protocol/capabilities.ts';
import { ERROR_CODES } from '../protocol/errors.ts';
import { SERVER_VERSION } from '../protocol/versions.ts';
import type { ModelDefinition } from './model/definition.ts';

type Json = Record<string, unknown>;

const errorBody: Json = {
  type: 'object',
  required: ['code', 'message'],
  properties: {
    code: { type: 'string', description: 'Stable error code; see docs/errors.md.', examples: Object.keys(ERROR_CODES) },
    message: { type: 'string' },
    field: { type: 'string', description: 'JSON pointer of the offending field, when one is at fault.' },
  },
};

const errorResponse = (description: string): Json => ({
  description,
  content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
});

const json = (schema: Json, description: string): Json => ({ description, content: { 'application/json': { schema } } });

export function buildOpenApi(model: ModelDefinition<unknown>, capabilities: Capabilities): Json {
  const requestBodies: Json = {};
  const responses: Json = {};
  const commands: Json = {};
  for (const command of capabilities.commands ?? []) {
    requestBodies[command.name] = {
      description: command.description || `Parameters of the ${command.name} command.`,
      required: true,
      content: { 'application/json': { schema: command.schema ?? { type: 'object' } } },
    };
    responses[command.name] =
      command.reply?.schema === undefined
        ? { description: `${command.name} is acknowledged without a body (or replies with an undeclared body).` }
        : {
            description: `Reply to ${command.name}: a "${command.reply.type}" message.`,
            content: { 'application/json': { schema: command.reply.schema } },
          };
    commands[command.name] = {
      description: command.description,
      requestBody: { $ref: `#/components/requestBodies/${command.name}` },
      response: { $ref: `#/components/responses/${command.name}` },
      reply_type: command.reply?.type,
    };
  }
  const sid = { name: 'sid', in: 'path', required: true, schema: { type: 'string' } };
  const cid = { name: 'cid', in: 'path', required: true, schema: { type: 'integer', minimum: 1 } };
  const offerBody = { required: true, content: { 'application/json': { schema: { $ref: '#/components/schemas/SdpOffer' } } } };
  const offerOp = (summary: string): Json => ({
    summary,
    requestBody: offerBody,
    responses: {
      '202': json({ type: 'object', properties: { connection_id: { type: 'integer' } } }, 'Offer accepted; poll GET for the answer.'),
      '400': errorResponse('Invalid offer.'),
      '404': errorResponse('No such session or connection.'),
    },
  });
  const answerOp: Json = {
    summary: 'Poll for the SDP answer.',
    responses: {
      '200': json(
        {
          type: 'object',
          required: ['sdp_answer', 'connection_id'],
          properties: { sdp_answer: { type: 'string' }, connection_id: { type: 'integer' } },
        },
        'The answer.',
      ),
      '202': { description: 'Negotiation in flight; poll again.' },
      '404': errorResponse('No such session or connection.'),
    },
  };
  return {
    openapi: '3.1.0',
    info: {
      title: `${model.name} — Arclight model runtime`,
      version: model.version ?? '0.0.0',
      description:
        `${model.description ?? ''}\n\nCommands travel on the WebRTC data channel as {scope:"application", data:{type, data, request_id}}; they are listed under x-arclight.commands with their parameters (components.requestBodies) and replies (components.responses).`.trim(),
    },
    servers: [{ url: '/' }],
    paths: {
      '/health': {
        get: {
          summary: 'Liveness and lifecycle state.',
          responses: {
            '200': json({ $ref: '#/components/schemas/Health' }, 'Healthy.'),
            '503': json({ $ref: '#/components/schemas/Health' }, 'Unhealthy or still loading.'),
          },
        },
      },
      '/metrics': {
        get: {
          summary: 'Prometheus metrics.',
          responses: { '200': { description: 'Prometheus text format.', content: { 'text/plain': { schema: { type: 'string' } } } } },
        },
      },
      '/schema': { get: { summary: 'This document.', responses: { '200': json({ type: 'object' }, 'OpenAPI 3.1.') } } },
      '/capabilities': {
        get: {
          summary: "The model's tracks, commands and fps.",
          responses: { '200': json({ $ref: '#/components/schemas/Capabilities' }, 'Capabilities.') },
        },
      },
      '/start_session': {
        post: {
          summary: 'Open the local session.',
          requestBody: { content: { 'application/json': { schema: { type: 'object' } } } },
          responses: {
            '200': json({ $ref: '#/components/schemas/Session' }, 'The session.'),
            '409': errorResponse('A session with connected clients is open.'),
            '503': errorResponse('The model is not loaded.'),
          },
        },
      },
      '/stop_session': {
        post: {
          summary: 'End the local session.',
          requestBody: {
            content: {
              'application/json': {
                schema: { type: 'object', properties: { session_id: { type: 'string' }, reason: { type: 'string', maxLength: 64 } } },
              },
            },
          },
          responses: { '200': json({ type: 'object' }, 'Ended.'), '404': errorResponse('No open session.') },
        },
      },
      '/sessions/{sid}': {
        get: {
          summary: 'One session.',
          parameters: [sid],
          responses: {
            '200': json({ $ref: '#/components/schemas/Session' }, 'The session.'),
            '404': errorResponse('Unknown.'),
            '410': errorResponse('Ended.'),
          },
        },
        delete: {
          summary: 'End a session.',
          parameters: [sid],
          responses: { '200': json({ type: 'object' }, 'Ended.'), '404': errorResponse('Unknown.') },
        },
      },
      '/sessions/{sid}/transport/webrtc/ice_servers': {
        get: {
          summary: 'ICE servers: the static ones, then a TURN server with a fresh time-limited credential when the runtime has ice.turn.',
          parameters: [sid],
          responses: { '200': json({ type: 'object' }, 'ICE servers.') },
        },
      },
      '/sessions/{sid}/transport/webrtc/connections': {
        post: {
          summary: 'Register a connection.',
          parameters: [sid],
          responses: { '201': json({ type: 'object' }, 'The connection id and track map.') },
        },
      },
      '/sessions/{sid}/transport/webrtc/connections/{cid}': {
        delete: {
          summary: 'Close a connection for good.',
          parameters: [sid, cid],
          responses: { '200': json({ type: 'object' }, 'Closed.') },
        },
      },
      '/sessions/{sid}/transport/webrtc/connections/{cid}/sdp_params': {
        parameters: [sid, cid],
        post: offerOp('Offer on a registered connection.'),
        put: offerOp('Renegotiate a connection.'),
        get: answerOp,
      },
      '/sessions/{sid}/transport/webrtc/connections/{cid}/ice_candidates': {
        post: {
          summary: 'Trickle ICE: candidates the client gathered after its offer, and/or end_of_candidates.',
          parameters: [sid, cid],
          requestBody: { content: { 'application/json': { schema: { type: 'object' } } } },
          responses: {
            '200': json({ type: 'object' }, 'How many were added.'),
            '400': errorResponse('Not a candidate of the offer.'),
            '409': errorResponse('No offer to add them to.'),
          },
        },
      },
      '/sessions/{sid}/transport/webrtc/sdp_params': {
        parameters: [sid],
        post: offerOp('Offer (2.9.0 signalling; opens a connection).'),
        put: offerOp('Renegotiate (2.9.0 reconnect).'),
        get: answerOp,
      },
      '/sessions/{sid}/uploads': {
        post: {
          summary: 'Reserve an upload (session ready): presigned PUT (15 min) and GET (5 min) URLs.',
          parameters: [sid],
          requestBody: {
            content: {
              'application/json': {
                schema: {
                  type: 'object',
                  required: ['name', 'size', 'mime_type'],
                  properties: { name: { type: 'string' }, size: { type: 'integer', minimum: 1 }, mime_type: { type: 'string' } },
                },
              },
            },
          },
          responses: {
            '201': json(
              { type: 'object', required: ['presigned_id', 'presigned_url', 'path', 'download_url', 'expires_at', 'download_expires_at'] },
              'The slot and its URLs.',
            ),
            '409': errorResponse('The session is not ready.'),
            '413': errorResponse('Over the size limit.'),
            '415': errorResponse('A refused file type.'),
          },
        },
      },
      '/sessions/{sid}/uploads/{id}': {
        parameters: [sid, { name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
        put: {
          summary: 'The bytes, exactly the reserved size (presigned: ?expires&signature).',
          requestBody: { content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary' } } } },
          responses: {
            '200': json({ type: 'object' }, 'Stored.'),
            '403': errorResponse('Forged or expired URL.'),
            '413': errorResponse('More bytes than reserved.'),
          },
        },
        get: {
          summary: 'The bytes back (presigned).',
          responses: { '200': { description: 'The file.' }, '403': errorResponse('Forged or expired URL.') },
        },
      },
      '/sessions/{sid}/clips/{clip}/playlist.m3u8': {
        get: {
          summary: "A clip's HLS (fMP4) playlist, presigned for 24 h (request it on the data channel: request_clip / request_recording).",
          parameters: [sid, { name: 'clip', in: 'path', required: true, schema: { type: 'string' } }],
          responses: {
            '200': { description: 'application/vnd.apple.mpegurl' },
            '403': errorResponse('Forged or expired URL.'),
            '410': errorResponse('More than five minutes after the session ended.'),
          },
        },
      },
      '/sessions/{sid}/recording/{track}/{file}': {
        get: {
          summary: 'A recording file (init.mp4, seg-NNNNN.m4s), presigned.',
          parameters: [
            sid,
            { name: 'track', in: 'path', required: true, schema: { type: 'string' } },
            { name: 'file', in: 'path', required: true, schema: { type: 'string' } },
          ],
          responses: {
            '200': { description: 'video/mp4 or video/iso.segment' },
            '403': errorResponse('Forged or expired URL.'),
            '410': errorResponse('More than five minutes after the session ended.'),
          },
        },
      },
      '/sessions/{sid}/logs': {
        get: {
          summary:
            "A page of the session's log: the model's session.log lines and the runtime's account (docs/protocol.md \"Session logs\").",
          parameters: [
            sid,
            { name: 'after', in: 'query', required: false, schema: { type: 'integer', minimum: 0, default: 0 } },
            { name: 'limit', in: 'query', required: false, schema: { type: 'integer', minimum: 1, maximum: 1000, default: 200 } },
          ],
          responses: {
            '200': json(
              { type: 'object', required: ['lines', 'next', 'dropped', 'missed', 'live'] },
              'Lines with seq > after, oldest first.',
            ),
            '404': errorResponse('Unknown session.'),
            '410': errorResponse('More than five minutes after the session ended (logs_gone).'),
          },
        },
      },
      '/sessions/{sid}/logs/stream': {
        get: {
          summary: "The session's log as server-sent events (log, dropped, end); resumes after Last-Event-ID or ?after.",
          parameters: [sid, { name: 'after', in: 'query', required: false, schema: { type: 'integer', minimum: 0, default: 0 } }],
          responses: {
            '200': { description: 'text/event-stream' },
            '404': errorResponse('Unknown session.'),
            '410': errorResponse('More than five minutes after the session ended (logs_gone).'),
          },
        },
      },
      '/events': {
        get: {
          summary:
            "The runtime's state changes as server-sent events (sessions, connections, model load, encoders, recording); the runtime secret in hosted mode.",
          parameters: [{ name: 'after', in: 'query', required: false, schema: { type: 'integer', minimum: 0, default: 0 } }],
          responses: {
            '200': { description: 'text/event-stream' },
            '401': errorResponse('Hosted runtime: the runtime secret is missing or wrong.'),
          },
        },
      },
    },
    components: {
      schemas: {
        Error: errorBody,
        Health: {
          type: 'object',
          required: ['status', 'state', 'version'],
          properties: {
            status: { enum: ['healthy', 'unhealthy'] },
            state: { enum: ['loading', 'available', 'serving', 'terminated'] },
            detail: { type: ['string', 'null'] },
            version: { type: 'string', description: "Arclight's release (semver), as in server_info.server_version and CHANGELOG.md." },
          },
        },
        Capabilities: {
          type: 'object',
          required: ['protocol_version', 'tracks'],
          properties: {
            protocol_version: { type: 'string' },
            tracks: { type: 'array' },
            commands: { type: 'array' },
            emission_fps: { type: ['number', 'null'] },
            messages: { type: 'array' },
            schema_hash: { type: 'string' },
          },
        },
        Session: {
          type: 'object',
          required: ['session_id', 'state', 'cluster', 'model', 'server_info'],
          properties: {
            session_id: { type: 'string' },
            state: { type: 'string' },
            cluster: { type: 'string' },
            model: { type: 'object' },
            server_info: { type: 'object' },
            selected_transport: { type: 'object' },
            capabilities: { $ref: '#/components/schemas/Capabilities' },
          },
        },
        SdpOffer: {
          type: 'object',
          required: ['sdp_offer'],
          properties: {
            sdp_offer: { type: 'string' },
            track_mapping: { type: 'array' },
            paused_tracks: { type: 'array', items: { type: 'string' } },
          },
        },
      },
      requestBodies,
      responses,
    },
    'x-arclight': {
      server_version: SERVER_VERSION,
      model: { name: model.name, version: model.version ?? null },
      fps: model.fps,
      tracks: capabilities.tracks,
      commands,
      // Declared model → client messages (type → description and data schema), and the hash
      // `arclight types` and clients compare (protocol/schema-hash.ts).
      messages: Object.fromEntries((capabilities.messages ?? []).map((m) => [m.type, { description: m.description, schema: m.schema }])),
      schema_hash: capabilities.schema_hash,
    },
  };
}
