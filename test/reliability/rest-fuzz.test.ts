/**
 * REST input fuzzing (issue 8 part 1): every endpoint that takes a body or parameters, on a real
 * coordinator and a real local-mode runtime on 127.0.0.1, gets generated bad bodies —
 * wrong types, missing and extra fields, huge strings, NaN/Infinity (as JSON values and as raw
 * text), 10,000-deep nesting, `__proto__`/`constructor` keys, invalid UTF-8, bodies over the
 * documented limits — and bad path parameters. Every answer must be a 4xx `{code, message}` with a
 * code from protocol/errors.ts, nothing may reach a handler (no token, session or runtime row, no
 * upload slot, the session stays open and its client connected), and /health still answers.
 *
 * FUZZ_RUNS sets the generated bodies per property (fuzz-support.ts; docs/reliability.md).
 *
 * Which engine runs what (issue 20 part 7; docs/testing.md "Which engine runs what"): the
 * coordinator's suite and the relay-and-hosted suite run on SQLite and on PostgreSQL, each with
 * the full FUZZ_RUNS — their requests are checked against the database (API keys, tokens and
 * bindings; the runtime and session rows that runtime calls name), bad path ids and body strings
 * reach its queries as parameters (a NUL, which PostgreSQL's text cannot hold and SQLite's can, is
 * where the engines differ), and the "no side effect" checks count rows on each. The local-mode
 * runtime and /playground/token suites have no coordinator and run once.
 */

import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCoordinator, type Coordinator } from '../../coordinator/index.ts';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import uploadModel from '../fixtures/upload-model.ts';
import { ENGINES, freshDatabase } from '../coordinator/storage-engines.ts';
import { startHostedStack, type HostedStack } from '../support/hosted-stack.ts';
import { openRawPeer, type RawPeer } from '../support/raw-peer.ts';
import { waitUntil } from '../support/video-probe.ts';
import { RUNTIME_SECRET_HEADER } from '../../protocol/coordinator.ts';
import { WEBRTC_VERSION, WEBRTC_VERSION_HEADER } from '../../protocol/versions.ts';
import {
  FUZZ_RUNS,
  FUZZ_TIMEOUT_MS,
  INVALID_UTF8,
  anyValue,
  badObject,
  expectCleanError,
  fuzzParams,
  hostileTexts,
  invalidUtf8InStrings,
  isObject,
  send,
  sent,
  show,
  type Answer,
  type RawBody,
} from './fuzz-support.ts';

const SECRET = 'fuzz-runtime-secret-0123456789abcdef';
const COORDINATOR_LIMIT = 64 * 1024;
const RUNTIME_LIMIT = 256 * 1024;

/**
 * Path parameters: anything a client could put in the segment, percent-encoded — except the small
 * positive integers, which name the suites' live connections (ids count up from 1): fc.string()
 * draws "1" now and then, and that is a good id, answered 200. Larger integers stay in and must
 * get connection_not_found.
 */
const LIVE_CONNECTION_ID = /^[1-9][0-9]{0,2}$/;
const badId: fc.Arbitrary<string> = fc
  .oneof(
    fc.string({ minLength: 1, maxLength: 64 }),
    fc.fullUnicodeString({ minLength: 1, maxLength: 32 }),
    fc.uuid(),
    fc.constantFrom(
      'null',
      'undefined',
      '__proto__',
      'constructor',
      'prototype',
      '0',
      '-1',
      '100000',
      '1e999',
      'NaN',
      '%',
      '%00',
      '\u0000',
      "' OR 1=1 --",
      '../../etc/passwd',
      'a'.repeat(5000),
      'é',
      '💥',
    ),
  )
  .filter((id) => !LIVE_CONNECTION_ID.test(id))
  .map((id) => encodeURIComponent(id));

const isPositiveInt = (v: unknown) => typeof v === 'number' && Number.isInteger(v) && v >= 1;
const str = (v: unknown, max = Infinity, min = 1) => typeof v === 'string' && v.length >= min && v.length <= max;

/** Health and no prototype pollution, after each property. */
async function expectAlive(url: string): Promise<void> {
  const health = await fetch(`${url}/health`);
  expect(health.status).toBe(200);
  expect(({} as Record<string, unknown>)['polluted']).toBeUndefined();
  expect(Object.prototype).not.toHaveProperty('polluted');
}

interface BodyEndpoint {
  readonly label: string;
  readonly method: string;
  readonly path: () => string;
  readonly headers: () => Record<string, string>;
  readonly valid: Record<string, unknown>;
  readonly accepts: Record<string, (value: unknown) => boolean>;
  readonly required: readonly string[];
  /** A body whose one typed field holds `inner` (raw JSON text). */
  readonly poison: (inner: string) => string;
  readonly limit: number;
  /**
   * The codes a refused body may get, where a body that got through would also be a 4xx (a
   * runtime that already hosts a session answers a valid /hosted/sessions 409): only these
   * show that the body itself was refused.
   */
  readonly refusals?: readonly string[];
}

const BODY_REFUSALS = ['invalid_request', 'invalid_json', 'payload_too_large'] as const;

function expectRefused(e: BodyEndpoint, answer: Answer, context: string): void {
  expectCleanError(answer, context);
  if (e.refusals) expect(e.refusals, `${context} → ${answer.text.slice(0, 200)}`).toContain((answer.body as { code: string }).code);
}

