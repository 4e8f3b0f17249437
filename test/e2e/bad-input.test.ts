/**
 * The runtime answers bad input with clear errors and keeps serving: malformed HTTP requests get
 * `{code, message, field?}` bodies with the status their code maps to, malformed data-channel
 * messages get a `command_failed` (correlated by `request_id` when one can be read), and after
 * all of it the runtime is healthy and a valid command still works.
 *
 * Everything runs on 127.0.0.1: the runtime listens there and pins ICE to it.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pattern from '../../models/examples/pattern/index.ts';
import type { Envelope } from '../../protocol/messages.ts';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import type { Logger } from '../../server-kit/log.ts';
import { createWrtcOffer, keepLoopbackCandidates, openRawPeer, type RawPeer } from '../support/raw-peer.ts';

interface LogRecord {
  readonly level: string;
  readonly msg: string;
  readonly fields: Record<string, unknown>;
}

/** A logger that keeps records in memory (and prints nothing), so tests can quote them. */
function captureLogger(records: LogRecord[], bindings: Record<string, unknown> = {}): Logger {
  const at = (level: string) => (msg: string, fields?: Record<string, unknown>) => {
    records.push({ level, msg, fields: { ...bindings, ...fields } });
  };
  return {
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    child: (more) => captureLogger(records, { ...bindings, ...more }),
  };
}

interface HttpResult {
  readonly status: number;
  readonly contentType: string;
  readonly text: string;
  readonly body: Record<string, unknown> | undefined;
}

const MESSAGE_LIMIT = 4096;

