/**
 * ICE restart, trickle ICE and renegotiation (issue 10, part 3), in Node: our client (wrtc)
 * against a real runtime over loopback.
 *
 * - A path failure (the runtime's test-only NetworkFaults blackout: every datagram of its peers
 *   dropped, long enough for the client's ICE to go disconnected past its grace) is repaired by
 *   the client by itself: a fresh peer renegotiated on the same connection id, same session,
 *   and the video comes back.
 * - A client whose offer carries no candidates connects through the ones it trickles.
 * - Bad trickle input gets 400 `invalid_request`, and a renegotiation offer that cannot be
 *   applied gets 400 `invalid_sdp`: the live connection goes on either way.
 * - A renegotiation offer from a fresh peer on a live connection is answered first, then takes
 *   the connection over (same id, same session).
 */

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ArclightClient, nodeWebRtc, wrtc, type ReconnectedEvent, type ReconnectingEvent } from '../../client/node.ts';
import type { ArclightClientOptions } from '../../client/arclight-client.ts';
import pattern from '../../models/examples/pattern/index.ts';
import type { Runtime } from '../../runtime/index.ts';
import { startRuntimeWithFaults } from '../../runtime/faults/start-runtime-with-faults.ts';
import { NetworkFaults } from '../../runtime/faults/network-faults.ts';
import { FrameArrivals } from '../support/media-fault-probe.ts';
import { readRuntimeEvents } from '../support/event-stream-reader.ts';
import { createWrtcOffer, keepLoopbackCandidates } from '../support/raw-peer.ts';
import type { SessionLogPage } from '../../protocol/session-logs.ts';
import type { ArclightError } from '../../protocol/errors.ts';
import { waitUntil } from '../support/video-probe.ts';
import { WEBRTC_VERSION, WEBRTC_VERSION_HEADER } from '../../protocol/versions.ts';

const LOOPBACK = '127.0.0.1';
type VideoSink = { stop(): void; onframe: (() => void) | null };

interface Watched {
  readonly client: ArclightClient;
  readonly frames: FrameArrivals;
  readonly reconnecting: ReconnectingEvent[];
  readonly reconnected: ReconnectedEvent[];
}

