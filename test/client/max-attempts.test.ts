/**
 * connect()'s `maxAttempts` (spec, client operations: "Maximum SDP polling attempts before giving
 * up", default 6): a runtime that never answers the offer is polled exactly that many times, at
 * 200 ms doubling, and then connect() rejects with `timeout` and the client is `disconnected`.
 * A real runtime on 127.0.0.1 behind a small HTTP proxy that answers every GET of the answer with
 * 202 (still pending) and counts them, and takes the answer out of the offer's own 202 (where the
 * runtime puts it when it answered within the request); everything else is forwarded.
 */
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ArclightClient } from '../../client/node.ts';
import pattern from '../../models/examples/pattern/index.ts';
import { startRuntime, type Runtime } from '../../runtime/index.ts';

const LOOPBACK = '127.0.0.1';

describe('connect() maxAttempts', () => {
  let runtime: Runtime;
  let proxy: Server;
  let proxyUrl: string;
  /** Times of the answer polls the proxy held back. */
  const polls: number[] = [];

  beforeAll(async () => {
    runtime = await startRuntime({
      model: pattern as never,
      port: 0,
      host: LOOPBACK,
      ice: { hostAddresses: [LOOPBACK] },
      playground: false,
      reconnectGraceSeconds: 1,
    });
    const target = new URL(runtime.url);
    proxy = createServer((incoming: IncomingMessage, response: ServerResponse) => {
      if (incoming.method === 'GET' && /\/sdp_params$/.test(incoming.url ?? '')) {
        polls.push(performance.now());
        incoming.resume();
        response.writeHead(202).end();
        return;
      }
      const holdsAnswer = incoming.method !== 'GET' && /\/sdp_params$/.test(incoming.url ?? '');
      const outgoing = request(
        { host: target.hostname, port: target.port, path: incoming.url, method: incoming.method, headers: incoming.headers },
        (answer) => {
          if (!holdsAnswer || answer.statusCode !== 202) {
            response.writeHead(answer.statusCode ?? 502, answer.headers);
            answer.pipe(response);
            return;
          }
          const chunks: Buffer[] = [];
          answer.on('data', (chunk: Buffer) => chunks.push(chunk));
          answer.on('end', () => {
            // A runtime that has not answered yet: the 202 names the connection only.
            const { connection_id } = JSON.parse(Buffer.concat(chunks).toString()) as { connection_id: number };
            response.writeHead(202, { 'content-type': 'application/json' }).end(JSON.stringify({ connection_id }));
          });
        },
      );
      incoming.pipe(outgoing);
    });
    await new Promise<void>((resolve) => proxy.listen(0, LOOPBACK, resolve));
    proxyUrl = `http://${LOOPBACK}:${(proxy.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((resolve) => proxy?.close(resolve));
    await runtime?.close();
  });

  async function attempt(maxAttempts: number | undefined): Promise<{ polls: number[]; error: unknown; client: ArclightClient }> {
    polls.length = 0;
    await fetch(`${runtime.url}/stop_session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    const client = new ArclightClient({ modelName: 'pattern', local: true, localRuntimeUrl: proxyUrl });
    const error = await client.connect(undefined, maxAttempts === undefined ? {} : { maxAttempts }).then(
      () => undefined,
      (e: unknown) => e,
    );
    return { polls: [...polls], error, client };
  }

  it('gives up after 6 polls by default, 200 ms doubling between them, with timeout', async () => {
    const { polls: seen, error, client } = await attempt(undefined);
    expect(error).toMatchObject({ code: 'timeout' });
    expect(seen).toHaveLength(6);
    // The waits between polls are at least 200, 400, 800, 1600 and 3200 ms (lower bounds: a
    // loaded machine only stretches them).
    const gaps = seen.slice(1).map((t, i) => t - seen[i]!);
    [200, 400, 800, 1600, 3200].forEach((least, i) => expect(gaps[i]!, `gap ${i + 1}`).toBeGreaterThanOrEqual(least - 5));
    expect(client.getStatus()).toBe('disconnected');
  }, 60_000);

  it('polls exactly maxAttempts times when given', async () => {
    const { polls: seen, error } = await attempt(2);
    expect(error).toMatchObject({ code: 'timeout' });
    expect(seen).toHaveLength(2);
  }, 30_000);
});
