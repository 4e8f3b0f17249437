/**
 * Reliability suite, part 7 (issue 8): hardening. All real, on 127.0.0.1: a coordinator
 * (SQLite) with configured browser origins and a runtime secret, a hosted runtime (pattern, a
 * TURN secret) registered with it, and a local runtime serving the playground in hosted mode.
 *
 * - CORS: the coordinator answers preflights only on browser paths (/sessions, /sessions/*,
 *   /pricing) and only for the configured origins; /tokens, /platform/* and /runtimes/* answer
 *   none. The runtime answers its configured origins, and gives playground tokens only to its
 *   own page.
 * - Body limits: an oversized body is 413 payload_too_large, decided from Content-Length before
 *   reading, and for a chunked body that never ends, once the limit is read (never buffered whole).
 * - Timing-safe comparison (read from the code):
 *   · API keys are never compared as strings: `ApiKeyStore.authenticate` (coordinator/accounts/
 *     api-keys.ts) looks up `sha256(key)` in the indexed `key_hash` column, so response time can
 *     depend only on the hash, which tells nothing about the key.
 *   · The runtime secret: `timingSafeEqual` after a length check in coordinator/http/runtime-routes.ts
 *     (`authenticate`) and runtime/http/hosted-routes.ts (`requireRuntimeSecret`); the length
 *     check reveals only the length.
 *   · Presigned upload URLs: `timingSafeEqual` of HMAC-SHA256 in runtime/uploads/url-signer.ts
 *     (lengths fixed to 32 bytes by a regex first).
 *   · JWT signatures: jose's ES256 verify (WebCrypto), never a string comparison.
 *   Tested here: a wrong key or secret of the right length and of the wrong length get the same 401.
 * - Secrets never logged: every log line of both processes at debug level (loggers that keep
 *   every line, fields rendered in full with util.inspect) plus this process's stderr, while
 *   minting, creating and streaming a session, uploading, and failing auth with bad keys,
 *   tokens and secrets: no `rk_` key, no JWT, no TURN or runtime secret in any line.
 * - Security headers on the playground page and its scripts: CSP (frame-ancestors 'none'),
 *   X-Content-Type-Options nosniff, Referrer-Policy, X-Frame-Options.
 */

import { request as httpRequest } from 'node:http';
import { inspect } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ArclightClient } from '../../client/node.ts';
import { startCoordinator, type Coordinator } from '../../coordinator/index.ts';
import pattern from '../../models/examples/pattern/index.ts';
import { RUNTIME_SECRET_HEADER } from '../../protocol/coordinator.ts';
import type { Logger } from '../../server-kit/log.ts';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import { freshDatabase } from '../coordinator/storage-engines.ts';

const LOOPBACK = '127.0.0.1';
const ALLOWED_ORIGIN = 'https://app.example';
const OTHER_ORIGIN = 'https://evil.example';
const RUNTIME_SECRET = 'runtime-secret-0123456789abcdef0123456789';
const TURN_SECRET = 'turn-secret-fedcba9876543210fedcba9876';

/** Keeps every line at every level, fields rendered in full (stricter than the JSON logger). */
function capturingLogger(lines: string[], bindings: Record<string, unknown> = {}): Logger {
  const write = (level: string) => (message: string, fields?: Record<string, unknown>) => {
    lines.push(
      `${level} ${message} ${inspect({ ...bindings, ...fields }, { depth: 10, breakLength: Infinity, maxStringLength: Infinity, maxArrayLength: Infinity })}`,
    );
  };
  return {
    debug: write('debug'),
    info: write('info'),
    warn: write('warn'),
    error: write('error'),
    child: (more) => capturingLogger(lines, { ...bindings, ...more }),
  };
}