describe('ICE restart, trickle and renegotiation (local runtime)', () => {
  const network = new NetworkFaults();
  let runtime: Runtime;
  const sinks: VideoSink[] = [];
  const clients: ArclightClient[] = [];

  beforeAll(async () => {
    runtime = await startRuntimeWithFaults(
      { model: pattern as never, port: 0, host: LOOPBACK, ice: { hostAddresses: [LOOPBACK] }, playground: false },
      { network },
    );
  });

  afterEach(async () => {
    network.clear();
    for (const sink of sinks.splice(0)) sink.stop();
    for (const client of clients.splice(0)) await client.disconnect().catch(() => {});
  });

  afterAll(async () => runtime?.close());

  async function watchedClient(options: Partial<ArclightClientOptions> = {}): Promise<Watched> {
    const client = new ArclightClient({ modelName: 'pattern', local: true, localRuntimeUrl: runtime.url, rtc: nodeWebRtc, ...options });
    clients.push(client);
    const watched: Watched = { client, frames: new FrameArrivals(), reconnecting: [], reconnected: [] };
    client.on('reconnecting', (event) => watched.reconnecting.push(event));
    client.on('reconnected', (event) => watched.reconnected.push(event));
    client.on('trackReceived', (name, track) => {
      if (name !== 'main_video' || track.kind !== 'video') return;
      const Sink = (wrtc as unknown as { nonstandard: { RTCVideoSink: new (t: MediaStreamTrack) => VideoSink } }).nonstandard.RTCVideoSink;
      const sink = new Sink(track);
      sink.onframe = () => watched.frames.note(performance.now());
      sinks.push(sink);
    });
    await client.connect();
    await waitUntil(() => watched.frames.count > 0, 10_000, 'the first decoded frame');
    return watched;
  }

  const transportUrl = (client: ArclightClient) =>
    `${runtime.url}/sessions/${client.getSessionId()}/transport/webrtc/connections/${client.getConnectionId()}`;
  const post = (url: string, body: string, method = 'POST') =>
    fetch(url, { method, headers: { 'content-type': 'application/json', [WEBRTC_VERSION_HEADER]: WEBRTC_VERSION }, body });

  it('a path failure: the client restarts ICE on the same connection, same session, and video resumes', async () => {
    const events = await readRuntimeEvents(runtime.url);
    const { client, frames, reconnecting, reconnected } = await watchedClient();
    const sessionId = client.getSessionId();
    const connectionId = client.getConnectionId();
    const statuses: string[] = [];
    client.on('statusChanged', (status) => statuses.push(status));
    // wrtc says `disconnected` ~7.5 s into an outage (later on a loaded machine); 2 s of grace
    // later the client restarts. The outage lasts until the restart has begun and a moment more,
    // so the restart's first offer meets a path still down, and must get through once it is back.
    // (A fixed 11 s outage raced the detection on a busy CI machine: ICE came back by itself
    // before the grace ran out, and no restart ever began.)
    network.blackout(60_000);
    const darkFrom = performance.now();
    await waitUntil(() => reconnecting.length > 0, 25_000, 'the client to notice the broken path');
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    network.clear();
    await waitUntil(() => reconnected.length > 0, 15_000, `the connection back (attempts: ${JSON.stringify(reconnecting)})`);
    const backAt = performance.now();
    await waitUntil(() => frames.firstAfter(backAt) !== undefined, 5_000, 'a decoded frame after the restart');
    const detail = JSON.stringify({ reconnecting, reconnected, statuses, backAfterMs: Math.round(backAt - darkFrom) });
    expect(client.getStatus(), detail).toBe('ready');
    expect(client.getSessionId(), detail).toBe(sessionId);
    expect(client.getConnectionId(), detail).toBe(connectionId);
    expect(statuses, detail).toEqual(['connecting', 'ready']);
    expect(['ice_disconnected', 'ice_failed', 'channel_closed', 'peer_closed'], detail).toContain(reconnecting[0]!.reason);
    // The same session on the runtime: the one it had, still open, with this connection id.
    const record = (await (await fetch(`${runtime.url}/sessions/${sessionId}`)).json()) as { state: string; connections: number[] };
    expect(record.state).toBe('ACTIVE');
    expect(record.connections).toContain(connectionId);
    expect((await client.sendCommand('set_color', { color: '#00ff00' }))?.type).toBe('color_changed');

    // The drop as operators see it (protocol.md "Runtime events"): the connection was lost, then
    // ready again on the same id, the session never ending; and the session's log says the same.
    const ofConnection = () =>
      events
        .ofSession(sessionId!)
        .flatMap((e) =>
          (e.type === 'connection_ready' || e.type === 'connection_lost') && e.connection_id === connectionId ? [e.type] : [],
        );
    await waitUntil(() => ofConnection().length >= 3, 5_000, `connection_lost then ready on /events (${JSON.stringify(ofConnection())})`);
    events.stop();
    expect(ofConnection()).toEqual(['connection_ready', 'connection_lost', 'connection_ready']);
    expect(events.ofSession(sessionId!).some((e) => e.type === 'session_ended')).toBe(false);
    const log = (await (await fetch(`${runtime.url}/sessions/${sessionId}/logs?limit=1000`)).json()) as SessionLogPage;
    const story = log.lines.filter((l) => l.message === 'connection ready' || l.message === 'connection lost');
    expect(story.map((l) => l.message)).toEqual(['connection ready', 'connection lost', 'connection ready']);
    expect(story.every((l) => l.source === 'runtime' && l.fields?.['connection'] === connectionId)).toBe(true);
  }, 50_000);

  it('gives up after maxAttempts on a failure worth retrying: error with its code, status disconnected, the session kept for reconnect()', async () => {
    // Short attempts: each one's fresh peer gets its answer over HTTP but no ICE through the
    // blackout, so it times out (`timeout`, retryable) and the next is tried, until none is left.
    const { client, reconnecting, reconnected } = await watchedClient({
      autoReconnect: { maxAttempts: 2, baseDelayMs: 50, maxDelayMs: 100 },
      connectTimeoutMs: 1_500,
    });
    const sessionId = client.getSessionId();
    const connectionId = client.getConnectionId();
    const statuses: string[] = [];
    const errors: ArclightError[] = [];
    client.on('statusChanged', (status) => statuses.push(status));
    client.on('error', (error) => errors.push(error));
    network.blackout(60_000);
    const failure = (await client.restartIce().then(
      () => undefined,
      (error: unknown) => error,
    )) as ArclightError | undefined;
    const detail = JSON.stringify({ reconnecting, statuses, errors: errors.map((e) => `${e.code}: ${e.message}`) });
    expect(failure, detail).toBeDefined();
    expect(
      reconnecting.map((r) => [r.attempt, r.maxAttempts, r.reason]),
      detail,
    ).toEqual([
      [1, 2, 'requested'],
      [2, 2, 'requested'],
    ]);
    expect(reconnected).toEqual([]);
    // docs/client.md "Connection recovery", giving up: `error` with the last failure's code, its
    // message saying how many attempts failed; status disconnected; the session kept.
    expect(failure!.code, detail).toBe('timeout');
    expect(failure!.retryable).toBe(true);
    expect(failure!.message).toMatch(/2 attempt\(s\) to renegotiate it failed: Not connected after 1500 ms/);
    expect(errors.at(-1)).toBe(failure);
    expect(client.getLastError()).toBe(failure);
    expect(statuses, detail).toEqual(['connecting', 'disconnected']);
    expect(client.getStatus()).toBe('disconnected');
    expect(client.getSessionId()).toBe(sessionId);
    // The path back, the app's reconnect() resumes the same session and connection id.
    network.clear();
    await client.reconnect();
    expect(client.getStatus()).toBe('ready');
    expect(client.getSessionId()).toBe(sessionId);
    expect(client.getConnectionId()).toBe(connectionId);
    expect((await client.sendCommand('set_color', { color: '#00ffff' }))?.type).toBe('color_changed');
  }, 25_000);

  it('an offer without candidates connects through trickled ones', async () => {
    const offers: string[] = [];
    const trickled: Array<{ status: number; added?: number }> = [];
    const realFetch = globalThis.fetch;
    globalThis.fetch = async (input, init) => {
      const url = String(input instanceof Request ? input.url : input);
      const response = await realFetch(input, init);
      if (url.endsWith('/sdp_params') && init?.method === 'POST')
        offers.push((JSON.parse(String(init.body)) as { sdp_offer: string }).sdp_offer);
      if (url.endsWith('/ice_candidates'))
        trickled.push({ status: response.status, ...((await response.clone().json()) as { added?: number }) });
      return response;
    };
    try {
      const { client } = await watchedClient({ iceGatheringTimeoutMs: 0 });
      expect(client.getStatus()).toBe('ready');
      // ICE may connect before a trickle request has come back (the runtime learns the client's
      // address from its checks; the full suite once saw none yet): wait for the first answer.
      await waitUntil(() => trickled.length > 0, 5_000, 'a trickle request answered');
    } finally {
      globalThis.fetch = realFetch;
    }
    expect(offers).toHaveLength(1);
    expect(offers[0]).not.toMatch(/a=candidate:/);
    expect(trickled.length).toBeGreaterThan(0);
    expect(
      trickled.every((t) => t.status === 200),
      JSON.stringify(trickled),
    ).toBe(true);
    expect(trickled.reduce((sum, t) => sum + (t.added ?? 0), 0)).toBeGreaterThan(0);
  }, 15_000);

  it('bad trickle input → 400 invalid_request, and the connection goes on', async () => {
    const { client, frames } = await watchedClient();
    const url = `${transportUrl(client)}/ice_candidates`;
    const bad: Array<[string, string | undefined]> = [
      ['{}', undefined],
      ['{"candidates":[]}', '/candidates'],
      ['{"candidates":"candidate:1 1 udp 1 127.0.0.1 9 typ host"}', undefined],
      ['{"candidates":[{"candidate":"hello","sdp_mid":"0"}]}', '/candidates/0/candidate'],
      ['{"candidates":[{"candidate":"candidate:1 1 udp 2122260223 127.0.0.1 70000 typ host","sdp_mid":"0"}]}', '/candidates/0/candidate'],
      ['{"candidates":[{"candidate":"candidate:1 1 udp 2122260223 127.0.0.1 9 typ host"}]}', '/candidates/0'],
      ['{"candidates":[{"candidate":"candidate:1 1 udp 2122260223 127.0.0.1 9 typ host","sdp_mid":"nope"}]}', '/candidates/0/sdp_mid'],
      [
        '{"candidates":[{"candidate":"candidate:1 1 udp 2122260223 127.0.0.1 9 typ host","sdp_m_line_index":99}]}',
        '/candidates/0/sdp_m_line_index',
      ],
      [
        '{"candidates":[{"candidate":"candidate:1 1 udp 2122260223 127.0.0.1 9 typ host\\r\\na=evil","sdp_mid":"0"}]}',
        '/candidates/0/candidate',
      ],
    ];
    for (const [body, field] of bad) {
      const response = await post(url, body);
      const answer = (await response.json()) as { code: string; field?: string };
      expect(response.status, body).toBe(400);
      expect(answer.code, body).toBe('invalid_request');
      if (field) expect(answer.field, body).toBe(field);
    }
    expect((await post(url, '{"candidates":')).status).toBe(400);
    // A well-formed candidate for the live peer is taken; a stale one (another ufrag) is not.
    const ok = await post(
      url,
      JSON.stringify({ candidates: [{ candidate: 'candidate:9 1 udp 2122260223 127.0.0.1 9 typ host', sdp_mid: '0' }] }),
    );
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ connection_id: client.getConnectionId(), added: 1 });
    const stale = await post(
      url,
      JSON.stringify({
        candidates: [{ candidate: 'candidate:9 1 udp 2122260223 127.0.0.1 9 typ host', sdp_mid: '0', username_fragment: 'old0' }],
        end_of_candidates: true,
      }),
    );
    expect(await stale.json()).toEqual({ connection_id: client.getConnectionId(), added: 0 });
    // Unknown connections: 404; the connection and its video go on.
    const unknown = await post(
      `${runtime.url}/sessions/${client.getSessionId()}/transport/webrtc/connections/999/ice_candidates`,
      '{"candidates":[],"end_of_candidates":true}',
    );
    expect(unknown.status).toBe(404);
    const after = performance.now();
    // Counted, not timed: a generous deadline costs nothing when healthy and survives a loaded machine.
    await waitUntil(() => frames.firstAfter(after) !== undefined, 8_000, 'frames after the bad input');
    expect(client.getStatus()).toBe('ready');
    expect((await client.sendCommand('set_color', { color: '#0000ff' }))?.type).toBe('color_changed');
  }, 15_000);

  it('a renegotiation offer that cannot be applied → 400 invalid_sdp; the live connection is untouched', async () => {
    const { client, frames, reconnecting } = await watchedClient();
    // Shaped like SDP (so it reaches the peer), but no peer can apply it.
    const offer = 'v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\na=mid:0\r\n';
    const response = await post(`${transportUrl(client)}/sdp_params`, JSON.stringify({ sdp_offer: offer }), 'PUT');
    expect(response.status).toBe(400);
    expect(((await response.json()) as { code: string }).code).toBe('invalid_sdp');
    const after = performance.now();
    // Ten frames, however long a loaded machine takes to encode and decode them (not "in 3 s").
    await waitUntil(() => frames.between(after, performance.now()) >= 10, 10_000, 'frames after the failed offer');
    expect(client.getStatus()).toBe('ready');
    expect(reconnecting).toEqual([]);
    expect((await client.sendCommand('set_color', { color: '#ff0000' }))?.type).toBe('color_changed');
  }, 15_000);

  it('a renegotiation offer from a fresh peer, on a live connection: answered, then it takes the connection over', async () => {
    const { client } = await watchedClient({ autoReconnect: false });
    const connectionId = client.getConnectionId();
    const offer = await createWrtcOffer(client.getCapabilities()!.tracks);
    try {
      const accepted = await post(
        `${transportUrl(client)}/sdp_params`,
        JSON.stringify({ sdp_offer: keepLoopbackCandidates(offer.sdp), track_mapping: offer.mapping }),
        'PUT',
      );
      expect(accepted.status).toBe(202);
      const answer = await fetch(`${transportUrl(client)}/sdp_params`, { headers: { [WEBRTC_VERSION_HEADER]: WEBRTC_VERSION } });
      expect(answer.status).toBe(200);
      const body = (await answer.json()) as { sdp_answer: string; connection_id: number };
      expect(body.connection_id).toBe(connectionId);
      await offer.pc.setRemoteDescription({ type: 'answer', sdp: body.sdp_answer });
      const info = await new Promise<{ connection_id?: number }>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('no connection_info on the new peer')), 10_000);
        offer.channel.onmessage = (event) => {
          const message = JSON.parse(String(event.data)) as { data?: { type?: string; data?: { connection_id?: number } } };
          if (message.data?.type !== 'connection_info') return;
          clearTimeout(timer);
          resolve(message.data.data ?? {});
        };
      });
      expect(info.connection_id).toBe(connectionId);
      // The old peer was retired for the new one: the client (no autoReconnect here) hears it.
      await waitUntil(() => client.getStatus() === 'disconnected', 10_000, 'the replaced client peer to go');
    } finally {
      offer.pc.close();
    }
  }, 20_000);

  it('restartIce(): renegotiates the live connection on the same id; video goes on', async () => {
    const { client, frames, reconnected } = await watchedClient();
    const connectionId = client.getConnectionId();
    const sessionId = client.getSessionId();
    await client.restartIce();
    expect(reconnected).toHaveLength(1);
    expect(client.getStatus()).toBe('ready');
    expect(client.getConnectionId()).toBe(connectionId);
    expect(client.getSessionId()).toBe(sessionId);
    const after = performance.now();
    await waitUntil(() => frames.firstAfter(after) !== undefined, 5_000, 'frames after the restart');
  }, 15_000);
});
