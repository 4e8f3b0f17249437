/**
 * FlexFEC end to end (issue 25 part 4; runtime/transport/send/flexfec.ts): Chromium in a network
 * namespace offers `flexfec-03`, the runtime's answer pairs a FEC SSRC with the H.264 stream
 * (`a=ssrc-group:FEC-FR`), and once the receiver reports loss the runtime sends repair packets
 * after each frame. To show that Chromium rebuilds lost packets from them — not only that it
 * counts them — the runtime answers no NACK (the test-only `noResends` fault) while the lab
 * loses 1 % of the video: a loss only a repair packet can fill. Without FlexFEC each loss stalls
 * the picture until the receiver asks for a keyframe (checked with repair packets switched off:
 * 16–23 frames decoded in the window at 1 % loss, against 86 or more with them; at 2 %, 0 against
 * 59 — two losses in one repair group stall it too, hence 1 % here).
 *
 * Bounds are for a loaded 2-core machine: frame counts and picture-loss reports over the window,
 * no timing.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Runtime } from '../../runtime/index.ts';
import { grainModel } from '../support/grain-model.ts';
import { startRuntimeWithFaults } from '../../runtime/faults/start-runtime-with-faults.ts';
import { createLogger } from '../../server-kit/log.ts';
import { stampPosition } from '../../bench/support/pictures.ts';
import { MAX_RTP_PACKET_BYTES } from '../../runtime/transport/rtp/packet-size.ts';
import { createTestNetwork, type TestNetwork } from '../support/netns.ts';
import { NetworkLab } from '../support/network-lab/network-lab.ts';
import { connectChromiumThroughLab, type ChromiumThroughLab } from '../support/network-lab/chromium-receiver.ts';
import { pollUntil } from '../support/poll.ts';

const WIDTH = 640;
const HEIGHT = 360;

const model = grainModel('fec-grain', WIDTH, HEIGHT, 1500);

let net: TestNetwork | undefined;
let runtime: Runtime | undefined;
let lab: NetworkLab | undefined;
let page: ChromiumThroughLab | undefined;
/** The downlink's datagrams by SSRC (RTP only), and the largest one. */
const bySsrc = new Map<number, number>();
let largest = 0;

beforeAll(async () => {
  net = await createTestNetwork();
  runtime = await startRuntimeWithFaults(
    {
      model: model as never,
      port: 0,
      host: net.hostAddress,
      ice: { hostAddresses: [net.hostAddress] },
      playground: false,
      logger: createLogger({ test: 'flexfec' }, 'warn'),
    },
    { noResends: true },
  );
  lab = await NetworkLab.start({
    clientSideAddress: net.hostAddress,
    allowed: [net.peerAddress],
    down: { delayMs: 20 },
    up: { delayMs: 20 },
  });
  const down = lab.down.send.bind(lab.down);
  lab.down.send = (datagram, bytes) => {
    const data = datagram.data;
    const payloadType = (data[1] ?? 0) & 0x7f;
    // RTP (RFC 7983: first byte 128–191), not RTCP (payload types 64–95 under the marker bit).
    if (data.length >= 12 && data[0]! >> 6 === 2 && (payloadType < 64 || payloadType > 95)) {
      const ssrc = data.readUInt32BE(8);
      bySsrc.set(ssrc, (bySsrc.get(ssrc) ?? 0) + 1);
      largest = Math.max(largest, data.length);
    }
    down(datagram, bytes);
  };
}, 90_000);

afterAll(async () => {
  await page?.close().catch(() => {});
  await lab?.close();
  await runtime?.close().catch(() => {});
  await net?.close();
}, 60_000);

describe('FlexFEC to Chromium', () => {
  it(
    'negotiates a FEC SSRC, sends repair packets on a lossy path, and Chromium rebuilds the losses from them',
    { timeout: 120_000 },
    async () => {
      page = await connectChromiumThroughLab(lab!, net!, runtime!.url, {
        modelName: 'fec-grain',
        stamp: { ...stampPosition(WIDTH, HEIGHT), width: WIDTH },
      });
      await pollUntil('decoded frames', async () => (await page!.frameCount()) > 30, { timeoutMs: 30_000, intervalMs: 200 });
      await page.inbound();
      expect(await page.codec()).toBe('video/H264');
      const sdp = await page.page.evaluate(
        () =>
          (window as unknown as { __lab: { client: { getPeerConnection(): RTCPeerConnection } } }).__lab.client.getPeerConnection()
            .remoteDescription?.sdp ?? '',
      );
      const fecGroup = /^a=ssrc-group:FEC-FR (\d+) (\d+)\r?$/m.exec(sdp);
      const fidGroup = /^a=ssrc-group:FID (\d+) (\d+)\r?$/m.exec(sdp);
      expect(sdp).toMatch(/^a=rtpmap:\d+ flexfec-03\/90000\r?$/m);
      expect(fecGroup, sdp).not.toBeNull();
      expect(fidGroup, sdp).not.toBeNull();
      const fecSsrc = Number(fecGroup![2]);
      expect(Number(fecGroup![1])).toBe(Number(fidGroup![1])); // protects the media SSRC

      // 1 % of the video lost, and no resends. A first loss's NACK turns the repair packets on (that
      // loss, with no repair, stalls the picture until a keyframe: before the window).
      lab!.set({ down: { lossPercent: 1 } });
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      const before = await page.inbound();
      const framesBefore = await page.frameCount();
      const fecBefore = bySsrc.get(fecSsrc) ?? 0;
      await new Promise((resolve) => setTimeout(resolve, 6_000));
      const after = await page.inbound();
      const frames = (await page.frameCount()) - framesBefore;
      lab!.set({ down: { lossPercent: 0 } });
      const detail = JSON.stringify({ before, after, frames, bySsrc: Object.fromEntries(bySsrc), largest, down: lab!.counters.down });

      expect(lab!.counters.down.droppedRandom, detail).toBeGreaterThan(0);
      expect((bySsrc.get(fecSsrc) ?? 0) - fecBefore, detail).toBeGreaterThan(0);
      const counted = (await runtime!.metrics.rtpFecPackets.get()).values.reduce((sum, v) => sum + v.value, 0);
      expect(counted, detail).toBe(bySsrc.get(fecSsrc));
      expect(after.fecPacketsReceived - before.fecPacketsReceived, detail).toBeGreaterThan(0);
      // Every datagram, repair packets included, within the 1200-byte budget.
      expect(largest, detail).toBeLessThanOrEqual(MAX_RTP_PACKET_BYTES);
      // The picture went on with no resend at all: 6 s at 30 fps is 180 frames. Repair packets
      // off, every loss stalls it until a keyframe — 16 and 23 frames in two runs; on, 86–179 in
      // the seven runs counted (a group that lost two packets, or repair packets held back for a second after a
      // delay-based decrease on a loaded machine, stalls it too: hence a third, not more). Picture
      // loss reports and NACK counts do not tell the two apart as well: one stall re-NACKs a
      // packet every ~100 ms for as long as it lasts.
      expect(frames, detail).toBeGreaterThan(60);
    },
  );
});
