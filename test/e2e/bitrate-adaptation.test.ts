/**
 * Network adaptation (media engine part 5): the encoder's target bitrate follows the receiver's
 * bandwidth estimate (REMB) with headroom, within 500 kbps – 10 Mbps and never above the
 * track's configured rate, and recovers when the estimate does.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ReceiverEstimatedMaxBitrate, RtcpPayloadSpecificFeedback } from 'werift';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import pattern from '../../models/examples/pattern/index.ts';
import { waitUntil } from '../support/video-probe.ts';
import { openWeriftPeer, type WeriftPeer } from '../support/werift-peer.ts';

const LOOPBACK = '127.0.0.1';

describe('bitrate adaptation', () => {
  let runtime: Runtime;
  let peer: WeriftPeer | undefined;
  beforeAll(async () => {
    runtime = await startRuntime({ model: pattern as never, port: 0, host: LOOPBACK, ice: { hostAddresses: [LOOPBACK] } });
  });
  afterAll(async () => {
    await peer?.close();
    await runtime?.close();
  });

  async function target(): Promise<number | undefined> {
    const values = (await runtime.metrics.targetBitrate.get()).values;
    return values.find((v) => v.labels.track === 'main_video' && v.labels.codec === 'h264')?.value;
  }

  it('follows the receiver estimate down and back up to the configured rate', async () => {
    peer = await openWeriftPeer(runtime.url, { videoMime: 'video/H264' });
    let mediaSsrc = 0;
    peer.onVideoRtp((rtp) => (mediaSsrc = rtp.header.ssrc));
    await waitUntil(async () => mediaSsrc !== 0 && (await target()) !== undefined, 10_000, 'H.264 flowing');
    const configured = (await target())!;
    expect(configured).toBeGreaterThan(1_500_000); // 720p default ≈ 2.5 Mbit/s

    const remb = (bitsPerSecond: bigint) => {
      // werift serializes the 6-bit exponent and 18-bit mantissa, not `bitrate` itself.
      let brExp = 0;
      while (bitsPerSecond >> BigInt(brExp) >= 1n << 18n) brExp++;
      const brMantissa = Number(bitsPerSecond >> BigInt(brExp));
      const report = new RtcpPayloadSpecificFeedback({
        feedback: new ReceiverEstimatedMaxBitrate({
          senderSsrc: 1,
          mediaSsrc: 0,
          brExp,
          brMantissa,
          bitrate: bitsPerSecond,
          ssrcNum: 1,
          ssrcFeedbacks: [mediaSsrc],
        }),
      });
      void peer!.video.receiver.dtlsTransport.sendRtcp([report]);
    };
    // A receiver that can take 800 kbit/s: the encoder targets 90% of it.
    const low = setInterval(() => remb(800_000n), 200);
    try {
      await waitUntil(async () => Math.abs(((await target()) ?? 0) - 720_000) < 40_000, 10_000, 'the target to drop to ~720 kbit/s');
    } finally {
      clearInterval(low);
    }
    // Never below the floor.
    const floor = setInterval(() => remb(100_000n), 200);
    try {
      await waitUntil(async () => (await target()) === 500_000, 10_000, 'the 500 kbit/s floor');
    } finally {
      clearInterval(floor);
    }
    // A generous estimate brings it back to the configured rate, not beyond.
    const high = setInterval(() => remb(50_000_000n), 200);
    try {
      await waitUntil(async () => (await target()) === configured, 10_000, 'the configured rate again');
    } finally {
      clearInterval(high);
    }
  });
});