/** The generated and the fixed bad bodies of one endpoint, each answered with a clean 4xx. */
function fuzzBodies(base: () => string, endpoint: () => BodyEndpoint, sideEffects: () => Promise<void>): void {
  it('generated bad objects → clean 4xx, no side effect', { timeout: FUZZ_TIMEOUT_MS }, async () => {
    const e = endpoint();
    await fc.assert(
      fc.asyncProperty(badObject(e.valid, e.accepts, e.required), async (body) => {
        const text = JSON.stringify(body);
        expectRefused(e, await send(e.label, base() + e.path(), e.method, text, e.headers()), `${e.label} ${show(text)}`);
      }),
      fuzzParams(),
    );
    await sideEffects();
    await expectAlive(base());
  });

  it(
    'non-JSON, NaN, deep nesting, __proto__, invalid UTF-8, oversized → clean 4xx, no side effect',
    { timeout: FUZZ_TIMEOUT_MS },
    async () => {
      const e = endpoint();
      const fixed = hostileTexts(e.valid, e.poison, e.limit, e.required.length > 0);
      for (const { name, body } of fixed) {
        expectRefused(e, await send(e.label, base() + e.path(), e.method, body, e.headers()), `${e.label} [${name}] ${show(body)}`);
      }
      // Any JSON value at all as the whole body (objects only where they break a rule).
      await fc.assert(
        fc.asyncProperty(
          anyValue.filter((v) => !isObject(JSON.parse(JSON.stringify(v ?? null)) as unknown)),
          async (value) => {
            const text = JSON.stringify(value ?? null) ?? 'null';
            // `null` is "no body" where the body is optional (the runtime's stop/start_session, 2.9.0 compatibility).
            if (text === 'null' && e.required.length === 0) return;
            expectRefused(e, await send(e.label, base() + e.path(), e.method, text, e.headers()), `${e.label} ${show(text)}`);
          },
        ),
        fuzzParams(),
      );
      // Invalid UTF-8 amid generated text inside the string values of an otherwise valid body (a
      // quarter of the count: the fixed sequences above already cover each kind once).
      const around = fc.string({ maxLength: 24 }).map((text) => JSON.stringify(text).slice(1, -1));
      await fc.assert(
        fc.asyncProperty(fc.constantFrom(...INVALID_UTF8), around, around, fc.nat(), async ({ bytes }, before, after, pick) => {
          const bodies = invalidUtf8InStrings(e.valid, bytes, before, after);
          const body = bodies[pick % bodies.length]!;
          const answer = await send(e.label, base() + e.path(), e.method, body, e.headers());
          expectRefused(e, answer, `${e.label} ${show(body)}`);
        }),
        fuzzParams(Math.ceil(FUZZ_RUNS / 4)),
      );
      await sideEffects();
      await expectAlive(base());
    },
  );
}

/** Bad path parameters (with a valid body where one is needed) → clean 4xx. */
async function fuzzIds(
  label: string,
  url: string,
  method: string,
  path: (id: string) => string,
  headers: Record<string, string>,
  body?: RawBody,
): Promise<void> {
  await fc.assert(
    fc.asyncProperty(badId, async (id) => {
      expectCleanError(await send(label, url + path(id), method, body, headers), `${label} id=${id.slice(0, 80)}`);
    }),
    fuzzParams(),
  );
}

/**
 * What an `sdp_params` body may hold, for the runtime and the coordinator's relay alike.
 * Conservative: any string offer counts as accepted (a non-SDP one gets invalid_sdp, also a 4xx).
 */
const SDP_PARAMS_ACCEPTS: BodyEndpoint['accepts'] = {
  sdp_offer: (v) => typeof v === 'string' && v.length > 0,
  track_mapping: (v) => v === undefined || Array.isArray(v),
  paused_tracks: (v) => v === undefined || Array.isArray(v),
  client_info: (v) => v === undefined || isObject(v),
};

/** The requests sent since `before` (a copy of `sent`), per label: what one suite sent. */
const sentSince = (before: ReadonlyMap<string, number>): Record<string, number> =>
  Object.fromEntries([...sent].map(([label, n]) => [label, n - (before.get(label) ?? 0)] as const).filter(([, n]) => n > 0));

