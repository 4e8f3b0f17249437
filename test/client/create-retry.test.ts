/**
 * A lost answer to `POST /sessions` must not open (and bill) a second session: the client sends
 * an Idempotency-Key and retries with it. A real coordinator and hosted runtime on 127.0.0.1,
 * reached through a small HTTP proxy that breaks the first creation in one of two ways — it
 * forwards the request and then cuts the connection before the answer (the session exists, the
 * client cannot know), or it answers 503 itself (the request never arrived).
 */

import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ArclightClient } from '../../client/node.ts';
import { startHostedStack, type HostedStack } from '../support/hosted-stack.ts';

type Fault = 'cut-after-forwarding' | 'answer-503';

interface FlakyProxy {
  readonly url: string;
  /** Idempotency-Key of every `POST /sessions` the proxy saw, in order. */
  readonly creations: string[];
  /** The next `POST /sessions` meets this fault; later ones pass. */
  arm(fault: Fault): void;
  close(): Promise<void>;
}

async function startFlakyProxy(target: string): Promise<FlakyProxy> {
  const creations: string[] = [];
  let armed: Fault | undefined;
  const forward = (incoming: IncomingMessage, body: Buffer, onAnswer: (answer: IncomingMessage, body: Buffer) => void) => {
    const outgoing = request(
      target + incoming.url,
      { method: incoming.method, headers: { ...incoming.headers, host: new URL(target).host } },
      (answer) => {
        const chunks: Buffer[] = [];
        answer.on('data', (chunk: Buffer) => chunks.push(chunk));
        answer.on('end', () => onAnswer(answer, Buffer.concat(chunks)));
      },
    );
    outgoing.end(body);
  };
  const server: Server = createServer((incoming: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = [];
    incoming.on('data', (chunk: Buffer) => chunks.push(chunk));
    incoming.on('end', () => {
      const body = Buffer.concat(chunks);
      const creation = incoming.method === 'POST' && incoming.url === '/sessions';
      if (creation) creations.push(String(incoming.headers['idempotency-key']));
      const fault = creation ? armed : undefined;
      if (creation) armed = undefined;
      if (fault === 'answer-503') {
        response
          .writeHead(503, { 'content-type': 'application/json' })
          .end(JSON.stringify({ code: 'unavailable', message: 'proxy says no' }));
        return;
      }
      forward(incoming, body, (answer, answerBody) => {
        if (fault === 'cut-after-forwarding') {
          incoming.socket.destroy(); // the coordinator created it; the client never hears so
          return;
        }
        response.writeHead(answer.statusCode ?? 502, answer.headers).end(answerBody);
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    creations,
    arm: (fault) => (armed = fault),
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

describe('client: POST /sessions retried with its Idempotency-Key', () => {
  let stack: HostedStack;
  let proxy: FlakyProxy;
  beforeAll(async () => {
    stack = await startHostedStack({ runtimeId: 'create-retry' });
    proxy = await startFlakyProxy(stack.coordinator.url);
  }, 60_000);
  afterAll(async () => {
    await proxy?.close();
    await stack?.close();
  });

  const sessionsOfAccount = async () =>
    stack.coordinator.storage.db
      .selectFrom('sessions')
      .select(['id', 'idempotency_key'])
      .where('account_id', '=', stack.accountId)
      .execute();

  for (const fault of ['cut-after-forwarding', 'answer-503'] as const) {
    it(`${fault}: the retry gets one session, ready, and only one exists`, async () => {
      const before = (await sessionsOfAccount()).length;
      const seen = proxy.creations.length;
      proxy.arm(fault);
      const client = new ArclightClient({ modelName: 'pattern', apiUrl: proxy.url });
      try {
        await client.connect(await stack.mintToken());
        expect(client.getStatus()).toBe('ready');
        const tries = proxy.creations.slice(seen);
        expect(tries).toHaveLength(2);
        expect(tries[1]).toBe(tries[0]); // the same key both times
        expect(tries[0]).toMatch(/^[0-9a-f]{32}$/);
        const sessions = await sessionsOfAccount();
        expect(sessions).toHaveLength(before + 1);
        expect(sessions.find((s) => s.idempotency_key === tries[0])?.id).toBe(client.getSessionId());
      } finally {
        await client.disconnect();
      }
    }, 60_000);
  }
});
