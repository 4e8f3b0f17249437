/**
 * Input frame metadata, the parts that need no browser (issue 3, part 6): the runtime checks the
 * `publish_track` flag and the `input_frame_metadata` messages, and the Node client (wrtc, which
 * has no encoded transforms) refuses `frameMetadata` with a clear `unsupported` error. The round
 * trip itself runs in Chromium: input-metadata.browser.test.ts.
 */

import wrtc from '@roamhq/wrtc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ArclightClient } from '../../client/node.ts';
import type { Envelope } from '../../protocol/messages.ts';
import { MAX_INPUT_FRAME_ANNOTATIONS } from '../../protocol/schemas.ts';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import { createLogger } from '../../server-kit/log.ts';
import model from '../fixtures/input-metadata-model.ts';
import { openRawPeer, type RawPeer } from '../support/raw-peer.ts';

const LOOPBACK = '127.0.0.1';

describe('input frame metadata without a browser', () => {
  let runtime: Runtime;
  let peer: RawPeer;
  let rid = 0;

  /** Sends a runtime message with a request id; resolves its outcome (ack or failure). */
  async function send(type: string, data: unknown): Promise<{ type: string; data: Record<string, unknown> }> {
    const requestId = `r${++rid}`;
    const from = peer.messages.length;
    peer.sendRaw(JSON.stringify({ scope: 'runtime', data: { type, data, request_id: requestId } }));
    const reply: Envelope = await peer.waitFor((m) => m.data.request_id === requestId, 10_000, from);
    return { type: reply.data.type, data: reply.data.data as Record<string, unknown> };
  }

  beforeAll(async () => {
    runtime = await startRuntime({
      model: model as never,
      port: 0,
      host: LOOPBACK,
      ice: { hostAddresses: [LOOPBACK] },
      playground: false,
      logger: createLogger({ test: 'input-metadata' }, 'error'),
    });
    await runtime.loaded;
    const started = (await (await fetch(`${runtime.url}/start_session`, { method: 'POST', body: '{}' })).json()) as { session_id: string };
    peer = await openRawPeer(runtime.url, started.session_id);
    await peer.waitFor((m) => m.data.type === 'connection_info', 15_000);
  }, 60_000);

  afterAll(async () => {
    peer?.close();
    await runtime?.close();
  });

  it('refuses annotations for a track not published with frame_metadata', async () => {
    const outcome = await send('input_frame_metadata', { track: 'camera', frames: [{ rtp_timestamp: 1 }] });
    expect(outcome).toMatchObject({ type: 'command_failed', data: { code: 'not_ready' } });
    expect(outcome.data['message']).toMatch(/frame_metadata: true/);
    await send('publish_track', { track: 'camera' });
    expect(await send('input_frame_metadata', { track: 'camera', frames: [{ rtp_timestamp: 1 }] })).toMatchObject({
      data: { code: 'not_ready' },
    });
  });

  it('checks the publish flag: a boolean, on video tracks only', async () => {
    expect(await send('publish_track', { track: 'camera', frame_metadata: 'yes' })).toMatchObject({
      type: 'command_failed',
      data: { code: 'invalid_params', field: '/frame_metadata' },
    });
    expect(await send('publish_track', { track: 'mic', frame_metadata: true })).toMatchObject({
      type: 'command_failed',
      data: { code: 'invalid_params', field: '/frame_metadata' },
    });
  });

  it('accepts well-formed annotations once announced, and names the field of a bad one', async () => {
    expect(await send('publish_track', { track: 'camera', frame_metadata: true })).toMatchObject({ type: 'command_ack' });
    const frame = { rtp_timestamp: 90_000, capture_time: Date.now(), metadata: { n: 1 } };
    expect(
      await send('input_frame_metadata', { track: 'camera', frames: [frame, { rtp_timestamp: 93_000, metadata: { $bytes: 'AAEC' } }] }),
    ).toMatchObject({
      type: 'command_ack',
    });
    const negative = await send('input_frame_metadata', { track: 'camera', frames: [{ rtp_timestamp: -1 }] });
    expect(negative).toMatchObject({ type: 'command_failed', data: { code: 'invalid_params', field: '/frames/0/rtp_timestamp' } });
    const tooMany = Array.from({ length: MAX_INPUT_FRAME_ANNOTATIONS + 1 }, (_, i) => ({ rtp_timestamp: i }));
    expect(await send('input_frame_metadata', { track: 'camera', frames: tooMany })).toMatchObject({
      data: { code: 'invalid_params', field: '/frames' },
    });
    expect(await send('input_frame_metadata', { track: 'mic', frames: [frame] })).toMatchObject({ data: { code: 'unknown_track' } });
  });

  it('the Node client (wrtc: no encoded transforms) refuses frameMetadata with unsupported', async () => {
    const client = new ArclightClient({ modelName: 'input-metadata', local: true, localRuntimeUrl: runtime.url });
    try {
      await client.connect(undefined, { sessionId: peer.sessionId });
      const source = new (
        wrtc as unknown as { nonstandard: { RTCVideoSource: new () => { createTrack(): MediaStreamTrack } } }
      ).nonstandard.RTCVideoSource();
      const track = source.createTrack();
      await expect(client.publishTrack('camera', track, { frameMetadata: true })).rejects.toMatchObject({ code: 'unsupported' });
      track.stop();
    } finally {
      await client.disconnect();
    }
  });
});
