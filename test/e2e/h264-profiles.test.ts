/**
 * H.264 profiles end to end at the RTP level (issue 3, part 4): a client whose only H.264 is High
 * (`profile-level-id=640c1f`, as some hardware-decoder clients offer) gets a High-profile stream
 * (SPS profile_idc 100) that depacketizes and decodes to the model's picture; a client offering
 * Constrained Baseline gets profile_idc 66. werift peers, since this Chromium offers no High.
 */
import { afterEach, beforeAll, afterAll, describe, expect, it } from 'vitest';
import pattern, { PATCH } from '../../models/examples/pattern/index.ts';
import { rgbToYuv } from '../../models/examples/shared/i420-canvas.ts';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import { createLogger } from '../../server-kit/log.ts';
import { waitUntil } from '../support/video-probe.ts';
import { decodeTrack, openWeriftPeer, type WeriftPeer } from '../support/werift-peer.ts';

const LOOPBACK = '127.0.0.1';

/** profile_idc of the first SPS (NAL type 7) in an Annex-B access unit. */
function spsProfile(unit: Buffer): number | undefined {
  for (let i = 0; i + 4 < unit.length; i++) {
    if (unit[i] === 0 && unit[i + 1] === 0 && unit[i + 2] === 1 && (unit[i + 3]! & 0x1f) === 7) return unit[i + 4];
  }
  return undefined;
}

describe('H.264 profile follows what the client offers', () => {
  let runtime: Runtime;
  let peer: WeriftPeer | undefined;
  beforeAll(async () => {
    runtime = await startRuntime({
      model: pattern as never,
      port: 0,
      host: LOOPBACK,
      ice: { hostAddresses: [LOOPBACK] },
      playground: false,
      logger: createLogger({ test: 'h264-profiles' }, 'error'),
    });
  });
  afterEach(async () => {
    await peer?.close();
    peer = undefined;
    // The local runtime keeps one session: end it so the next peer can start one.
    await fetch(`${runtime.url}/stop_session`, { method: 'POST', body: '{}' }).catch(() => {});
  });
  afterAll(async () => runtime?.close());

  async function receive(
    parameters: string,
  ): Promise<{ profile: number | undefined; decoded: number; centre: { y: number; v: number } | undefined; answered: string | undefined }> {
    let profile: number | undefined;
    let decoded = 0;
    let centre: { y: number; v: number } | undefined;
    peer = await openWeriftPeer(runtime.url, { videoMime: 'video/H264', videoParameters: parameters });
    const decoding = await decodeTrack(peer, 'main_video', 'h264', (frame, unit) => {
      profile ??= spsProfile(unit.data);
      decoded++;
      const x = PATCH.x + PATCH.size / 2;
      const y = PATCH.y + PATCH.size / 2;
      const luma = frame.width * frame.height;
      centre = { y: frame.data[y * frame.width + x]!, v: frame.data[luma * 1.25 + (y / 2) * (frame.width / 2) + x / 2]! };
    });
    try {
      await waitUntil(() => decoded >= 20, 20_000, '20 decoded H.264 frames');
    } finally {
      decoding.close();
    }
    return { profile, decoded, centre, answered: peer.video.codecs[0]?.parameters };
  }

  it('sends High (profile_idc 100) to a client that offers only High, and it decodes to the model picture', async () => {
    const result = await receive('level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=640c1f');
    expect(result.answered).toMatch(/profile-level-id=640c1f/);
    expect(result.profile).toBe(100);
    const red = rgbToYuv(0xe0, 0x10, 0x10);
    expect(Math.abs(result.centre!.y - red.y)).toBeLessThan(12);
    expect(Math.abs(result.centre!.v - red.v)).toBeLessThan(12);
  });

  it('sends Constrained Baseline (profile_idc 66) to a client that offers it', async () => {
    const result = await receive('level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f');
    expect(result.profile).toBe(66);
  });
});
