/**
 * HttpModerator against a real HTTP server on 127.0.0.1: the request it sends, verdicts both
 * ways, and every failure (status, body, shape, silence, redirect) as a throw — which the gate
 * turns into an admitted command.
 */

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../server-kit/log.ts';
import { RuntimeMetrics } from '../metrics.ts';
import { HttpModerator } from './http-moderator.ts';
import { ModerationGate } from './moderation-gate.ts';

interface Received {
  readonly method: string | undefined;
  readonly path: string | undefined;
  readonly authorization: string | undefined;
  readonly contentType: string | undefined;
  readonly body: unknown;
}

type Behaviour = (req: IncomingMessage, res: ServerResponse, body: unknown) => void;

describe('HttpModerator', () => {
  let server: Server;
  let base: string;
  const received: Received[] = [];
  let behaviour: Behaviour = (_req, res) => res.end('{"allowed":true}');

  beforeAll(async () => {
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let body: unknown = text;
        try {
          body = JSON.parse(text);
        } catch {
          // kept as text
        }
        received.push({
          method: req.method,
          path: req.url,
          authorization: req.headers.authorization,
          contentType: req.headers['content-type'],
          body,
        });
        behaviour(req, res, body);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const request = (signal = new AbortController().signal) => ({
    sessionId: 's-1',
    command: 'caption',
    fields: { '/text': 'hello' },
    signal,
  });

  it('POSTs {session_id, command, fields} with the bearer token and reads an allowed verdict', async () => {
    behaviour = (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{"allowed":true,"reason":"fine"}');
    const moderator = new HttpModerator({ url: `${base}/check`, token: 'sekrit' });
    expect(await moderator.check(request())).toEqual({ allowed: true });
    expect(received.at(-1)).toEqual({
      method: 'POST',
      path: '/check',
      authorization: 'Bearer sekrit',
      contentType: 'application/json',
      body: { session_id: 's-1', command: 'caption', fields: { '/text': 'hello' } },
    });
    await new HttpModerator({ url: `${base}/check` }).check(request());
    expect(received.at(-1)?.authorization).toBeUndefined();
  });

  it('reads a rejection with its reason, category and field', async () => {
    behaviour = (_req, res) => res.end(JSON.stringify({ allowed: false, reason: 'insult', category: 'harassment', field: '/text' }));
    expect(await new HttpModerator({ url: base }).check(request())).toEqual({
      allowed: false,
      reason: 'insult',
      category: 'harassment',
      field: '/text',
    });
  });

  it('throws on a non-2xx status, a body that is not JSON, a body that is not a verdict, and a redirect', async () => {
    const moderator = new HttpModerator({ url: base });
    behaviour = (_req, res) => res.writeHead(503).end('{"allowed":false}');
    await expect(moderator.check(request())).rejects.toThrow(/HTTP 503/);
    behaviour = (_req, res) => res.end('<html>');
    await expect(moderator.check(request())).rejects.toThrow(/not JSON/);
    behaviour = (_req, res) => res.end('{"allowed":"no"}');
    await expect(moderator.check(request())).rejects.toThrow(/not \{allowed/);
    behaviour = (_req, res) => res.writeHead(307, { location: 'http://127.0.0.1:1/elsewhere' }).end();
    await expect(moderator.check(request())).rejects.toThrow();
  });

  it('gives up when the runtime abandons the check, and on its own timeout', async () => {
    behaviour = () => {}; // never answers
    const abandoned = new AbortController();
    const pending = new HttpModerator({ url: base }).check(request(abandoned.signal));
    setTimeout(() => abandoned.abort(new Error('admitted')), 50);
    await expect(pending).rejects.toThrow();
    const started = performance.now();
    await expect(new HttpModerator({ url: base, timeoutMs: 100 }).check(request())).rejects.toThrow();
    expect(performance.now() - started).toBeLessThan(2_000);
  });

  it('through the gate: a failing service admits the command and counts an error', async () => {
    behaviour = (_req, res) => res.writeHead(500).end();
    const metrics = new RuntimeMetrics({ processMetrics: false });
    const gate = new ModerationGate({
      sessionId: 's-1',
      moderator: new HttpModerator({ url: base }),
      admitAfterMs: 2_000,
      signal: new AbortController().signal,
      log: createLogger({}, 'silent'),
      metrics,
    });
    expect(await gate.check('caption', { '/text': 'hello' })).toEqual({ admitted: true, outcome: 'error' });
    expect((await metrics.moderationChecks.get()).values).toEqual([expect.objectContaining({ labels: { outcome: 'error' }, value: 1 })]);
  });

  it('refuses a URL that is not http(s) and a timeout that is not positive', () => {
    expect(() => new HttpModerator({ url: 'ftp://x/check' })).toThrow(TypeError);
    expect(() => new HttpModerator({ url: 'not a url' })).toThrow(TypeError);
    expect(() => new HttpModerator({ url: base, timeoutMs: 0 })).toThrow(TypeError);
  });
});
