/**
 * Congestion control (issue 25 part 2) end to end: Chromium in a network namespace receives H.264
 * from a runtime through the network lab, negotiates transport-wide congestion-control feedback
 * (transport-cc) and sends it; the runtime's own estimate sets the encoder's target. The downlink
 * is capped at 4 Mbit/s (binding nothing: the stream is 2 Mbit/s of fresh noise), then 0.8 Mbit/s,
 * then 4 again. The target must fall under the cap (with room for the packets' headers and
 * RTCP) and rise again once the cap lifts.
 *
 * Before this change the runtime followed Chromium's REMB, which gets under such a cap but climbs
 * back ~11 kbit/s per second (libwebrtc's receive-side estimator near its last capacity,
 * docs/performance.md): it failed the rise below. Without bandwidth probes (bandwidth-probe.ts)
 * the rise was the estimator's 15 %/s climb alone: it fails the probe check.
 *
 * Bounds are for a loaded 2-core machine: the time under the cap is measured and printed, the
 * bound is generous (8 s; the goal, 2 s, is the bench's to judge).
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import { grainModel } from '../support/grain-model.ts';
import { createLogger } from '../../server-kit/log.ts';
import { stampPosition } from '../../bench/support/pictures.ts';
import { createTestNetwork, type TestNetwork } from '../support/netns.ts';
import { NetworkLab } from '../support/network-lab/network-lab.ts';
import { connectChromiumThroughLab, type ChromiumThroughLab } from '../support/network-lab/chromium-receiver.ts';
import { pollUntil } from '../support/poll.ts';

const WIDTH = 640;
const HEIGHT = 360;
const CONFIGURED_KBPS = 2000;
const CAP_MBPS = 0.8;

const model = grainModel('cc-grain', WIDTH, HEIGHT, CONFIGURED_KBPS);

let net: TestNetwork | undefined;
let runtime: Runtime | undefined;
let lab: NetworkLab | undefined;
let page: ChromiumThroughLab | undefined;

beforeAll(async () => {
  net = await createTestNetwork();
  runtime = await startRuntime({
    model: model as never,
    port: 0,
    host: net.hostAddress,
    ice: { hostAddresses: [net.hostAddress] },
    playground: false,
    logger: createLogger({ test: 'congestion-control' }, 'warn'),
  });
  lab = await NetworkLab.start({
    clientSideAddress: net.hostAddress,
    allowed: [net.peerAddress],
    down: { capMbps: 4, queueMs: 200, delayMs: 10 },
    up: { delayMs: 10 },
  });
}, 90_000);

afterAll(async () => {
  await page?.close().catch(() => {});
  await lab?.close();
  await runtime?.close().catch(() => {});
  await net?.close();
}, 60_000);

async function targetKbps(): Promise<number | undefined> {
  const values = (await runtime!.metrics.targetBitrate.get()).values;
  const value = values.find((v) => v.labels.track === 'main_video' && v.labels.codec === 'h264')?.value;
  return value === undefined ? undefined : value / 1000;
}

/** Bandwidth probes that ended so far with `outcome` (bandwidth-probe.ts), over every track. */
async function probes(outcome: string): Promise<number> {
  const values = (await runtime!.metrics.bandwidthProbes.get()).values;
  return values.filter((v) => v.labels.outcome === outcome).reduce((sum, v) => sum + v.value, 0);
}

describe('congestion control with Chromium (transport-cc)', () => {
  it('lowers the H.264 target under a capacity drop and raises it when the capacity comes back', { timeout: 120_000 }, async () => {
    page = await connectChromiumThroughLab(lab!, net!, runtime!.url, {
      modelName: 'cc-grain',
      stamp: { ...stampPosition(WIDTH, HEIGHT), width: WIDTH },
    });
    await pollUntil('decoded frames', async () => (await page!.frameCount()) > 30, { timeoutMs: 30_000, intervalMs: 200 });
    await page.inbound(); // reads the negotiated codec
    expect(await page.codec()).toBe('video/H264');
    const sdp = await page.page.evaluate(
      () =>
        (window as unknown as { __lab: { client: { getPeerConnection(): RTCPeerConnection } } }).__lab.client.getPeerConnection()
          .remoteDescription?.sdp ?? '',
    );

    const trace: Array<[number, number | undefined]> = [];
    const t0 = performance.now();
    const sample = setInterval(() => void targetKbps().then((kbps) => trace.push([Math.round(performance.now() - t0), kbps])), 100);
    const at = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, t0 + ms - performance.now())));
    try {
      await at(4_000);
      const before = (await targetKbps())!;
      lab!.set({ down: { capMbps: CAP_MBPS } });
      const capAt = performance.now() - t0;
      await at(14_000);
      const raisedBeforeLift = await probes('raised');
      lab!.set({ down: { capMbps: 4 } });
      const liftAt = performance.now() - t0;
      await at(34_000);
      clearInterval(sample);
      const outcomes = Object.fromEntries(
        await Promise.all(['raised', 'no_gain', 'saturated', 'lost'].map(async (o) => [o, await probes(o)])),
      );
      process.stdout.write(`bandwidth probes: ${JSON.stringify(outcomes)} (raised before the lift: ${raisedBeforeLift})\n`);
      const text = trace.map(([t, v]) => `${(t / 1000).toFixed(1)}:${v === undefined ? '-' : Math.round(v)}`).join(' ');
      // What the runtime's target did (kbit/s), for whoever reads the test's output.
      process.stdout.write(
        `congestion-control target trace (cap at ${Math.round(capAt)} ms, lifted at ${Math.round(liftAt)} ms): ${text}\n`,
      );
      expect(before, text).toBeGreaterThan(CAP_MBPS * 1000 * 1.5);
      // Under the cap, less the headers, RTCP and audio's share (90 % of it).
      const underAt = trace.find(([t, v]) => t >= capAt && v !== undefined && v <= CAP_MBPS * 1000 * 0.9)?.[0];
      expect(underAt, text).toBeDefined();
      process.stdout.write(`under the cap ${underAt! - Math.round(capAt)} ms after the step\n`);
      expect(underAt! - capAt, text).toBeLessThanOrEqual(8_000);
      const lowest = Math.min(...trace.filter(([t, v]) => t >= capAt && t < liftAt && v !== undefined).map(([, v]) => v!));
      // Back up once the cap lifts: at least twice the capped rate within 20 s (REMB: ~+11 kbit/s per second).
      const risenAt = trace.find(([t, v]) => t >= liftAt && v !== undefined && v >= Math.max(2 * lowest, 1200))?.[0];
      expect(risenAt, text).toBeDefined();
      process.stdout.write(`risen ${risenAt! - Math.round(liftAt)} ms after the cap lifted\n`);
      // It rose by probing (RTX padding that Chromium counted in its feedback), not only by the
      // estimator's 15 %/s climb: a probe after the lift raised the estimate.
      expect(outcomes.raised, text).toBeGreaterThan(raisedBeforeLift);
      // The runtime's answer negotiated the transport-wide sequence number (transport-cc feedback with it).
      expect(sdp).toContain('transport-wide-cc');
      expect(sdp).toContain('transport-cc');
    } finally {
      clearInterval(sample);
    }
  });
});