describe('bad input', () => {
  const logs: LogRecord[] = [];
  let runtime: Runtime;
  let sessionId: string;
  let transport: string;
  let peer: RawPeer | undefined;
  const peers: RawPeer[] = [];
  const extraPcs: RTCPeerConnection[] = [];

  async function http(
    method: string,
    path: string,
    options: { body?: unknown; raw?: string; headers?: Record<string, string> } = {},
  ): Promise<HttpResult> {
    const headers: Record<string, string> = { ...options.headers };
    let body: string | undefined;
    if (options.raw !== undefined) body = options.raw;
    else if (options.body !== undefined) body = JSON.stringify(options.body);
    if (body !== undefined && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-type'))
      headers['content-type'] = 'application/json';
    const response = await fetch(runtime.url + path, { method, headers, ...(body === undefined ? {} : { body }) });
    const text = await response.text();
    let parsed: Record<string, unknown> | undefined;
    try {
      parsed = JSON.parse(text) as Record<string, unknown>;
    } catch {
      parsed = undefined;
    }
    return { status: response.status, contentType: response.headers.get('content-type') ?? '', text, body: parsed };
  }

  /** Asserts an error response: status, JSON `{code, message, field?}`, and a message that says something. */
  function expectError(
    result: HttpResult,
    status: number,
    code: string,
    options: { field?: string; mentions?: (string | RegExp)[] } = {},
  ): void {
    const context = `HTTP ${result.status} ${result.text}`;
    expect(result.status, context).toBe(status);
    expect(result.contentType, context).toMatch(/application\/json/);
    expect(result.body, context).toBeTypeOf('object');
    expect(result.body!['code'], context).toBe(code);
    const message = result.body!['message'];
    expect(message, context).toBeTypeOf('string');
    expect((message as string).length, context).toBeGreaterThan(10);
    for (const mention of options.mentions ?? []) {
      if (typeof mention === 'string') expect(message as string, context).toContain(mention);
      else expect(message as string, context).toMatch(mention);
    }
    if (options.field !== undefined) expect(result.body!['field'], context).toBe(options.field);
    // Nothing but the documented keys.
    for (const key of Object.keys(result.body!)) expect(['code', 'message', 'field'], context).toContain(key);
  }

  async function registerConnection(): Promise<number> {
    const result = await http('POST', `${transport}/connections`);
    expect(result.status, result.text).toBe(201);
    return result.body!['connection_id'] as number;
  }

  beforeAll(async () => {
    runtime = await startRuntime({
      model: pattern as never,
      port: 0,
      host: '127.0.0.1',
      ice: { hostAddresses: ['127.0.0.1'] },
      playground: false,
      maxMessageBytes: MESSAGE_LIMIT,
      reconnectGraceSeconds: 600,
      logger: captureLogger(logs),
    });
    await runtime.loaded;
    const started = await http('POST', '/start_session', { body: {} });
    expect(started.status, started.text).toBe(200);
    sessionId = started.body!['session_id'] as string;
    transport = `/sessions/${sessionId}/transport/webrtc`;
  });

  afterAll(async () => {
    for (const p of peers) p.close();
    for (const pc of extraPcs) pc.close();
    await runtime?.close();
    // Let wrtc's native threads wind down before the worker exits.
    await new Promise((resolve) => setTimeout(resolve, 200));
  });

  describe('HTTP', () => {
    it('malformed JSON body on POST sdp_params → 400 invalid_json', async () => {
      const cid = await registerConnection();
      const result = await http('POST', `${transport}/connections/${cid}/sdp_params`, { raw: '{"sdp_offer": "v=0' });
      expectError(result, 400, 'invalid_json', { mentions: [/JSON/] });
    });

    it('body without sdp_offer → 400 invalid_request with field /sdp_offer', async () => {
      const cid = await registerConnection();
      const result = await http('POST', `${transport}/connections/${cid}/sdp_params`, { body: { track_mapping: [] } });
      expectError(result, 400, 'invalid_request', { field: '/sdp_offer', mentions: ['sdp_offer'] });
    });

    it('empty body on POST sdp_params → 400 invalid_request', async () => {
      const cid = await registerConnection();
      const result = await http('POST', `${transport}/connections/${cid}/sdp_params`, { raw: '' });
      expectError(result, 400, 'invalid_request');
    });

    it('SDP garbage ("hello") → 400 invalid_sdp', async () => {
      const cid = await registerConnection();
      const result = await http('POST', `${transport}/connections/${cid}/sdp_params`, { body: { sdp_offer: 'hello' } });
      expectError(result, 400, 'invalid_sdp', { mentions: [/SDP/i] });
      // The failure is also what the answer poll reports.
      const poll = await http('GET', `${transport}/connections/${cid}/sdp_params`);
      expectError(poll, 400, 'invalid_sdp');
    });

    it('an SDP-looking but broken offer → 400 invalid_sdp', async () => {
      const cid = await registerConnection();
      // Looks like SDP (v=0, m= lines) but has no ICE credentials, no DTLS fingerprint and a
      // malformed rtpmap: nothing can be negotiated from it.
      const broken = [
        'v=0',
        'o=- 4611731400430051336 2 IN IP4 127.0.0.1',
        's=-',
        't=0 0',
        'm=video 9 UDP/TLS/RTP/SAVPF 96',
        'c=IN IP4 0.0.0.0',
        'a=mid:0',
        'a=recvonly',
        'a=rtpmap:96',
        'a=setup:sideways',
        '',
      ].join('\r\n');
      const result = await http('POST', `${transport}/connections/${cid}/sdp_params`, { body: { sdp_offer: broken } });
      expectError(result, 400, 'invalid_sdp', { mentions: [/SDP|offer/i] });
    });

    it('a real offer cut in half → 400 invalid_sdp', async () => {
      const offer = await createWrtcOffer(runtime.sessions.current!.tracks);
      extraPcs.push(offer.pc);
      const lines = offer.sdp.split('\r\n');
      // Keep the session part and the first m-line header, drop everything after it.
      const firstMedia = lines.findIndex((l) => l.startsWith('m='));
      const truncated = lines.slice(0, firstMedia + 2).join('\r\n') + '\r\na=fingerprint:sha-256 ZZ:Z';
      const cid = await registerConnection();
      const result = await http('POST', `${transport}/connections/${cid}/sdp_params`, { body: { sdp_offer: truncated } });
      expectError(result, 400, 'invalid_sdp');
    });

    it('track_mapping naming a track the model does not have → 404 unknown_track', async () => {
      const offer = await createWrtcOffer(runtime.sessions.current!.tracks);
      extraPcs.push(offer.pc);
      const mapping = offer.mapping.map((entry) => (entry.name === 'main_video' ? { ...entry, name: 'side_video' } : entry));
      const cid = await registerConnection();
      const result = await http('POST', `${transport}/connections/${cid}/sdp_params`, {
        body: { sdp_offer: keepLoopbackCandidates(offer.sdp), track_mapping: mapping },
      });
      expectError(result, 404, 'unknown_track', { mentions: ['side_video'] });
    });

    it('a body over 256 KiB (with Content-Length) → 413 payload_too_large', async () => {
      const cid = await registerConnection();
      const result = await http('POST', `${transport}/connections/${cid}/sdp_params`, {
        body: { sdp_offer: 'v=0\r\n' + 'a'.repeat(300 * 1024) },
      });
      expectError(result, 413, 'payload_too_large', { mentions: [/262144|256/] });
    });

    it('a body over 256 KiB sent chunked (no Content-Length) → 413 payload_too_large', async () => {
      const cid = await registerConnection();
      const chunk = new TextEncoder().encode('a'.repeat(64 * 1024));
      let sent = 0;
      const stream = new ReadableStream<Uint8Array>({
        pull(controller) {
          if (sent === 0) controller.enqueue(new TextEncoder().encode('{"sdp_offer":"v=0\\r\\n'));
          if (sent < 5) controller.enqueue(chunk);
          else {
            controller.enqueue(new TextEncoder().encode('"}'));
            controller.close();
          }
          sent++;
        },
      });
      const response = await fetch(`${runtime.url}${transport}/connections/${cid}/sdp_params`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: stream,
        duplex: 'half',
      } as RequestInit);
      const text = await response.text();
      expectError(
        {
          status: response.status,
          contentType: response.headers.get('content-type') ?? '',
          text,
          body: JSON.parse(text) as Record<string, unknown>,
        },
        413,
        'payload_too_large',
      );
    });

    it('unknown route → 404 not_found', async () => {
      expectError(await http('GET', '/no/such/route'), 404, 'not_found', { mentions: ['/no/such/route'] });
      expectError(await http('POST', '/sessions'), 404, 'not_found');
    });

    it('unknown session id → 404 session_not_found', async () => {
      const unknown = '00000000-0000-4000-8000-000000000000';
      expectError(await http('GET', `/sessions/${unknown}`), 404, 'session_not_found', { mentions: [unknown] });
      expectError(await http('DELETE', `/sessions/${unknown}`), 404, 'session_not_found');
      expectError(await http('POST', `/sessions/${unknown}/transport/webrtc/connections`), 404, 'session_not_found');
      expectError(await http('GET', `/sessions/${unknown}/transport/webrtc/ice_servers`), 404, 'session_not_found');
      expectError(
        await http('POST', `/sessions/${unknown}/transport/webrtc/connections/1/sdp_params`, { body: { sdp_offer: 'hello' } }),
        404,
        'session_not_found',
      );
      expectError(await http('POST', '/stop_session', { body: { session_id: unknown } }), 404, 'session_not_found');
    });

    it('connection id "abc" → 400 invalid_request', async () => {
      for (const bad of ['abc', '0', '-1', '1.5', '99999999999999999999']) {
        const post = await http('POST', `${transport}/connections/${bad}/sdp_params`, { body: { sdp_offer: 'hello' } });
        expectError(post, 400, 'invalid_request', { mentions: [bad] });
        expectError(await http('GET', `${transport}/connections/${bad}/sdp_params`), 400, 'invalid_request');
        expectError(await http('DELETE', `${transport}/connections/${bad}`), 400, 'invalid_request');
      }
    });

    it('unknown connection id → 404 connection_not_found', async () => {
      expectError(
        await http('POST', `${transport}/connections/4242/sdp_params`, { body: { sdp_offer: 'hello' } }),
        404,
        'connection_not_found',
        { mentions: ['4242'] },
      );
      expectError(await http('GET', `${transport}/connections/4242/sdp_params`), 404, 'connection_not_found');
      expectError(await http('DELETE', `${transport}/connections/4242`), 404, 'connection_not_found');
    });

    it('GET sdp_params before any offer → 400 invalid_request', async () => {
      const cid = await registerConnection();
      expectError(await http('GET', `${transport}/connections/${cid}/sdp_params`), 400, 'invalid_request', { mentions: [/offer/] });
    });

    it('an offer on a closed connection → 410 connection_closed', async () => {
      const cid = await registerConnection();
      expect((await http('DELETE', `${transport}/connections/${cid}`)).status).toBe(200);
      expectError(
        await http('POST', `${transport}/connections/${cid}/sdp_params`, { body: { sdp_offer: 'hello' } }),
        410,
        'connection_closed',
      );
    });

    it('Reactor-WebRTC-Version 2.0 → 501, 0.9 → 426, junk → 400', async () => {
      expectError(
        await http('GET', `${transport}/ice_servers`, { headers: { 'Reactor-WebRTC-Version': '2.0' } }),
        501,
        'version_not_implemented',
        { mentions: ['2.0'] },
      );
      expectError(
        await http('POST', `${transport}/connections`, { headers: { 'Reactor-WebRTC-Version': '2.0' } }),
        501,
        'version_not_implemented',
      );
      expectError(
        await http('GET', `${transport}/ice_servers`, { headers: { 'Reactor-WebRTC-Version': '0.9' } }),
        426,
        'unsupported_version',
        { mentions: ['0.9'] },
      );
      expectError(
        await http('GET', `${transport}/ice_servers`, { headers: { 'Reactor-WebRTC-Version': 'banana' } }),
        400,
        'invalid_request',
      );
      // The current version is accepted.
      expect((await http('GET', `${transport}/ice_servers`, { headers: { 'Reactor-WebRTC-Version': '1.0' } })).status).toBe(200);
    });

    it('Reactor-API-Version 99 → 501', async () => {
      const before = runtime.sessions.current?.id;
      expectError(
        await http('POST', '/start_session', { body: {}, headers: { 'Reactor-API-Version': '99' } }),
        501,
        'version_not_implemented',
        { mentions: ['99'] },
      );
      expectError(
        await http('GET', `/sessions/${sessionId}`, { headers: { 'Reactor-API-Version': '99' } }),
        501,
        'version_not_implemented',
      );
      expectError(
        await http('POST', '/stop_session', { body: {}, headers: { 'Reactor-API-Version': '99' } }),
        501,
        'version_not_implemented',
      );
      // Refused before doing anything: the session is untouched.
      expect(runtime.sessions.current?.id).toBe(before);
      expect((await http('GET', `/sessions/${sessionId}`, { headers: { 'Reactor-API-Version': '1' } })).status).toBe(200);
    });
  });

  describe('data channel', () => {
    let rid = 0;
    const nextId = (prefix: string) => `${prefix}-${++rid}`;

    /** Sends `text` and waits for a `command_failed` that arrives after it (optionally with a request_id). */
    async function sendAndExpectFailure(
      text: string,
      requestId?: string,
    ): Promise<{ command: string; code: string; message: string; field?: string; envelope: Envelope }> {
      const from = peer!.messages.length;
      peer!.sendRaw(text);
      const envelope = await peer!.waitFor(
        (m) => m.scope === 'runtime' && m.data.type === 'command_failed' && (requestId === undefined || m.data.request_id === requestId),
        15_000,
        from,
      );
      const data = envelope.data.data as { command: string; code: string; message: string; field?: string };
      expect(data.message, JSON.stringify(envelope)).toBeTypeOf('string');
      expect(data.message.length, JSON.stringify(envelope)).toBeGreaterThan(10);
      return { ...data, envelope };
    }

    beforeAll(async () => {
      peer = await openRawPeer(runtime.url, sessionId);
      peers.push(peer);
      // The runtime greets a ready connection; the model's connected hook says welcome.
      await peer.waitFor((m) => m.scope === 'runtime' && m.data.type === 'connection_info', 15_000);
    });

    it('POST /start_session while a client is connected → 409 session_conflict', async () => {
      expectError(await http('POST', '/start_session', { body: {} }), 409, 'session_conflict', { mentions: [sessionId] });
      expect(runtime.sessions.current?.id).toBe(sessionId);
    });

    it('not JSON → command_failed invalid_message', async () => {
      const failure = await sendAndExpectFailure('this is {not json');
      expect(failure.code).toBe('invalid_message');
      expect(failure.message).toMatch(/JSON/);
      expect(failure.envelope.data.request_id).toBeUndefined();
    });

    it('valid JSON but not an envelope → invalid_message', async () => {
      for (const text of [
        '42',
        'null',
        '"set_color"',
        '[]',
        '{"hello":"world"}',
        '{"scope":"application"}',
        '{"scope":"application","data":{"data":{}}}',
      ]) {
        const failure = await sendAndExpectFailure(text);
        expect(failure.code, text).toBe('invalid_message');
        expect(failure.message, text).toMatch(/envelope/);
      }
    });

    it('a broken envelope with a readable request_id → invalid_message correlated', async () => {
      const id = nextId('bad-scope');
      const failure = await sendAndExpectFailure(
        JSON.stringify({ scope: 'kernel', data: { type: 'set_color', data: { color: '#00ff00' }, request_id: id } }),
        id,
      );
      expect(failure.code).toBe('invalid_message');
      expect(failure.command).toBe('set_color');
    });

    it('unknown command with request_id → unknown_command correlated', async () => {
      const id = nextId('unknown');
      const failure = await sendAndExpectFailure(
        JSON.stringify({ scope: 'application', data: { type: 'launch_rockets', data: {}, request_id: id } }),
        id,
      );
      expect(failure.code).toBe('unknown_command');
      expect(failure.command).toBe('launch_rockets');
      expect(failure.message).toContain('launch_rockets');
      // The message lists what does exist.
      expect(failure.message).toContain('set_color');
      expect(failure.envelope.data.request_id).toBe(id);
    });

    it('invalid params → invalid_params with field', async () => {
      const id = nextId('params');
      const failure = await sendAndExpectFailure(
        JSON.stringify({ scope: 'application', data: { type: 'set_color', data: { color: 'red' }, request_id: id } }),
        id,
      );
      expect(failure.code).toBe('invalid_params');
      expect(failure.field).toBe('/color');
      expect(failure.command).toBe('set_color');

      const missing = nextId('params');
      const failure2 = await sendAndExpectFailure(
        JSON.stringify({ scope: 'application', data: { type: 'set_color', data: {}, request_id: missing } }),
        missing,
      );
      expect(failure2.code).toBe('invalid_params');
      expect(failure2.field).toBe('/color');

      const extra = nextId('params');
      const failure3 = await sendAndExpectFailure(
        JSON.stringify({ scope: 'application', data: { type: 'set_speed', data: { speed: 1, warp: 9 }, request_id: extra } }),
        extra,
      );
      expect(failure3.code).toBe('invalid_params');
      expect(failure3.field).toBe('/warp');

      const notObject = nextId('params');
      const failure4 = await sendAndExpectFailure(
        JSON.stringify({ scope: 'application', data: { type: 'set_speed', data: 'fast', request_id: notObject } }),
        notObject,
      );
      expect(failure4.code).toBe('invalid_params');
    });

    it('oversized message (10 KB, limit 4 KiB) → message_too_large correlated', async () => {
      const id = nextId('big');
      const text = JSON.stringify({
        scope: 'application',
        data: { type: 'set_text', data: { text: 'x', padding: 'p'.repeat(10_000) }, request_id: id },
      });
      expect(Buffer.byteLength(text)).toBeGreaterThan(10_000);
      const failure = await sendAndExpectFailure(text, id);
      expect(failure.code).toBe('message_too_large');
      expect(failure.command).toBe('set_text');
      expect(failure.message).toContain(String(MESSAGE_LIMIT));
    });

    it('oversized non-JSON message → a failure, not a crash', async () => {
      const failure = await sendAndExpectFailure('x'.repeat(10_000));
      expect(['message_too_large', 'invalid_message']).toContain(failure.code);
    });

    it('runtime-scope unknown type → unknown_command', async () => {
      const id = nextId('rt');
      const failure = await sendAndExpectFailure(
        JSON.stringify({ scope: 'runtime', data: { type: 'self_destruct', data: {}, request_id: id } }),
        id,
      );
      expect(failure.code).toBe('unknown_command');
      expect(failure.message).toContain('self_destruct');
    });

    it('track_subscription naming an unknown track → unknown_track', async () => {
      const id = nextId('sub');
      const failure = await sendAndExpectFailure(
        JSON.stringify({
          scope: 'runtime',
          data: { type: 'track_subscription', data: { track: 'side_video', subscribed: false }, request_id: id },
        }),
        id,
      );
      expect(failure.code).toBe('unknown_track');
      expect(failure.message).toContain('side_video');

      const bad = nextId('sub');
      const failure2 = await sendAndExpectFailure(
        JSON.stringify({ scope: 'runtime', data: { type: 'track_subscription', data: { track: 'main_video' }, request_id: bad } }),
        bad,
      );
      expect(failure2.code).toBe('invalid_params');
      expect(failure2.field).toBe('/subscribed');
    });

    it('publish_track naming an unknown input track → unknown_track', async () => {
      const id = nextId('pub');
      const failure = await sendAndExpectFailure(
        JSON.stringify({ scope: 'runtime', data: { type: 'publish_track', data: { track: 'webcam' }, request_id: id } }),
        id,
      );
      expect(failure.code).toBe('unknown_track');
    });

    it('after all of it: /health is 200 and set_color still gets its color_changed reply', async () => {
      const health = await http('GET', '/health');
      expect(health.status, health.text).toBe(200);
      expect(health.body!['status']).toBe('healthy');

      expect(peer!.pc.connectionState).toBe('connected');
      expect(peer!.channel.readyState).toBe('open');
      const id = nextId('ok');
      const from = peer!.messages.length;
      peer!.sendRaw(JSON.stringify({ scope: 'application', data: { type: 'set_color', data: { color: '#00FF00' }, request_id: id } }));
      const reply = await peer!.waitFor((m) => m.data.request_id === id, 15_000, from);
      expect(reply.scope).toBe('application');
      expect(reply.data.type).toBe('color_changed');
      expect(reply.data.data).toEqual({ color: '#00ff00' });

      // A ping still gets its pong.
      const ping = nextId('ping');
      const pong = await (peer!.sendRaw(JSON.stringify({ scope: 'runtime', data: { type: 'ping', request_id: ping } })),
      peer!.waitFor((m) => m.data.request_id === ping, 15_000));
      expect(pong.data.type).toBe('pong');

      // Every message the runtime sent was an envelope; nothing went to the error log.
      expect(peer!.unparsed).toEqual([]);
      expect(
        logs.filter((r) => r.level === 'error'),
        JSON.stringify(logs.filter((r) => r.level === 'error')),
      ).toEqual([]);
    });

    it('an ended session id → 410 session_ended', async () => {
      peer!.close();
      const stopped = await http('POST', '/stop_session', { body: { session_id: sessionId, reason: 'test_over' } });
      expect(stopped.status, stopped.text).toBe(200);
      expectError(await http('GET', `/sessions/${sessionId}`), 410, 'session_ended', { mentions: [sessionId, 'test_over'] });
      expectError(await http('POST', `${transport}/connections`), 410, 'session_ended');
      expectError(await http('DELETE', `/sessions/${sessionId}`), 410, 'session_ended');
      expect((await http('GET', '/health')).status).toBe(200);
    });
  });
});