async function until(check: () => boolean | Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * POSTs a chunked body that never ends (1 KB every millisecond or so) and resolves with the
 * response status, the bytes sent before it came, and how long it took.
 */
function endlessPost(
  url: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string; sentBytes: number; ms: number }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    let sentBytes = 0;
    let stopped = false;
    const req = httpRequest(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked', ...headers },
    });
    const chunk = Buffer.alloc(1024, 0x20);
    const pump = () => {
      while (!stopped && req.write(chunk)) {
        sentBytes += chunk.length;
        if (sentBytes > 64 * 1024 * 1024) break; // a safety net: the server must have answered long before
      }
      if (!stopped) req.once('drain', pump);
    };
    req.write('{"x":"');
    pump();
    req.on('response', (response) => {
      stopped = true;
      const ms = performance.now() - started;
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (d: string) => (body += d));
      response.on('end', () => {
        req.destroy();
        resolve({ status: response.statusCode ?? 0, body, sentBytes, ms });
      });
    });
    req.on('error', (error) => {
      if (!stopped) reject(error);
    });
    setTimeout(() => {
      if (!stopped) {
        stopped = true;
        req.destroy();
        reject(new Error(`no response after ${sentBytes} bytes in 10 s: the body is being buffered`));
      }
    }, 10_000);
  });
}

