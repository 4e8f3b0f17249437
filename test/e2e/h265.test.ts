/**
 * H.265 end to end at the RTP level: a client that offers H.265 (here a werift peer, as this
 * Chromium has none) gets the runtime's output as H.265 RTP; the payloads depacketize (RFC 7798)
 * and decode with node-av to the picture the model drew.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import pattern, { PATCH } from '../../models/examples/pattern/index.ts';
import { rgbToYuv } from '../../models/examples/shared/i420-canvas.ts';
import { waitUntil } from '../support/video-probe.ts';
import { decodeTrack, openWeriftPeer, type WeriftPeer } from '../support/werift-peer.ts';

const LOOPBACK = '127.0.0.1';

describe('H.265 to a client that offers it', () => {
  let runtime: Runtime;
  let peer: WeriftPeer | undefined;
  beforeAll(async () => {
    runtime = await startRuntime({
      model: pattern as never,
      port: 0,
      host: LOOPBACK,
      ice: { hostAddresses: [LOOPBACK] },
      videoCodecs: ['h265', 'h264', 'vp8'],
    });
  });
  afterAll(async () => {
    await peer?.close();
    await runtime?.close();
  });

  it('streams H.265 RTP that depacketizes and decodes to the model picture', async () => {
    let decoded = 0;
    let centre: { y: number; v: number } | undefined;
    peer = await openWeriftPeer(runtime.url, { videoMime: 'video/H265' });
    expect(peer.video.codecs[0]?.mimeType).toBe('video/H265');
    const decoding = await decodeTrack(peer, 'main_video', 'h265', (frame) => {
      decoded++;
      const x = PATCH.x + PATCH.size / 2;
      const y = PATCH.y + PATCH.size / 2;
      const luma = frame.width * frame.height;
      centre = { y: frame.data[y * frame.width + x]!, v: frame.data[luma * 1.25 + (y / 2) * (frame.width / 2) + x / 2]! };
    });
    // libx265 at 720p, plus an H.265 decode in this process: a few frames a second on a busy
    // 2-core machine. The property is that the frames decode to the picture, not how fast.
    await waitUntil(() => decoded >= 15, 45_000, '15 decoded H.265 frames');
    const red = rgbToYuv(0xe0, 0x10, 0x10);
    expect(Math.abs(centre!.y - red.y)).toBeLessThan(12);
    expect(Math.abs(centre!.v - red.v)).toBeLessThan(12);
    decoding.close();
  }, 60_000);
});