describe.each(ENGINES)('REST fuzzing: coordinator on %s', (engine) => {
  let sentBefore: ReadonlyMap<string, number>;
  let coordinator: Coordinator;
  let apiKey: string;
  let token: string;
  let sessionId: string;
  const rows = async () => {
    const { db } = coordinator.storage;
    const count = async (table: 'tokens' | 'sessions' | 'runtimes' | 'token_bindings') =>
      Number(
        (
          (await db
            .selectFrom(table)
            .select((eb) => eb.fn.countAll().as('n'))
            .executeTakeFirstOrThrow()) as { n: number | string }
        ).n,
      );
    return {
      tokens: await count('tokens'),
      sessions: await count('sessions'),
      runtimes: await count('runtimes'),
      bindings: await count('token_bindings'),
    };
  };
  let baseline: Awaited<ReturnType<typeof rows>>;
  const unchanged = async () => {
    expect(await rows()).toEqual(baseline);
    const session = await coordinator.sessions.get(sessionId);
    expect(session?.status).not.toBe('ended');
  };
  const url = () => coordinator.url;

  beforeAll(async () => {
    sentBefore = new Map(sent);
    coordinator = await startCoordinator({
      database: await freshDatabase(engine),
      port: 0,
      host: '127.0.0.1',
      meterFlushMs: 0,
      runtimeSecret: SECRET,
    });
    const account = await coordinator.accounts.create('Fuzz', { concurrentSessions: 1000, sessionsPerMinute: 1000 });
    await coordinator.ledger.grantPromotional(account.id, 1_000_000);
    ({ key: apiKey } = await coordinator.apiKeys.create(account.id));
    await coordinator.catalog.add('pattern', 5);
    await coordinator.catalog.add('other', 5);
    const minted = await fetch(`${url()}/tokens`, {
      method: 'POST',
      headers: { 'Service-API-Key': apiKey, 'content-type': 'application/json' },
      body: JSON.stringify({ authorization_details: [{ type: 'session', resources: { models: { match: ['pattern'] } } }] }),
    });
    expect(minted.status).toBe(200);
    token = ((await minted.json()) as { token: string }).token;
    const created = await fetch(`${url()}/sessions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: { name: 'pattern' },
        client_info: { sdk_version: '2.9.0', sdk_type: 'js' },
        supported_transports: [{ protocol: 'webrtc', version: '1.0' }],
      }),
    });
    expect(created.status).toBe(200);
    sessionId = ((await created.json()) as { session_id: string }).session_id;
    // A runtime of another model, so the session above stays waiting (nothing is placed on it).
    const registered = await fetch(`${url()}/runtimes`, {
      method: 'POST',
      headers: { 'Arclight-Runtime-Secret': SECRET, 'content-type': 'application/json' },
      body: JSON.stringify({ id: 'rt-1', url: 'http://127.0.0.1:9', model: 'other', slots: 1, capabilities: { tracks: [] } }),
    });
    expect(registered.status, await registered.clone().text()).toBe(200);
    baseline = await rows();
  });

  afterAll(async () => {
    await coordinator?.close();
    console.info(`coordinator requests sent (${engine}): ${JSON.stringify(sentSince(sentBefore))}`);
  });

  describe('POST /tokens', () => {
    fuzzBodies(
      url,
      () => ({
        label: 'POST /tokens',
        method: 'POST',
        path: () => '/tokens',
        headers: () => ({ 'Service-API-Key': apiKey }),
        valid: {},
        accepts: {
          expires_after: (v) => v === undefined || isPositiveInt(v),
          // Conservative: anything shaped like one session entry counts as accepted (not "bad").
          authorization_details: (v) =>
            v === undefined ||
            (isObject(v) && v['type'] === 'session') ||
            (Array.isArray(v) && v.length === 1 && isObject(v[0]) && v[0]['type'] === 'session'),
        },
        required: [],
        poison: (inner) => `{"expires_after":${inner}}`,
        limit: COORDINATOR_LIMIT,
      }),
      unchanged,
    );
  });

  describe('POST /sessions', () => {
    fuzzBodies(
      url,
      () => ({
        label: 'POST /sessions',
        method: 'POST',
        path: () => '/sessions',
        headers: () => ({ authorization: `Bearer ${token}` }),
        valid: {
          model: { name: 'pattern' },
          client_info: { sdk_version: '2.9.0', sdk_type: 'js' },
          supported_transports: [{ protocol: 'webrtc', version: '1.0' }],
        },
        accepts: { model: (v) => isObject(v) && v['name'] === 'pattern' },
        required: ['model'],
        poison: (inner) => `{"model":${inner}}`,
        limit: COORDINATOR_LIMIT,
      }),
      unchanged,
    );
  });

  describe('DELETE /sessions/:id', () => {
    fuzzBodies(
      url,
      () => ({
        label: 'DELETE /sessions/:id',
        method: 'DELETE',
        path: () => `/sessions/${sessionId}`,
        headers: () => ({ authorization: `Bearer ${token}` }),
        valid: {},
        accepts: { reason: (v) => v === undefined || str(v, 256, 0) },
        required: [],
        poison: (inner) => `{"reason":${inner}}`,
        limit: COORDINATOR_LIMIT,
      }),
      unchanged,
    );

    it('bad ids → clean 4xx', { timeout: FUZZ_TIMEOUT_MS }, async () => {
      await fuzzIds('DELETE /sessions/:id', url(), 'DELETE', (id) => `/sessions/${id}`, { authorization: `Bearer ${token}` });
      await unchanged();
    });
  });

  it('GET /sessions/:id: bad ids → clean 4xx', { timeout: FUZZ_TIMEOUT_MS }, async () => {
    await fuzzIds('GET /sessions/:id', url(), 'GET', (id) => `/sessions/${id}`, { authorization: `Bearer ${token}` });
    await unchanged();
    await expectAlive(url());
  });

  describe('POST /sessions/:id/uploads', () => {
    // No runtime serves the session: the coordinator answers before relaying, whatever the body.
    fuzzBodies(
      url,
      () => ({
        label: 'POST /sessions/:id/uploads',
        method: 'POST',
        path: () => `/sessions/${sessionId}/uploads`,
        headers: () => ({ authorization: `Bearer ${token}` }),
        valid: { name: 'a.png', size: 10, mime_type: 'image/png' },
        accepts: {
          name: (v) => str(v, 1024),
          size: isPositiveInt,
          mime_type: (v) => typeof v === 'string' && /^[\w.+-]+\/[\w.+-]+$/.test(v),
        },
        required: ['name', 'size', 'mime_type'],
        poison: (inner) => `{"name":${inner},"size":10,"mime_type":"image/png"}`,
        limit: COORDINATOR_LIMIT,
      }),
      unchanged,
    );

    it('bad ids → clean 4xx', { timeout: FUZZ_TIMEOUT_MS }, async () => {
      await fuzzIds(
        'POST /sessions/:id/uploads',
        url(),
        'POST',
        (id) => `/sessions/${id}/uploads`,
        { authorization: `Bearer ${token}` },
        JSON.stringify({ name: 'a.png', size: 10, mime_type: 'image/png' }),
      );
      await unchanged();
    });
  });

  describe('POST /runtimes', () => {
    fuzzBodies(
      url,
      () => ({
        label: 'POST /runtimes',
        method: 'POST',
        path: () => '/runtimes',
        headers: () => ({ 'Arclight-Runtime-Secret': SECRET }),
        valid: { id: 'rt-fuzz', url: 'http://127.0.0.1:9', model: 'other', slots: 1, capabilities: { tracks: [] } },
        accepts: {
          id: (v) => typeof v === 'string' && /^[A-Za-z0-9._-]{1,128}$/.test(v),
          url: (v) => typeof v === 'string' && /^https?:\/\/[^\s/]+/.test(v),
          model: (v) => v === 'other' || v === 'pattern',
          slots: (v) => v === undefined || (isPositiveInt(v) && (v as number) <= 64),
          capabilities: (v) => isObject(v) && Array.isArray(v['tracks']),
        },
        required: ['id', 'url', 'model', 'capabilities'],
        poison: (inner) => `{"id":${inner},"url":"http://127.0.0.1:9","model":"other","capabilities":{"tracks":[]}}`,
        limit: COORDINATOR_LIMIT,
      }),
      unchanged,
    );
  });

  describe('POST /runtimes/:id/heartbeat', () => {
    fuzzBodies(
      url,
      () => ({
        label: 'POST /runtimes/:id/heartbeat',
        method: 'POST',
        path: () => '/runtimes/rt-1/heartbeat',
        headers: () => ({ 'Arclight-Runtime-Secret': SECRET }),
        valid: { draining: false },
        accepts: { draining: (v) => v === undefined || typeof v === 'boolean' },
        required: [],
        poison: (inner) => `{"draining":${inner}}`,
        limit: COORDINATOR_LIMIT,
      }),
      async () => {
        await unchanged();
        // Not marked draining by a bad body.
        const runtime = await coordinator.storage.db.selectFrom('runtimes').selectAll().where('id', '=', 'rt-1').executeTakeFirstOrThrow();
        expect(runtime.draining).toBe(0);
      },
    );

    it('bad ids → clean 4xx', { timeout: FUZZ_TIMEOUT_MS }, async () => {
      await fuzzIds(
        'POST /runtimes/:id/heartbeat',
        url(),
        'POST',
        (id) => `/runtimes/${id}/heartbeat`,
        { 'Arclight-Runtime-Secret': SECRET },
        '{"draining":true}',
      );
      await unchanged();
    });
  });

  // What the generated ids above hit now and then, fixed: PostgreSQL's text cannot hold U+0000
  // (SQLite's can), so a NUL that reaches a query fails there instead of matching nothing.
  it('a NUL (U+0000) in a path id or a looked-up body string → clean 4xx; a runtime heartbeating beside it is answered', async () => {
    const bearer = { authorization: `Bearer ${token}` };
    const runtimeSecret = { 'Arclight-Runtime-Secret': SECRET };
    const mint = (resources: Record<string, unknown>) => JSON.stringify({ authorization_details: [{ type: 'session', resources }] });
    const cases: ReadonlyArray<readonly [string, string, string, RawBody | undefined, Record<string, string>]> = [
      ['GET /sessions/:id', 'GET', '/sessions/%00', undefined, bearer],
      ['DELETE /sessions/:id', 'DELETE', '/sessions/%00', undefined, bearer],
      ['GET /sessions/:id/logs', 'GET', '/sessions/%00/logs', undefined, bearer],
      [
        'POST /sessions/:id/uploads',
        'POST',
        '/sessions/%00/uploads',
        JSON.stringify({ name: 'a.png', size: 10, mime_type: 'image/png' }),
        bearer,
      ],
      ['PUT /sessions/:id/uploads/:upload', 'PUT', '/sessions/%00/uploads/x', undefined, {}],
      ['GET /sessions/:id/clips/:clip/playlist.m3u8', 'GET', '/sessions/%00/clips/x/playlist.m3u8', undefined, {}],
      [
        'GET /sessions/:id/transport/webrtc/ice_servers',
        'GET',
        '/sessions/%00/transport/webrtc/ice_servers',
        undefined,
        { ...bearer, [WEBRTC_VERSION_HEADER]: WEBRTC_VERSION },
      ],
      ['POST /sessions (model name)', 'POST', '/sessions', JSON.stringify({ model: { name: '\u0000' } }), bearer],
      ['POST /tokens (match)', 'POST', '/tokens', mint({ models: { match: ['\u0000'] } }), { 'Service-API-Key': apiKey }],
      [
        'POST /tokens (bind)',
        'POST',
        '/tokens',
        mint({ models: { match: ['pattern'] }, sessions: { bind: ['\u0000'] } }),
        { 'Service-API-Key': apiKey },
      ],
      [
        'POST /runtimes (model)',
        'POST',
        '/runtimes',
        JSON.stringify({ id: 'rt-nul', url: 'http://127.0.0.1:9', model: '\u0000', capabilities: { tracks: [] } }),
        runtimeSecret,
      ],
    ];
    // Every case is sent and judged before the test fails, so a failure lists all the routes at fault.
    const faults: string[] = [];
    const judge = (answer: Answer, context: string, check: () => void) => {
      try {
        check();
      } catch {
        faults.push(`${context} → HTTP ${answer.status} ${answer.text.slice(0, 120)}`);
      }
    };
    for (const [label, method, path, body, headers] of cases) {
      const answer = await send(`NUL: ${label}`, url() + path, method, body, headers);
      judge(answer, `${label}: ${method} ${path} ${show(body)}`, () => expectCleanError(answer, label));
    }
    // Heartbeats that arrive together are written together: a NUL runtime id sent at the same
    // moment as a registered runtime's beat must not take that beat down with it.
    const [registered, nul] = await Promise.all([
      send(
        'NUL: POST /runtimes/:id/heartbeat (registered)',
        `${url()}/runtimes/rt-1/heartbeat`,
        'POST',
        '{"draining":false}',
        runtimeSecret,
      ),
      send('NUL: POST /runtimes/:id/heartbeat', `${url()}/runtimes/%00/heartbeat`, 'POST', '{"draining":false}', runtimeSecret),
    ]);
    judge(registered, "rt-1's heartbeat, sent beside a NUL one", () => expect(registered.status).toBe(200));
    judge(nul, 'POST /runtimes/%00/heartbeat', () => expectCleanError(nul, 'heartbeat'));
    expect(faults).toEqual([]);
    await unchanged();
    await expectAlive(url());
  });
});

describe('REST fuzzing: runtime (local mode)', () => {
  let runtime: Runtime;
  let sessionId: string;
  let peer: RawPeer;
  let cid: number;
  const url = () => runtime.url;
  const transport = () => `/sessions/${sessionId}/transport/webrtc`;
  const unchanged = async () => {
    expect(runtime.sessions.current?.id).toBe(sessionId);
    expect(peer.pc.connectionState).toBe('connected');
    expect(peer.channel.readyState).toBe('open');
  };

  beforeAll(async () => {
    runtime = await startRuntime({
      model: uploadModel as never,
      port: 0,
      host: '127.0.0.1',
      ice: { hostAddresses: ['127.0.0.1'] },
      playground: false,
      reconnectGraceSeconds: 600,
      // One slot: a reservation made by a bad body would make the valid one at the end fail.
      uploads: { maxFilesPerSession: 1 },
    });
    await runtime.loaded;
    const started = await fetch(`${url()}/start_session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(started.status).toBe(200);
    sessionId = ((await started.json()) as { session_id: string }).session_id;
    peer = await openRawPeer(url(), sessionId);
    await peer.waitFor((m) => m.scope === 'runtime' && m.data.type === 'connection_info', 15_000);
    const registered = await fetch(`${url()}${transport()}/connections`, { method: 'POST' });
    expect(registered.status).toBe(201);
    cid = ((await registered.json()) as { connection_id: number }).connection_id;
  });

  afterAll(async () => {
    peer?.close();
    await runtime?.close();
    await new Promise((resolve) => setTimeout(resolve, 200));
    console.info(`runtime requests sent: ${JSON.stringify(Object.fromEntries([...sent].filter(([k]) => k.startsWith('runtime'))))}`);
  });

  describe('POST /start_session', () => {
    fuzzBodies(
      url,
      () => ({
        label: 'runtime POST /start_session',
        method: 'POST',
        path: () => '/start_session',
        headers: () => ({}),
        valid: {},
        accepts: { extra_args: (v) => v === undefined || isObject(v), client_info: (v) => v === undefined || isObject(v) },
        required: [],
        poison: (inner) => `{"extra_args":${inner}}`,
        limit: RUNTIME_LIMIT,
      }),
      unchanged,
    );
  });

  describe('POST /stop_session', () => {
    fuzzBodies(
      url,
      () => ({
        label: 'runtime POST /stop_session',
        method: 'POST',
        path: () => '/stop_session',
        headers: () => ({}),
        valid: { session_id: sessionId },
        accepts: { session_id: (v) => v === undefined || str(v, 128, 0), reason: (v) => v === undefined || str(v, 64, 0) },
        required: [],
        poison: (inner) => `{"session_id":"${sessionId}","reason":${inner}}`,
        limit: RUNTIME_LIMIT,
      }),
      unchanged,
    );
  });

  for (const method of ['POST', 'PUT']) {
    describe(`${method} sdp_params`, () => {
      const sdpEndpoint = (path: () => string): BodyEndpoint => ({
        label: `runtime ${method} ${path().replace(sessionId, ':sid')}`,
        method,
        path,
        headers: () => ({}),
        valid: { sdp_offer: 'v=0' },
        accepts: SDP_PARAMS_ACCEPTS,
        required: ['sdp_offer'],
        poison: (inner) => `{"sdp_offer":${inner}}`,
        limit: RUNTIME_LIMIT,
      });
      fuzzBodies(url, () => sdpEndpoint(() => `${transport()}/connections/${cid}/sdp_params`), unchanged);

      it('bad session and connection ids → clean 4xx', { timeout: FUZZ_TIMEOUT_MS }, async () => {
        const offer = JSON.stringify({ sdp_offer: 'v=0' });
        await fuzzIds(
          `runtime ${method} sdp_params (ids)`,
          url(),
          method,
          (id) => `${transport()}/connections/${id}/sdp_params`,
          {},
          offer,
        );
        await fuzzIds(
          `runtime ${method} sdp_params (ids)`,
          url(),
          method,
          (id) => `/sessions/${id}/transport/webrtc/connections/${cid}/sdp_params`,
          {},
          offer,
        );
        await fuzzIds(
          `runtime ${method} sdp_params (ids)`,
          url(),
          method,
          (id) => `/sessions/${id}/transport/webrtc/sdp_params`,
          {},
          offer,
        );
        await unchanged();
      });

      it(
        'text that is no SDP offer, sent for the live connection → 400 invalid_sdp, the connection survives',
        { timeout: FUZZ_TIMEOUT_MS },
        async () => {
          const notSdp = fc.oneof(
            fc.string({ minLength: 1, maxLength: 200 }),
            fc.constantFrom('v=0', 'v=0\r\n', 'v=0\r\ns=-\r\n', 'hello', 'm=video'),
          );
          await fc.assert(
            fc.asyncProperty(
              notSdp.filter((sdp) => !/^v=0\r?\n/.test(sdp) || !sdp.includes('\nm=')),
              async (sdp) => {
                const body = JSON.stringify({ sdp_offer: sdp });
                const answer = await send(
                  `runtime ${method} sdp_params (live connection)`,
                  `${url()}${transport()}/connections/${peer.connectionId}/sdp_params`,
                  method,
                  body,
                );
                expectCleanError(answer, body);
                expect((answer.body as { code: string }).code).toBe('invalid_sdp');
              },
            ),
            fuzzParams(),
          );
          await unchanged();
          await expectAlive(url());
        },
      );
    });
  }

  describe('POST ice_candidates (trickle ICE, the live connection)', () => {
    fuzzBodies(
      url,
      () => ({
        label: 'runtime POST …/connections/:cid/ice_candidates',
        method: 'POST',
        path: () => `${transport()}/connections/${peer.connectionId}/ice_candidates`,
        headers: () => ({}),
        valid: { candidates: [] },
        // Conservative: any array counts as accepted (a bad candidate in it is a 400 as well).
        accepts: { candidates: (v) => Array.isArray(v), end_of_candidates: (v) => v === undefined || typeof v === 'boolean' },
        required: ['candidates'],
        poison: (inner) => `{"candidates":[{"candidate":${inner}}]}`,
        limit: RUNTIME_LIMIT,
      }),
      unchanged,
    );

    it('bad candidate lines, mids and ids → clean 4xx; the connection survives', { timeout: FUZZ_TIMEOUT_MS }, async () => {
      const live = `${transport()}/connections/${peer.connectionId}/ice_candidates`;
      const badCandidate = fc.record(
        {
          candidate: fc.oneof(
            fc.string({ minLength: 1, maxLength: 300 }),
            fc.constantFrom(
              'candidate:1 1 udp 1 127.0.0.1 99999 typ host',
              'candidate:1 1 udp 1 127.0.0.1 9 typ host\r\na=evil',
              'candidate:x',
            ),
          ),
          sdp_mid: fc.oneof(fc.constant(undefined), fc.string({ minLength: 1, maxLength: 64 })),
        },
        { requiredKeys: ['candidate'] },
      );
      await fc.assert(
        fc.asyncProperty(fc.array(badCandidate, { minLength: 1, maxLength: 5 }), async (candidates) => {
          const body = JSON.stringify({ candidates });
          const answer = await send('runtime POST ice_candidates (bad lines)', `${url()}${live}`, 'POST', body);
          // A generated line may happen to be a well-formed candidate for a known mid: 200 then.
          if (answer.status !== 200) expectCleanError(answer, body);
        }),
        fuzzParams(),
      );
      await fuzzIds(
        'runtime POST ice_candidates (ids)',
        url(),
        'POST',
        (id) => `${transport()}/connections/${id}/ice_candidates`,
        {},
        JSON.stringify({ candidates: [], end_of_candidates: true }),
      );
      await unchanged();
      await expectAlive(url());
    });
  });

  it('GET session logs: bad session ids and bad after/limit → clean 4xx', { timeout: FUZZ_TIMEOUT_MS }, async () => {
    await fuzzIds('runtime GET /sessions/:sid/logs', url(), 'GET', (id) => `/sessions/${id}/logs`, {});
    const notASequenceNumber = fc.string({ minLength: 1, maxLength: 40 }).filter((v) => !/^\d{1,15}$/.test(v));
    await fc.assert(
      fc.asyncProperty(fc.constantFrom('after', 'limit'), notASequenceNumber, async (name, value) => {
        const path = `/sessions/${sessionId}/logs?${name}=${encodeURIComponent(value)}`;
        expectCleanError(await send('runtime GET /sessions/:sid/logs (query)', `${url()}${path}`, 'GET', undefined), path);
      }),
      fuzzParams(),
    );
    await unchanged();
  });

  it('GET ice_servers: bad session ids and version headers → clean 4xx', { timeout: FUZZ_TIMEOUT_MS }, async () => {
    await fuzzIds('runtime GET ice_servers', url(), 'GET', (id) => `/sessions/${id}/transport/webrtc/ice_servers`, {});
    await fc.assert(
      fc.asyncProperty(
        fc.string({ maxLength: 40 }).filter((v) => !/^\s*1(\.0*)?\s*$/.test(v) && /^[\x20-\x7e]*$/.test(v) && v.trim() !== ''),
        async (version) => {
          expectCleanError(
            await send('runtime GET ice_servers', `${url()}${transport()}/ice_servers`, 'GET', undefined, {
              'Reactor-WebRTC-Version': version,
            }),
            `version ${version}`,
            { newerVersion: true },
          );
        },
      ),
      fuzzParams(),
    );
    await unchanged();
    await expectAlive(url());
  });

  it('GET/DELETE /sessions/:sid: bad ids → clean 4xx', { timeout: FUZZ_TIMEOUT_MS }, async () => {
    await fuzzIds('runtime GET /sessions/:sid', url(), 'GET', (id) => `/sessions/${id}`, {});
    await fuzzIds('runtime DELETE /sessions/:sid', url(), 'DELETE', (id) => `/sessions/${id}`, {}, '{}');
    await unchanged();
  });

  it('POST …/connections: bad session ids → clean 4xx, no connection registered', { timeout: FUZZ_TIMEOUT_MS }, async () => {
    // It takes no body (one is ignored): what a client controls is the session id.
    const connectionsBefore = runtime.sessions.current!.connections.length;
    await fc.assert(
      fc.asyncProperty(badId, anyValue, async (id, value) => {
        const body = JSON.stringify(value ?? null) ?? 'null';
        expectCleanError(
          await send('runtime POST …/connections (ids)', `${url()}/sessions/${id}/transport/webrtc/connections`, 'POST', body),
          `id=${id.slice(0, 80)} ${show(body)}`,
        );
      }),
      fuzzParams(),
    );
    expect(runtime.sessions.current!.connections.length).toBe(connectionsBefore);
    await unchanged();
  });

  it(
    'PUT /sessions/:sid/uploads/:id (presigned): forged, altered or missing signatures and bad ids → clean 403/4xx, nothing stored',
    { timeout: FUZZ_TIMEOUT_MS },
    async () => {
      // No reservation is made here (the one slot stays free for the check below): every URL is
      // one the runtime did not sign, so each must be refused before a byte is stored.
      const query = fc.oneof(
        fc.constant(''),
        fc
          .record(
            {
              expires: fc.oneof(fc.integer({ min: -1, max: 2 ** 40 }).map(String), fc.string({ maxLength: 20 })),
              signature: fc.oneof(fc.hexaString({ minLength: 64, maxLength: 64 }), fc.string({ maxLength: 100 })),
            },
            { requiredKeys: [] },
          )
          .map((q) => `?${new URLSearchParams(q as Record<string, string>).toString()}`),
        fc.string({ maxLength: 200 }).map((raw) => `?${raw.replace(/#/g, '')}`),
      );
      await fc.assert(
        fc.asyncProperty(
          fc.oneof(fc.constant(sessionId), badId),
          fc.oneof(fc.uuid(), badId),
          query,
          fc.uint8Array({ maxLength: 2048 }),
          async (sid, id, search, bytes) => {
            const target = `${url()}/sessions/${sid}/uploads/${id}${search}`;
            expectCleanError(
              await send('runtime PUT /sessions/:sid/uploads/:id', target, 'PUT', bytes, { 'content-type': 'application/octet-stream' }),
              `${target.slice(0, 200)}`,
            );
          },
        ),
        fuzzParams(),
      );
      await unchanged();
    },
  );

  describe('POST /sessions/:sid/uploads', () => {
    fuzzBodies(
      url,
      () => ({
        label: 'runtime POST /sessions/:sid/uploads',
        method: 'POST',
        path: () => `/sessions/${sessionId}/uploads`,
        headers: () => ({}),
        valid: { name: 'a.png', size: 10, mime_type: 'image/png' },
        accepts: {
          name: (v) => typeof v === 'string' && v.length >= 1 && v.length <= 1024 && !/[\u0000-\u001f/\\]/.test(v),
          size: (v) => typeof v === 'number' && Number.isSafeInteger(v) && v >= 1,
          mime_type: (v) => typeof v === 'string' && /^[\w.+-]+\/[\w.+-]+$/.test(v),
        },
        required: ['name', 'size', 'mime_type'],
        poison: (inner) => `{"name":${inner},"size":10,"mime_type":"image/png"}`,
        limit: RUNTIME_LIMIT,
      }),
      unchanged,
    );

    it('bad ids → clean 4xx; afterwards the one upload slot is still free', { timeout: FUZZ_TIMEOUT_MS }, async () => {
      await fuzzIds(
        'runtime POST /sessions/:sid/uploads',
        url(),
        'POST',
        (id) => `/sessions/${id}/uploads`,
        {},
        JSON.stringify({ name: 'a.png', size: 10, mime_type: 'image/png' }),
      );
      await unchanged();
      const ok = await send(
        'runtime valid upload',
        `${url()}/sessions/${sessionId}/uploads`,
        'POST',
        JSON.stringify({ name: 'a.png', size: 10, mime_type: 'image/png' }),
      );
      expect(ok.status, ok.text).toBe(201);
    });
  });
});

describe.each(ENGINES)("REST fuzzing: the coordinator's relay and callbacks, and a hosted runtime, on %s", (engine) => {
  let sentBefore: ReadonlyMap<string, number>;
  let stack: HostedStack;
  let token: string;
  let sessionId: string;
  let cid: number;
  const RUNTIME_ID = 'gpu-fuzz';
  const secret = `secret-${RUNTIME_ID}`;
  const coordinatorUrl = () => stack.coordinator.url;
  const runtimeUrl = () => stack.runtime.url;
  const bearer = () => ({ authorization: `Bearer ${token}`, [WEBRTC_VERSION_HEADER]: WEBRTC_VERSION });
  const relay = () => `/sessions/${sessionId}/transport/webrtc`;
  const rows = async () => {
    const { db } = stack.coordinator.storage;
    const count = async (table: 'tokens' | 'sessions' | 'runtimes' | 'token_bindings') =>
      Number(
        (
          (await db
            .selectFrom(table)
            .select((eb) => eb.fn.countAll().as('n'))
            .executeTakeFirstOrThrow()) as { n: number | string }
        ).n,
      );
    return {
      tokens: await count('tokens'),
      sessions: await count('sessions'),
      runtimes: await count('runtimes'),
      bindings: await count('token_bindings'),
    };
  };
  let baseline: Awaited<ReturnType<typeof rows>>;
  /** Nothing created, the session open on both sides and still on its runtime, which is not draining. */
  const unchanged = async () => {
    expect(await rows()).toEqual(baseline);
    const session = await stack.coordinator.sessions.get(sessionId);
    expect(session?.status).not.toBe('ended');
    expect(session?.runtime_id).toBe(RUNTIME_ID);
    expect(stack.runtime.sessions.current?.id).toBe(sessionId);
    const runtime = await stack.coordinator.storage.db
      .selectFrom('runtimes')
      .selectAll()
      .where('id', '=', RUNTIME_ID)
      .executeTakeFirstOrThrow();
    expect(runtime.draining).toBe(0);
  };

  beforeAll(async () => {
    // A long reconnect window: the session has no client, and must outlast FUZZ_RUNS=1000.
    sentBefore = new Map(sent);
    stack = await startHostedStack({ runtimeId: RUNTIME_ID, reconnectWindowSeconds: 3600, engine });
    token = await stack.mintToken();
    const created = await fetch(`${coordinatorUrl()}/sessions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: { name: 'pattern' },
        client_info: { sdk_version: '2.9.0', sdk_type: 'js' },
        supported_transports: [{ protocol: 'webrtc', version: '1.0' }],
      }),
    });
    expect(created.status).toBe(200);
    sessionId = ((await created.json()) as { session_id: string }).session_id;
    await waitUntil(() => stack.runtime.sessions.current?.id === sessionId, 10_000, 'the session on the runtime');
    const registered = await fetch(`${coordinatorUrl()}${relay()}/connections`, { method: 'POST', headers: bearer() });
    expect(registered.status, await registered.clone().text()).toBe(201);
    cid = ((await registered.json()) as { connection_id: number }).connection_id;
    baseline = await rows();
  }, 30_000);

  afterAll(async () => {
    await stack?.close();
    console.info(`relay and hosted requests sent (${engine}): ${JSON.stringify(sentSince(sentBefore))}`);
  });

  for (const method of ['POST', 'PUT']) {
    describe(`relay ${method} …/connections/:cid/sdp_params`, () => {
      fuzzBodies(
        coordinatorUrl,
        () => ({
          label: `relay ${method} sdp_params`,
          method,
          path: () => `${relay()}/connections/${cid}/sdp_params`,
          headers: bearer,
          valid: { sdp_offer: 'v=0' },
          accepts: SDP_PARAMS_ACCEPTS, // the relay forwards to the runtime's checks
          required: ['sdp_offer'],
          poison: (inner) => `{"sdp_offer":${inner}}`,
          limit: RUNTIME_LIMIT,
        }),
        unchanged,
      );
    });
  }

  describe('relay POST …/connections/:cid/ice_candidates', () => {
    fuzzBodies(
      coordinatorUrl,
      () => ({
        label: 'relay POST ice_candidates',
        method: 'POST',
        path: () => `${relay()}/connections/${cid}/ice_candidates`,
        headers: bearer,
        valid: { candidates: [] },
        accepts: { candidates: (v) => Array.isArray(v), end_of_candidates: (v) => v === undefined || typeof v === 'boolean' },
        required: ['candidates'],
        poison: (inner) => `{"candidates":[{"candidate":${inner}}]}`,
        limit: RUNTIME_LIMIT,
      }),
      unchanged,
    );
  });

  it('relay: bad session and connection ids → clean 4xx', { timeout: FUZZ_TIMEOUT_MS }, async () => {
    const offer = JSON.stringify({ sdp_offer: 'v=0' });
    const candidates = JSON.stringify({ candidates: [], end_of_candidates: true });
    await fuzzIds('relay sdp_params (ids)', coordinatorUrl(), 'PUT', (id) => `${relay()}/connections/${id}/sdp_params`, bearer(), offer);
    await fuzzIds(
      'relay sdp_params (ids)',
      coordinatorUrl(),
      'POST',
      (id) => `/sessions/${id}/transport/webrtc/connections/${cid}/sdp_params`,
      bearer(),
      offer,
    );
    await fuzzIds(
      'relay ice_candidates (ids)',
      coordinatorUrl(),
      'POST',
      (id) => `${relay()}/connections/${id}/ice_candidates`,
      bearer(),
      candidates,
    );
    await unchanged();
    await expectAlive(coordinatorUrl());
  });

  it('GET /sessions/:id/logs through the coordinator: bad ids and bad after/limit → clean 4xx', { timeout: FUZZ_TIMEOUT_MS }, async () => {
    await fuzzIds('relay GET /sessions/:id/logs', coordinatorUrl(), 'GET', (id) => `/sessions/${id}/logs`, bearer());
    // `after`/`limit` that are not sequence numbers (any text, any Unicode). A number out of
    // limit's range is clamped to 1–1,000, not refused (protocol.md "Session logs").
    const notANumber = fc
      .oneof(
        fc.string({ minLength: 1, maxLength: 40 }),
        fc.fullUnicodeString({ minLength: 1, maxLength: 20 }),
        fc.constantFrom('-1', '1e3', '0x10', '1.5', ' 1', '99999999999999999999'),
      )
      .filter((v) => !/^\d{1,15}$/.test(v));
    const query = fc.oneof(
      notANumber.map((v) => ['after', v] as const),
      notANumber.map((v) => ['limit', v] as const),
    );
    await fc.assert(
      fc.asyncProperty(query, async ([name, value]) => {
        const path = `/sessions/${sessionId}/logs?${name}=${encodeURIComponent(value)}`;
        expectCleanError(
          await send('relay GET /sessions/:id/logs (query)', `${coordinatorUrl()}${path}`, 'GET', undefined, bearer()),
          path,
        );
      }),
      fuzzParams(),
    );
    await unchanged();
  });

  it(
    'POST /runtimes/:id/sessions/:sid/ready|ended (runtime secret): bad runtime and session ids → clean 4xx',
    { timeout: FUZZ_TIMEOUT_MS },
    async () => {
      const headers = { [RUNTIME_SECRET_HEADER]: secret };
      for (const report of ['ready', 'ended']) {
        await fuzzIds(
          `relay POST /runtimes/:id/sessions/:sid/${report} (ids)`,
          coordinatorUrl(),
          'POST',
          (id) => `/runtimes/${id}/sessions/${sessionId}/${report}`,
          headers,
          '{}',
        );
        await fuzzIds(
          `relay POST /runtimes/:id/sessions/:sid/${report} (ids)`,
          coordinatorUrl(),
          'POST',
          (id) => `/runtimes/${RUNTIME_ID}/sessions/${id}/${report}`,
          headers,
          '{}',
        );
      }
      await unchanged();
    },
  );

  describe('POST /runtimes/:id/sessions/:sid/ended (runtime secret), the held session', () => {
    fuzzBodies(
      coordinatorUrl,
      () => ({
        label: 'relay POST /runtimes/:id/sessions/:sid/ended',
        method: 'POST',
        path: () => `/runtimes/${RUNTIME_ID}/sessions/${sessionId}/ended`,
        headers: () => ({ [RUNTIME_SECRET_HEADER]: secret }),
        valid: { reason: 'idle_timeout' },
        accepts: { reason: (v) => v === undefined || typeof v === 'string' },
        required: [],
        poison: (inner) => `{"reason":${inner}}`,
        limit: COORDINATOR_LIMIT,
      }),
      unchanged,
    );
  });

  describe('runtime POST /hosted/sessions (runtime secret)', () => {
    fuzzBodies(
      runtimeUrl,
      () => ({
        label: 'hosted POST /hosted/sessions',
        method: 'POST',
        path: () => '/hosted/sessions',
        headers: () => ({ [RUNTIME_SECRET_HEADER]: secret }),
        valid: { session_id: 'fuzz-hosted-session', reconnect_window_seconds: 60, public_url: 'http://127.0.0.1:9' },
        accepts: {
          session_id: (v) => typeof v === 'string' && v.length >= 1 && v.length <= 128,
          reconnect_window_seconds: (v) => v === undefined || (typeof v === 'number' && Number.isInteger(v) && v >= 1 && v <= 3600),
          // Anything: a public_url that is not an origin is ignored.
          public_url: () => true,
        },
        required: ['session_id'],
        poison: (inner) => `{"session_id":${inner}}`,
        limit: RUNTIME_LIMIT,
        // The runtime already hosts a session: a body that got through would get 409, not these.
        refusals: BODY_REFUSALS,
      }),
      unchanged,
    );
  });
});

describe('REST fuzzing: POST /playground/token (a runtime minting playground tokens)', () => {
  let runtime: Runtime;
  let mints = 0;

  beforeAll(async () => {
    runtime = await startRuntime({
      model: uploadModel as never,
      port: 0,
      host: '127.0.0.1',
      ice: { hostAddresses: ['127.0.0.1'] },
      // Counts what the route hands out; the coordinator is not reached (the URL is only shown to the page).
      playgroundHosted: {
        coordinatorUrl: 'http://127.0.0.1:9',
        mintToken: async () => {
          mints++;
          return { token: 'playground-token', expiresAt: Date.now() + 60_000 };
        },
      },
    });
    await runtime.loaded;
  });
  afterAll(async () => runtime?.close());

  it(
    'other origins, with any body → 403 forbidden, no token minted; its own page still gets one',
    { timeout: FUZZ_TIMEOUT_MS },
    async () => {
      // The route takes no body; its one input is the page's Origin.
      const own = new URL(runtime.url);
      const origin = fc
        .oneof(
          fc.webUrl().map((u) => new URL(u).origin),
          fc.string({ minLength: 1, maxLength: 80 }).filter((v) => /^[\x21-\x7e]+$/.test(v)),
          fc.constantFrom(
            'null',
            `http://${own.hostname}`,
            `http://${own.host}.evil.example`,
            `https://evil.example:${own.port}`,
            `http://${own.host}/`,
            `ws://${own.host}`,
          ),
        )
        .filter((o) => o !== `http://${own.host}` && o !== `https://${own.host}`);
      await fc.assert(
        fc.asyncProperty(origin, anyValue, async (from, value) => {
          const body = JSON.stringify(value ?? null) ?? 'null';
          const answer = await send('runtime POST /playground/token', `${runtime.url}/playground/token`, 'POST', body, { origin: from });
          expectCleanError(answer, `origin ${from} ${show(body)}`);
          expect((answer.body as { code: string }).code).toBe('forbidden');
        }),
        fuzzParams(),
      );
      expect(mints).toBe(0);
      const ownPage = await fetch(`${runtime.url}/playground/token`, { method: 'POST', headers: { origin: `http://${own.host}` } });
      expect(ownPage.status).toBe(200);
      expect(mints).toBe(1);
      await expectAlive(runtime.url);
    },
  );
});
