/**
 * Latency modes at the RTP level: every video packet that starts a frame carries the
 * playout-delay extension with the session's mode — realtime 0/0 ms, smooth 0/200 ms — and a
 * runtime message switches the whole session at once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import pattern from '../../models/examples/pattern/index.ts';
import { waitUntil } from '../support/video-probe.ts';
import { openWeriftPeer, type WeriftPeer } from '../support/werift-peer.ts';

const LOOPBACK = '127.0.0.1';
const PLAYOUT_DELAY = 'http://www.webrtc.org/experiments/rtp-hdrext/playout-delay';

/** Decodes the 3-byte playout-delay payload into milliseconds. */
function delays(payload: Buffer): { min: number; max: number } {
  return { min: ((payload[0]! << 4) | (payload[1]! >> 4)) * 10, max: (((payload[1]! & 0xf) << 8) | payload[2]!) * 10 };
}

describe('latency modes', () => {
  let runtime: Runtime;
  let peer: WeriftPeer | undefined;
  beforeAll(async () => {
    runtime = await startRuntime({ model: pattern as never, port: 0, host: LOOPBACK, ice: { hostAddresses: [LOOPBACK] } });
  });
  afterAll(async () => {
    await peer?.close();
    await runtime?.close();
  });

  it('marks frames with the session mode and switches on request', async () => {
    peer = await openWeriftPeer(runtime.url, { videoMime: 'video/H264', headerExtensions: [PLAYOUT_DELAY] });
    const id = peer.extensionIds.get(PLAYOUT_DELAY);
    expect(id).toBeDefined();
    const seen: Array<{ min: number; max: number }> = [];
    peer.onVideoRtp((rtp) => {
      const ext = rtp.header.extensions.find((e) => e.id === id);
      if (ext) seen.push(delays(ext.payload));
    });
    expect(peer.session.latency_mode).toBe('smooth'); // pattern declares none: the default
    await waitUntil(() => seen.length > 10, 10_000, 'marked packets');
    expect(seen.at(-1)).toEqual({ min: 0, max: 200 });

    const replies: string[] = [];
    peer.channel.onMessage.subscribe((raw) => replies.push(String(raw)));
    peer.channel.send(
      JSON.stringify({ scope: 'runtime', data: { type: 'set_latency_mode', data: { mode: 'realtime' }, request_id: 'm1' } }),
    );
    await waitUntil(() => replies.some((r) => r.includes('"command_ack"') && r.includes('"m1"')), 5_000, 'the ack');
    const from = seen.length;
    await waitUntil(() => seen.length > from + 10, 5_000, 'more packets');
    expect(seen.at(-1)).toEqual({ min: 0, max: 0 });
    const record = (await (await fetch(`${runtime.url}/sessions/${peer.session.session_id}`)).json()) as { latency_mode: string };
    expect(record.latency_mode).toBe('realtime');

    peer.channel.send(
      JSON.stringify({ scope: 'runtime', data: { type: 'set_latency_mode', data: { mode: 'instant' }, request_id: 'm2' } }),
    );
    await waitUntil(() => replies.some((r) => r.includes('"m2"')), 5_000, 'the failure');
    expect(replies.find((r) => r.includes('"m2"'))).toContain('invalid_params');
  });
});
