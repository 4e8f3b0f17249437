/**
 * The network lab with a browser: headless Chromium in a network namespace loads the playground
 * through the lab's signalling proxy (on the namespace's host address) and connects to an
 * Arclight runtime bound to the same host address, with 2 % loss and 20 ms delay each way. The
 * runtime's real candidates never reach the page (the proxy rewrites them to the relay's), so
 * the session can only run through the relay: it must reach `ready`, keep decoding, and the lab's
 * counters must show the traffic and the loss.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import pattern from '../../models/examples/pattern/index.ts';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import { createLogger } from '../../server-kit/log.ts';
import { launchChromiumInNamespace, recordPageLog, type LaunchedChromium } from '../support/chromium.ts';
import { createTestNetwork, type TestNetwork } from '../support/netns.ts';
import { NetworkLab } from '../support/network-lab/network-lab.ts';
import type { SignallingProxy } from '../support/network-lab/signalling-proxy.ts';
import { pollUntil } from '../support/poll.ts';

let net: TestNetwork | undefined;
let runtime: Runtime | undefined;
let lab: NetworkLab | undefined;
let proxy: SignallingProxy;
let chrome: LaunchedChromium | undefined;

beforeAll(async () => {
  net = await createTestNetwork();
  const ice = { hostAddresses: [net.hostAddress] };
  runtime = await startRuntime({
    model: pattern as never,
    port: 0,
    host: net.hostAddress,
    ice,
    logger: createLogger({ test: 'network-lab' }, 'warn'),
  });
  lab = await NetworkLab.start({
    clientSideAddress: net.hostAddress,
    allowed: [net.peerAddress],
    seed: 2500, // drops the down link's 3rd datagram: the impairment shows however short the run
    down: { lossPercent: 2, delayMs: 20 },
    up: { lossPercent: 2, delayMs: 20 },
  });
  proxy = await lab.proxyHttp(runtime.url);
  chrome = await launchChromiumInNamespace(net, { secureOrigins: [proxy.url] });
}, 90_000);

afterAll(async () => {
  await chrome?.close().catch(() => {});
  await lab?.close();
  await runtime?.close().catch(() => {});
  await net?.close();
}, 60_000);

function decodedFrames(page: Page): Promise<number> {
  return page.evaluate(() => {
    const video = document.querySelector<HTMLVideoElement>('video[data-track="main_video"]');
    return !video || video.videoWidth === 0 ? 0 : video.getVideoPlaybackQuality().totalVideoFrames;
  });
}

describe('network lab with Chromium in a namespace', () => {
  it(
    'the playground, loaded through the proxy, streams through the relay under 2 % loss and 20 ms each way',
    { timeout: 90_000 },
    async () => {
      const page = await chrome!.newPage();
      const lines = recordPageLog(page);
      // Keep the page's peers, for their inbound-rtp counters.
      await page.addInitScript(() => {
        const pcs: RTCPeerConnection[] = [];
        (window as unknown as { __pcs: RTCPeerConnection[] }).__pcs = pcs;
        const Original = window.RTCPeerConnection;
        window.RTCPeerConnection = class extends Original {
          constructor(configuration?: RTCConfiguration) {
            super(configuration);
            pcs.push(this);
          }
        } as typeof RTCPeerConnection;
      });
      const diagnostics = async () => `\ncounters ${JSON.stringify(lab!.counters)}\n--- console ---\n${lines.slice(-40).join('\n')}`;
      await page.goto(`${proxy.url}/`);
      await page.waitForSelector('#connect:not([disabled])', { timeout: 15_000 });
      await page.click('#connect');
      await pollUntil('status ready', async () => (await page.getAttribute('#status', 'data-status')) === 'ready', {
        timeoutMs: 30_000,
        intervalMs: 150,
        diagnostics,
      });
      await pollUntil('decoded frames', async () => (await decodedFrames(page)) > 0, { timeoutMs: 15_000, intervalMs: 150, diagnostics });
      // Frames keep coming (counted, not timed): 60 more, with a generous ceiling for a loaded machine.
      const first = await decodedFrames(page);
      await pollUntil('60 more decoded frames', async () => (await decodedFrames(page)) - first >= 60, {
        timeoutMs: 30_000,
        intervalMs: 200,
        diagnostics,
      });
      const { down, up, relay } = lab!.counters;
      const detail = await diagnostics();
      expect(proxy.rewrittenResponses, detail).toBeGreaterThan(0);
      expect(relay.clientFacingSockets, detail).toBeGreaterThan(0);
      expect(relay.serverFacingSockets, detail).toBeGreaterThan(0);
      expect(relay.refused, detail).toBe(0);
      expect(down.delivered, detail).toBeGreaterThan(60);
      expect(down.droppedRandom, detail).toBeGreaterThan(0);
      expect(up.delivered, detail).toBeGreaterThan(0);
      // Every video packet the browser counted came through the relay (which carried more: RTCP, STUN, SCTP).
      const received = await page.evaluate(async () => {
        let packets = 0;
        for (const pc of (window as unknown as { __pcs: RTCPeerConnection[] }).__pcs) {
          (await pc.getStats()).forEach((entry: { type: string; kind?: string; packetsReceived?: number }) => {
            if (entry.type === 'inbound-rtp' && entry.kind === 'video') packets += entry.packetsReceived ?? 0;
          });
        }
        return packets;
      });
      expect(received, detail).toBeGreaterThan(0);
      expect(received, detail).toBeLessThanOrEqual(lab!.counters.down.delivered);
    },
  );
});
