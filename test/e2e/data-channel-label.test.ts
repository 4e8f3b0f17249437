/**
 * The data channel, whatever the client calls it (issue 21 part 10). Ours and 2.9.0's is labelled
 * `data`; a client that labels its one channel otherwise is served on it (commands answered,
 * runtime messages received), and an offer with no data channel at all is refused with 400
 * `invalid_sdp` saying so — before, both connected ICE and DTLS and then heard nothing, silently.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pattern from '../../models/examples/pattern/index.ts';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import { createWrtcOffer, keepLoopbackCandidates, openRawPeer, type RawPeer } from '../support/raw-peer.ts';

const LOOPBACK = '127.0.0.1';

describe('the data channel a client opens', () => {
  let runtime: Runtime;
  const peers: RawPeer[] = [];
  beforeAll(async () => {
    runtime = await startRuntime({
      model: pattern as never,
      port: 0,
      host: LOOPBACK,
      ice: { hostAddresses: [LOOPBACK] },
      playground: false,
    });
    await runtime.loaded;
  });
  afterAll(async () => {
    for (const peer of peers) peer.close();
    await runtime?.close();
  });

  /** Ends the previous test's session first: a local runtime serves one at a time. */
  async function startSession(): Promise<string> {
    for (const peer of peers.splice(0)) peer.close();
    await fetch(`${runtime.url}/stop_session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    const started = await fetch(`${runtime.url}/start_session`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    expect(started.status).toBe(200);
    return ((await started.json()) as { session_id: string }).session_id;
  }

  it('labelled other than "data": served on it — runtime messages arrive and commands are answered', async () => {
    const peer = await openRawPeer(runtime.url, await startSession(), { dataChannelLabel: 'commands' });
    peers.push(peer);
    expect(peer.channel.label).toBe('commands');
    await peer.waitFor((m) => m.scope === 'runtime' && m.data.type === 'connection_info', 15_000);
    const from = peer.messages.length;
    peer.sendRaw(JSON.stringify({ scope: 'application', data: { type: 'get_state', data: {}, request_id: 'r1' } }));
    const reply = await peer.waitFor((m) => m.data.request_id === 'r1', 15_000, from);
    expect(reply.scope).toBe('application');
    peer.sendRaw(JSON.stringify({ scope: 'application', data: { type: 'set_speed', data: { speed: 'fast' }, request_id: 'r2' } }));
    const failed = await peer.waitFor((m) => m.data.request_id === 'r2', 15_000, from);
    expect(failed.data).toMatchObject({ type: 'command_failed', data: { code: 'invalid_params' } });
  }, 60_000);

  it('none at all: 400 invalid_sdp naming what is missing, and the connection can still be offered to properly', async () => {
    const sessionId = await startSession();
    const transport = `${runtime.url}/sessions/${sessionId}/transport/webrtc`;
    const { connection_id: cid } = (await (await fetch(`${transport}/connections`, { method: 'POST' })).json()) as {
      connection_id: number;
    };
    const tracks = runtime.sessions.current!.tracks;
    const offer = await createWrtcOffer(tracks, null);
    try {
      expect(offer.sdp).not.toMatch(/\nm=application /);
      const refused = await fetch(`${transport}/connections/${cid}/sdp_params`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ sdp_offer: keepLoopbackCandidates(offer.sdp), track_mapping: offer.mapping }),
      });
      expect(refused.status).toBe(400);
      const body = (await refused.json()) as { code: string; message: string };
      expect(body.code).toBe('invalid_sdp');
      expect(body.message).toMatch(/no data channel/);
      expect(body.message).toContain('"data"');
    } finally {
      offer.pc.close();
    }
    // The session is unharmed: a proper client connects to it.
    const peer = await openRawPeer(runtime.url, sessionId);
    peers.push(peer);
    await peer.waitFor((m) => m.scope === 'runtime' && m.data.type === 'connection_info', 15_000);
  }, 60_000);
});
