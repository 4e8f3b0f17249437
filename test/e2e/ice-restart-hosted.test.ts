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
import { WEBRTC_VERSION, WEBRTC_VERSION_HEADER } from '../../protocol/versions.ts';
import { peerIdentity } from '../../runtime/transport/signalling/offer-origin.ts';
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
      // The connect may be ready before its first trickle request is answered (the runtime's
      // ICE learns the client's address from its checks): wait for the candidates to go.
      for (let i = 0; i < 200 && trickled.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    } finally {
      globalThis.fetch = realFetch;
    }
    // The client's candidates reached the runtime through the coordinator's relay.
    expect(trickled.length).toBeGreaterThan(0);
    expect(
      trickled.every((status) => status === 200),
      JSON.stringify(trickled),
    ).toBe(true);
    const sessionId = client.getSessionId();
    const connectionId = client.getConnectionId();
    const callsBefore = calls;
    await client.restartIce();
    expect(client.getStatus()).toBe('ready');
    expect(client.getSessionId()).toBe(sessionId);
    expect(client.getConnectionId()).toBe(connectionId);
    // ice_servers and the PUT offer (whose 202 carries the answer: no poll), each asked the resolver.
    expect(calls - callsBefore).toBeGreaterThanOrEqual(2);
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
    const failure = await client.restartIce().then(
      () => undefined,
      (error: unknown) => error as ArclightError,
    );
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

  it("renegotiation in place through the relay: a caching resolver's token is answered by the same runtime peer; a fresh unbound token gets 403", async () => {
    // Our client never renegotiates in place (it lays out every model track at connect, and
    // publishTrack only attaches a track: docs/protocol.md "Renegotiation"), so this test is the
    // app doing it on the client's live peer — as a browser app adding a camera would — and
    // authorising each request with the same resolver the client was given.
    const token = await stack.mintToken();
    let mintEveryCall = false;
    const resolver = async (): Promise<string> => (mintEveryCall ? await stack.mintToken() : token);
    const client = newClient();
    const reconnecting: ReconnectingEvent[] = [];
    client.on('reconnecting', (event) => reconnecting.push(event));
    await client.connect(resolver);
    const pc = client.getPeerConnection()!;
    const sdpParams = `${stack.coordinator.url}/sessions/${client.getSessionId()}/transport/webrtc/connections/${client.getConnectionId()}/sdp_params`;
    const headers = async () => ({
      authorization: `Bearer ${await resolver()}`,
      'content-type': 'application/json',
      [WEBRTC_VERSION_HEADER]: WEBRTC_VERSION,
    });
    const firstAnswer = peerIdentity(pc.remoteDescription!.sdp);
    // The change: the tone's m-line turned inactive (detached in place; the video goes on).
    const tone = pc.getTransceivers().find((t) => t.receiver.track.kind === 'audio')!;
    tone.direction = 'inactive';
    const offer = await pc.createOffer();

    mintEveryCall = true;
    const refused = await fetch(sdpParams, { method: 'PUT', headers: await headers(), body: JSON.stringify({ sdp_offer: offer.sdp }) });
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as { code: string }).code).toBe('forbidden');
    expect(client.getStatus()).toBe('ready');

    mintEveryCall = false;
    await pc.setLocalDescription(offer);
    const accepted = await fetch(sdpParams, {
      method: 'PUT',
      headers: await headers(),
      body: JSON.stringify({ sdp_offer: pc.localDescription!.sdp }),
    });
    expect(accepted.status, await accepted.clone().text()).toBe(202);
    let answer: string | undefined;
    for (let polls = 0; answer === undefined && polls < 50; polls++) {
      const got = await fetch(sdpParams, { headers: await headers() });
      if (got.status === 200) answer = ((await got.json()) as { sdp_answer: string }).sdp_answer;
      else {
        expect(got.status).toBe(202);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
    // Answered in place: the runtime peer the client is connected to (same ICE credentials and
    // certificate), so it applies to the peer the client has.
    expect(peerIdentity(answer!)).toEqual(firstAnswer);
    expect(answer!.split(/\r\n(?=m=)/).find((section) => section.includes(`\r\na=mid:${tone.mid}\r\n`))).toMatch(/\r\na=inactive\r\n/);
    await pc.setRemoteDescription({ type: 'answer', sdp: answer! });
    expect(pc.signalingState).toBe('stable');
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(pc.connectionState).toBe('connected');
    expect(client.getStatus()).toBe('ready');
    expect(reconnecting).toEqual([]);
    expect((await client.sendCommand('set_color', { color: '#0000ff' }))?.type).toBe('color_changed');
  }, 20_000);
});
