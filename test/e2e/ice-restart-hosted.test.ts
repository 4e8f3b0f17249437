/**
 * ICE restart and trickle ICE in hosted mode (issue 10, part 3): a real coordinator relaying
 * `/sessions/{id}/transport/webrtc/*` to a real runtime, and our Node client (wrtc).
 *
 * Every transport request of the restart (ICE servers, the PUT offer, the answer poll, trickled
 * candidates) asks the token resolver again. A resolver that caches its token keeps working; one
 * that mints a fresh token on every call hands out tokens bound to no session, so the restart's
 * first request is refused with 403 — and the client says why, and does not retry in vain.
 */

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ArclightClient, ArclightError, type ReconnectingEvent } from '../../client/node.ts';
import { startHostedStack, type HostedStack } from '../support/hosted-stack.ts';

describe('ICE restart through the coordinator', () => {
  let stack: HostedStack;
  const clients: ArclightClient[] = [];

  beforeAll(async () => {
    stack = await startHostedStack({ runtimeId: 'gpu-ice-restart' });
  }, 20_000);

  afterEach(async () => {
    for (const client of clients.splice(0)) await client.disconnect().catch(() => {});
  });

  afterAll(async () => stack?.close());

  function newClient(): ArclightClient {
    // iceGatheringTimeoutMs 0: every candidate is trickled, so trickling goes through the relay too.
    const client = new ArclightClient({ modelName: 'pattern', apiUrl: stack.coordinator.url, iceGatheringTimeoutMs: 0 });
    clients.push(client);
    return client;
  }

  it('a caching resolver: trickled candidates and the restart go through, same session', async () => {
    const token = await stack.mintToken();
    let calls = 0;
    const client = newClient();
    const trickled: number[] = [];
    const realFetch = globalThis.fetch;
    globalThis.fetch = async (input, init) => {
      const response = await realFetch(input, init);
      if (String(input instanceof Request ? input.url : input).endsWith('/ice_candidates')) trickled.push(response.status);
      return response;
    };
    try {
      await client.connect(() => {
        calls++;
        return token;
      });
    } finally {
      globalThis.fetch = realFetch;
    }
    // The client's candidates reached the runtime through the coordinator's relay.
    expect(trickled.length).toBeGreaterThan(0);
    expect(trickled.every((status) => status === 200), JSON.stringify(trickled)).toBe(true);
    const sessionId = client.getSessionId();
    const connectionId = client.getConnectionId();
    const callsBefore = calls;
    await client.restartIce();
    expect(client.getStatus()).toBe('ready');
    expect(client.getSessionId()).toBe(sessionId);
    expect(client.getConnectionId()).toBe(connectionId);
    // ice_servers, the PUT offer, at least one answer poll: each asked the resolver.
    expect(calls - callsBefore).toBeGreaterThanOrEqual(3);
    expect((await client.sendCommand('set_color', { color: '#00ff00' }))?.type).toBe('color_changed');
  }, 20_000);

  it('a resolver minting a fresh token per call: an upload and the restart get 403, said plainly, without retries', async () => {
    const token = await stack.mintToken();
    let mintEveryCall = false;
    const client = newClient();
    await client.connect(async () => (mintEveryCall ? await stack.mintToken() : token));
    const sessionId = client.getSessionId();
    const attempts: ReconnectingEvent[] = [];
    const errors: ArclightError[] = [];
    client.on('reconnecting', (event) => attempts.push(event));
    client.on('error', (error) => errors.push(error));
    mintEveryCall = true; // from now on, as a resolver that does not cache
    // An upload reservation is refused the same way: the fresh token has no bound session.
    const upload = await client.uploadFile(new Blob([new Uint8Array(16)], { type: 'image/png' }), { name: 'a.png' }).then(
      () => undefined,
      (error: unknown) => error as ArclightError,
    );
    expect(upload?.code).toBe('forbidden');
    expect(upload?.status).toBe(403);
    const failure = await client.restartIce().then(() => undefined, (error: unknown) => error as ArclightError);
    expect(failure).toBeInstanceOf(ArclightError);
    expect(failure!.code).toBe('forbidden');
    expect(failure!.status).toBe(403);
    expect(failure!.message).toMatch(/token resolver/);
    expect(failure!.message).toMatch(/cacheToken/);
    expect(attempts).toHaveLength(1); // a 403 will not change on a retry
    expect(errors.map((e) => e.code)).toEqual(['forbidden']);
    expect(client.getStatus()).toBe('disconnected');
    // The session itself is untouched: the good token still reaches it, and reconnect() works with it.
    expect(client.getSessionId()).toBe(sessionId);
    mintEveryCall = false;
    await client.reconnect();
    expect(client.getStatus()).toBe('ready');
    expect(client.getSessionId()).toBe(sessionId);
  }, 20_000);
});
