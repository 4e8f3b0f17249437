/**
 * The signalling proxy against a stand-in HTTP server on 127.0.0.1: SDP in JSON requests is
 * rewritten as the client's, in JSON responses as the server's; other bodies pass untouched.
 */

import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { NetworkLab } from './network-lab.ts';

const LOOPBACK = '127.0.0.1';
const closers: Array<() => Promise<unknown>> = [];

afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

const offer = (port: number) =>
  `v=0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\nc=IN IP4 127.0.0.1\r\na=candidate:1 1 udp 1 127.0.0.1 ${port} typ host\r\n`;

async function body(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

describe('SignallingProxy', () => {
  it('rewrites SDP both ways in JSON bodies and passes everything else through', async () => {
    const seen: string[] = [];
    const server: Server = createServer(async (request, response) => {
      if (request.url === '/offer') {
        seen.push((JSON.parse(await body(request)) as { sdp: string }).sdp);
        response.writeHead(200, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ sdp_answer: offer(40_000), other: 'kept' }));
      } else {
        response.writeHead(200, { 'content-type': 'text/plain', 'x-extra': 'yes' });
        response.end('candidate:1 1 udp 1 127.0.0.1 40000 typ host');
      }
    });
    await new Promise<void>((resolve) => server.listen(0, LOOPBACK, resolve));
    closers.push(() => new Promise((resolve) => server.close(resolve)));
    const lab = await NetworkLab.start({ clientSideAddress: LOOPBACK });
    closers.push(() => lab.close());
    const proxy = await lab.proxyHttp(`http://${LOOPBACK}:${(server.address() as AddressInfo).port}`);

    const answer = (await (
      await fetch(`${proxy.url}/offer`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ sdp: offer(50_000) }),
      })
    ).json()) as { sdp_answer: string; other: string };
    // The server saw the relay's server-facing socket instead of the client's 50000…
    expect(seen[0]).toMatch(/a=candidate:1 1 udp 1 127\.0\.0\.1 \d+ typ host/);
    expect(seen[0]).not.toContain(' 50000 ');
    // …and the client the relay's client-facing socket instead of the server's 40000.
    expect(answer.sdp_answer).not.toContain(' 40000 ');
    expect(answer.other).toBe('kept');
    expect(lab.counters.relay).toMatchObject({ clientFacingSockets: 1, serverFacingSockets: 1 });
    expect({ requests: proxy.rewrittenRequests, responses: proxy.rewrittenResponses }).toEqual({ requests: 1, responses: 1 });

    const plain = await fetch(`${proxy.url}/other`);
    expect(plain.headers.get('x-extra')).toBe('yes');
    expect(await plain.text()).toBe('candidate:1 1 udp 1 127.0.0.1 40000 typ host');
  });
});