describe('hardening', () => {
  const coordinatorLines: string[] = [];
  const runtimeLines: string[] = [];
  const stderrLines: string[] = [];
  const secretsSeen = { keys: new Set<string>(), tokens: new Set<string>() };
  let restoreStderr: () => void;
  let coordinator: Coordinator;
  let hosted: Runtime;
  let playground: Runtime;
  let key: string;
  const clients: ArclightClient[] = [];

  const mint = async (
    apiKey = key,
    body: unknown = { authorization_details: [{ type: 'session', resources: { models: { match: ['pattern'] } } }] },
  ) => {
    const response = await fetch(`${coordinator.url}/tokens`, {
      method: 'POST',
      headers: { 'Service-API-Key': apiKey, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const answer = (await response.json()) as { token?: string };
    if (answer.token) secretsSeen.tokens.add(answer.token);
    return { status: response.status, body: answer as Record<string, any> };
  };

  beforeAll(async () => {
    const originalWrite = process.stderr.write.bind(process.stderr);
    process.stderr.write = ((chunk: string | Uint8Array, ...rest: unknown[]) => {
      stderrLines.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
      return (originalWrite as (...args: unknown[]) => boolean)(chunk, ...rest);
    }) as typeof process.stderr.write;
    restoreStderr = () => (process.stderr.write = originalWrite);

    coordinator = await startCoordinator({
      database: await freshDatabase('sqlite'),
      port: 0,
      host: LOOPBACK,
      meterFlushMs: 0,
      runtimeSecret: RUNTIME_SECRET,
      corsOrigins: [ALLOWED_ORIGIN],
      logger: capturingLogger(coordinatorLines, { process: 'coordinator' }),
    });
    await coordinator.catalog.add('pattern', 5);
    const account = await coordinator.accounts.create('Acme');
    await coordinator.ledger.grantPromotional(account.id, 100_000);
    ({ key } = await coordinator.apiKeys.create(account.id));
    secretsSeen.keys.add(key);
    hosted = await startRuntime({
      model: pattern as never,
      port: 0,
      host: LOOPBACK,
      ice: { hostAddresses: [LOOPBACK], turn: { urls: ['turn:127.0.0.1:3478?transport=udp'], secret: TURN_SECRET } },
      playground: false,
      hosted: { coordinatorUrl: coordinator.url, secret: RUNTIME_SECRET, runtimeId: 'gpu-0' },
      logger: capturingLogger(runtimeLines, { process: 'hosted-runtime' }),
    });
    await until(async () => (await coordinator.registry.get('gpu-0')) !== undefined, 20_000, 'the runtime to register');
    playground = await startRuntime({
      model: pattern as never,
      port: 0,
      host: LOOPBACK,
      ice: { hostAddresses: [LOOPBACK] },
      corsOrigins: [ALLOWED_ORIGIN],
      playgroundHosted: {
        coordinatorUrl: coordinator.url,
        mintToken: async () => {
          const { body } = await mint();
          return { token: body['token'] as string, expiresAt: (body['expires_at'] as number) * 1000 };
        },
      },
      logger: capturingLogger(runtimeLines, { process: 'playground-runtime' }),
    });
  });
  afterAll(async () => {
    for (const client of clients) await client.disconnect().catch(() => {});
    await playground?.close();
    await hosted?.close();
    await coordinator?.close();
    restoreStderr?.();
  });

  describe('CORS', () => {
    const preflight = (base: string, path: string, origin = ALLOWED_ORIGIN, method = 'POST') =>
      fetch(`${base}${path}`, {
        method: 'OPTIONS',
        headers: { origin, 'access-control-request-method': method, 'access-control-request-headers': 'authorization,content-type' },
      });

    it('coordinator: browser paths answer preflights for the configured origins only', async () => {
      for (const [path, method] of [
        ['/sessions', 'POST'],
        ['/sessions/abc', 'DELETE'],
        ['/sessions/abc/transport/webrtc/sdp_params', 'POST'],
        ['/sessions/abc/uploads', 'POST'],
        ['/pricing', 'GET'],
      ] as const) {
        const allowed = await preflight(coordinator.url, path, ALLOWED_ORIGIN, method);
        expect(allowed.status, path).toBe(204);
        expect(allowed.headers.get('access-control-allow-origin'), path).toBe(ALLOWED_ORIGIN);
        expect(allowed.headers.get('access-control-allow-headers'), path).toMatch(/Authorization/i);
        expect(allowed.headers.get('access-control-allow-credentials'), path).toBeNull(); // bearer tokens, never cookies
        const other = await preflight(coordinator.url, path, OTHER_ORIGIN, method);
        expect(other.headers.get('access-control-allow-origin'), `${path} from another origin`).not.toBe(OTHER_ORIGIN);
        expect(other.headers.get('access-control-allow-origin'), `${path} from another origin`).not.toBe('*');
      }
      const simple = await fetch(`${coordinator.url}/pricing`, { headers: { origin: OTHER_ORIGIN } });
      expect(simple.headers.get('access-control-allow-origin')).not.toBe(OTHER_ORIGIN);
    });

    it('coordinator: /tokens, /platform/*, /runtimes/*, /health, /metrics and the JWKS answer no CORS at all', async () => {
      for (const path of [
        '/tokens',
        '/platform/models',
        '/platform/balance',
        '/platform/usage',
        '/platform/keys',
        '/platform/keys/abc/rotate',
        '/runtimes',
        '/runtimes/gpu-0/heartbeat',
        '/health',
        '/metrics',
      ]) {
        const answer = await preflight(coordinator.url, path);
        expect(answer.headers.get('access-control-allow-origin'), path).toBeNull();
        expect(answer.headers.get('access-control-allow-methods'), path).toBeNull();
      }
      const minted = await fetch(`${coordinator.url}/tokens`, {
        method: 'POST',
        headers: { origin: ALLOWED_ORIGIN, 'Service-API-Key': key, 'content-type': 'application/json' },
        body: '{}',
      });
      expect(minted.status).toBe(200); // a server may mint; a browser could not read the answer
      expect(minted.headers.get('access-control-allow-origin')).toBeNull();
      secretsSeen.tokens.add(((await minted.json()) as { token: string }).token);
    });

    it('runtime: answers its configured origins; playground tokens go only to its own page', async () => {
      const allowed = await preflight(playground.url, '/start_session');
      expect(allowed.headers.get('access-control-allow-origin')).toBe(ALLOWED_ORIGIN);
      const other = await preflight(playground.url, '/start_session', OTHER_ORIGIN);
      expect(other.headers.get('access-control-allow-origin')).not.toBe(OTHER_ORIGIN);
      const foreignPage = await fetch(`${playground.url}/playground/token`, { method: 'POST', headers: { origin: OTHER_ORIGIN } });
      expect(foreignPage.status).toBe(403);
      const ownPage = await fetch(`${playground.url}/playground/token`, { method: 'POST', headers: { origin: playground.url } });
      expect(ownPage.status).toBe(200);
      expect(ownPage.headers.get('cache-control')).toBe('no-store');
      secretsSeen.tokens.add(((await ownPage.json()) as { token: string }).token);
    });
  });

  describe('body size limits', () => {
    it('coordinator: a declared oversized body → 413 payload_too_large without reading it', async () => {
      const big = JSON.stringify({ pad: 'x'.repeat(200 * 1024) });
      const answer = await fetch(`${coordinator.url}/tokens`, {
        method: 'POST',
        headers: { 'Service-API-Key': key, 'content-type': 'application/json' },
        body: big,
      });
      expect(answer.status).toBe(413);
      expect(await answer.json()).toMatchObject({ code: 'payload_too_large' });
    });

    it('coordinator and runtime: a chunked body that never ends → 413 after about the limit, quickly', async () => {
      const results = {
        coordinatorTokens: await endlessPost(`${coordinator.url}/tokens`, { 'Service-API-Key': key }),
        runtimeStartSession: await endlessPost(`${playground.url}/start_session`),
        // Behind the runtime secret, but read under the same limit.
        runtimeHostedSessions: await endlessPost(`${hosted.url}/hosted/sessions`, { [RUNTIME_SECRET_HEADER]: RUNTIME_SECRET }),
      };
      for (const [name, result] of Object.entries(results)) {
        expect(result.status, name).toBe(413);
        expect(JSON.parse(result.body), name).toMatchObject({ code: 'payload_too_large' });
        expect(result.ms, name).toBeLessThan(5_000);
        // Answered after the limit was read, not after the (endless) body: a few socket buffers past it.
        expect(result.sentBytes, name).toBeLessThan(16 * 1024 * 1024);
      }
      console.log(
        `[hardening] endless bodies answered: ${JSON.stringify(Object.fromEntries(Object.entries(results).map(([k, v]) => [k, { status: v.status, ms: Math.round(v.ms), sentKB: Math.round(v.sentBytes / 1024) }])))}`,
      );
      // Both servers still answer afterwards.
      expect((await fetch(`${coordinator.url}/health`)).status).toBe(200);
      expect((await fetch(`${playground.url}/health`)).status).toBe(200);
    });
  });

  describe('timing-safe comparison: wrong keys and secrets of the right and the wrong length get the same 401', () => {
    it('API keys on POST /tokens', async () => {
      const sameLength = `rk_${'A'.repeat(key.length - 3)}`;
      expect(sameLength.length).toBe(key.length);
      const answers = [];
      for (const wrong of [sameLength, `${key.slice(0, -1)}${key.endsWith('A') ? 'B' : 'A'}`, 'rk_short', `rk_${'A'.repeat(300)}`]) {
        const { status, body } = await mint(wrong, {});
        expect(status).toBe(401);
        answers.push(body);
      }
      for (const answer of answers) expect(answer).toEqual(answers[0]);
    });

    it('the runtime secret on the coordinator (/runtimes) and on the runtime (/hosted/sessions)', async () => {
      const wrongs = [RUNTIME_SECRET.replace(/.$/, 'X'), 'Y'.repeat(RUNTIME_SECRET.length), 'short', RUNTIME_SECRET + 'X', ''];
      for (const url of [`${coordinator.url}/runtimes`, `${hosted.url}/hosted/sessions`]) {
        const answers = [];
        for (const wrong of wrongs) {
          const response = await fetch(url, {
            method: 'POST',
            headers: { [RUNTIME_SECRET_HEADER]: wrong, 'content-type': 'application/json' },
            body: '{}',
          });
          expect(response.status, `${url} ${wrong.length}`).toBe(401);
          answers.push(await response.json());
        }
        for (const answer of answers) expect(answer, url).toEqual(answers[0]);
      }
    });
  });

  describe('security headers on the pages the runtime serves', () => {
    it('the playground page and its scripts carry CSP (frame-ancestors), nosniff, Referrer-Policy, X-Frame-Options', async () => {
      for (const path of ['/', '/playground/playground.js', '/playground/playground.css', '/playground/arclight-client.js']) {
        const response = await fetch(`${playground.url}${path}`);
        expect(response.status, path).toBe(200);
        await response.arrayBuffer();
        const csp = response.headers.get('content-security-policy') ?? '';
        expect(csp, path).toMatch(/frame-ancestors 'none'/);
        expect(csp, path).toMatch(/default-src 'self'/);
        expect(csp, path).toMatch(/script-src 'self'(;|$)/); // no inline or eval'd scripts
        expect(csp, path).toContain(new URL(coordinator.url).origin); // hosted mode connects there
        expect(response.headers.get('x-content-type-options'), path).toBe('nosniff');
        expect(response.headers.get('x-frame-options'), path).toBe('DENY');
        expect(response.headers.get('referrer-policy'), path).toBe('no-referrer');
      }
      expect((await fetch(`${playground.url}/`)).headers.get('content-type')).toMatch(/text\/html/);
    });
  });

  describe('secrets never logged', () => {
    it('a token mint, a streamed session with an upload, failed auth: no key, token or secret in any line', async () => {
      // Failed auth of every kind.
      await mint('rk_' + 'Z'.repeat(43));
      await fetch(`${coordinator.url}/sessions/nope`, {
        headers: { authorization: 'Bearer eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl' },
      });
      await fetch(`${coordinator.url}/sessions`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: '{}' });
      await fetch(`${coordinator.url}/runtimes`, { method: 'POST', headers: { [RUNTIME_SECRET_HEADER]: 'wrong' }, body: '{}' });
      await fetch(`${hosted.url}/hosted/sessions`, { method: 'POST', headers: { [RUNTIME_SECRET_HEADER]: 'wrong' }, body: '{}' });
      // A session through the coordinator, streamed, with an upload, then ended.
      const { body } = await mint();
      const token = body['token'] as string;
      const client = new ArclightClient({ modelName: 'pattern', apiUrl: coordinator.url });
      clients.push(client);
      await client.connect(token);
      const sessionId = client.getSessionId()!;
      await until(async () => (await coordinator.sessions.get(sessionId))?.status === 'ready', 20_000, 'the session to be ready');
      const uploaded = await client.uploadFile(new Blob([new Uint8Array(1024)], { type: 'image/png' }), { name: 'x.png' });
      expect(uploaded.size).toBe(1024);
      // An expired-looking and a tampered copy of the real token.
      const [h, p] = token.split('.');
      await fetch(`${coordinator.url}/sessions/${sessionId}`, { headers: { authorization: `Bearer ${h}.${p}.AAAA` } });
      await client.disconnect();
      await until(() => hosted.sessions.current === undefined, 10_000, 'the runtime to end the session');
      await coordinator.housekeeping();

      const lines = [...coordinatorLines, ...runtimeLines, ...stderrLines];
      expect(coordinatorLines.length).toBeGreaterThan(0);
      expect(runtimeLines.length).toBeGreaterThan(0);
      const leaks = lines.filter(
        (line) =>
          /rk_[A-Za-z0-9_-]{8,}/.test(line) ||
          /[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{4,}/.test(line) ||
          line.includes(TURN_SECRET) ||
          line.includes(RUNTIME_SECRET) ||
          [...secretsSeen.keys, ...secretsSeen.tokens].some((secret) => line.includes(secret)),
      );
      expect(leaks).toEqual([]);
      console.log(
        `[hardening] log lines checked: coordinator ${coordinatorLines.length}, runtimes ${runtimeLines.length}, stderr ${stderrLines.length}; tokens ${secretsSeen.tokens.size}, keys ${secretsSeen.keys.size}`,
      );
    }, 60_000);
  });
});
