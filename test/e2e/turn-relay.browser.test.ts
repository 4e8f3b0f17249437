/**
 * Media through a real TURN server (issue 7, media reachability): Chromium told to use relay
 * candidates only (`iceTransportPolicy: 'relay'`, the client library's option) still gets the
 * model's video, relayed by coturn with the time-limited credential the runtime minted.
 *
 *   Chromium (namespace, peerAddress) ──TURN/UDP──> coturn (hostAddress:port) ──relay──> runtime (hostAddress, ICE port range)
 *
 * A throwaway network namespace (test/support/netns.ts) holds Chromium; coturn
 * (test/support/coturn.ts) listens and relays on the host end of the veth, and may relay to the
 * runtime's address only; the runtime serves `pattern` there with `ice.turn` (coturn's shared
 * secret) and `ice.portRange`. The client gets its TURN credential from the runtime's
 * ice_servers. Checked: the picture decodes (the red patch of `pattern` at its place), the
 * selected candidate pair's local candidate is a relay on coturn, the remote one is the
 * runtime's host candidate on its port range, coturn's log shows the allocation made with the
 * session's credential, and the relayed bytes are video (inbound-rtp bytes keep growing).
 *
 * Every server listens on the namespace's host address only; nothing is sent anywhere else.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import pattern, { HEIGHT, PATCH, WIDTH } from '../../models/examples/pattern/index.ts';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import { createLogger } from '../../server-kit/log.ts';
import { openClientPage, type PageWindow } from '../support/browser-rig.ts';
import { launchChromiumInNamespace, type LaunchedChromium } from '../support/chromium.ts';
import { startCoturn, type CoturnServer } from '../support/coturn.ts';
import { createTestNetwork, type TestNetwork } from '../support/netns.ts';
import { pollUntil } from '../support/poll.ts';

/** The runtime's ICE ports (on the namespace's own address, so no other test competes for them). */
const PORT_RANGE: [number, number] = [40_000, 40_049];

interface Rgb {
  r: number;
  g: number;
  b: number;
}

interface SelectedPair {
  local: { candidateType: string; address: string; port: number; relayProtocol?: string } | null;
  remote: { candidateType: string; address: string; port: number } | null;
  state: string;
  bytesReceived: number;
}

type TestWindow = PageWindow & {
  client: InstanceType<PageWindow['ArclightClient']>;
  video: HTMLVideoElement;
};

let net: TestNetwork | undefined;
let coturn: CoturnServer | undefined;
let runtime: Runtime | undefined;
let chrome: LaunchedChromium | undefined;

beforeAll(async () => {
  net = await createTestNetwork();
  coturn = await startCoturn({ address: net.hostAddress, allowedPeers: [net.hostAddress] });
  runtime = await startRuntime({
    model: pattern as never,
    port: 0,
    host: net.hostAddress,
    logger: createLogger({ test: 'turn-relay' }, 'warn'),
    ice: {
      hostAddresses: [net.hostAddress],
      portRange: PORT_RANGE,
      turn: { urls: [coturn.url], secret: coturn.secret, ttlSeconds: 300 },
    },
  });
  chrome = await launchChromiumInNamespace(net, { secureOrigins: [runtime.url] });
}, 90_000);

afterAll(async () => {
  await chrome?.close().catch(() => {});
  await runtime?.close().catch(() => {});
  await coturn?.stop();
  await net?.close();
}, 60_000);

function until<T>(
  what: string,
  probe: () => Promise<T | undefined | null | false>,
  diagnostics: () => string,
  timeoutMs = 20_000,
): Promise<T> {
  return pollUntil(what, probe, { timeoutMs, diagnostics: () => `\n${diagnostics()}` });
}

/** Mean colour of a 9×9 block around (fx, fy) — fractions of the frame — of the video's current frame. */
function samplePixel(page: Page, fx: number, fy: number): Promise<Rgb | null> {
  return page.evaluate(
    ({ fx, fy }) => {
      const { video } = window as unknown as TestWindow;
      if (video.videoWidth === 0) return null;
      const canvas = document.createElement('canvas');
      canvas.width = video.videoWidth;
      canvas.height = video.videoHeight;
      const ctx = canvas.getContext('2d', { willReadFrequently: true })!;
      ctx.drawImage(video, 0, 0);
      const data = ctx.getImageData(Math.round(fx * canvas.width) - 4, Math.round(fy * canvas.height) - 4, 9, 9).data;
      let r = 0;
      let g = 0;
      let b = 0;
      for (let i = 0; i < data.length; i += 4) {
        r += data[i]!;
        g += data[i + 1]!;
        b += data[i + 2]!;
      }
      const n = data.length / 4;
      return { r: Math.round(r / n), g: Math.round(g / n), b: Math.round(b / n) };
    },
    { fx, fy },
  );
}

/** The transport's selected candidate pair and its two candidates, from getStats(). */
function selectedPair(page: Page): Promise<SelectedPair | null> {
  return page.evaluate(async () => {
    const pc = (window as unknown as TestWindow).client.getPeerConnection();
    if (!pc) return null;
    const stats = [...(await pc.getStats()).values()] as Array<Record<string, unknown>>;
    const transport = stats.find((s) => s['type'] === 'transport' && typeof s['selectedCandidatePairId'] === 'string');
    const pair = stats.find((s) => s['id'] === transport?.['selectedCandidatePairId']);
    if (!pair) return null;
    const candidate = (id: unknown) => {
      const c = stats.find((s) => s['id'] === id);
      return c
        ? {
            candidateType: String(c['candidateType']),
            address: String(c['address'] ?? c['ip']),
            port: Number(c['port']),
            ...(typeof c['relayProtocol'] === 'string' ? { relayProtocol: c['relayProtocol'] } : {}),
          }
        : null;
    };
    return {
      local: candidate(pair['localCandidateId']),
      remote: candidate(pair['remoteCandidateId']),
      state: String(pair['state']),
      bytesReceived: Number(pair['bytesReceived'] ?? 0),
    };
  });
}

function inboundVideoBytes(page: Page): Promise<number> {
  return page.evaluate(async () => {
    const pc = (window as unknown as TestWindow).client.getPeerConnection();
    if (!pc) return 0;
    const stats = [...(await pc.getStats()).values()] as Array<Record<string, unknown>>;
    return Number(stats.find((s) => s['type'] === 'inbound-rtp' && s['kind'] === 'video')?.['bytesReceived'] ?? 0);
  });
}

const near = (actual: Rgb | null, expected: Rgb, tolerance: number): boolean =>
  actual !== null &&
  Math.abs(actual.r - expected.r) <= tolerance &&
  Math.abs(actual.g - expected.g) <= tolerance &&
  Math.abs(actual.b - expected.b) <= tolerance;

describe('TURN relay (coturn) with iceTransportPolicy relay', () => {
  it('streams decoded video through the relay, with the credential from ice_servers', { timeout: 90_000 }, async () => {
    const { page, log } = await openClientPage({ net: net!, runtime: runtime!, chrome: chrome! });
    const diagnostics = () =>
      `--- page console (last 40) ---\n${log.slice(-40).join('\n')}\n--- coturn log (tail) ---\n${coturn!.log().slice(-4000)}`;
    try {
      // The page's client: relay only, its TURN server and credential from the runtime.
      const iceServers = await page.evaluate(async () => {
        const w = window as unknown as TestWindow;
        const video = document.createElement('video');
        video.muted = true;
        video.autoplay = true;
        video.playsInline = true;
        document.body.append(video);
        w.video = video;
        w.client = new w.ArclightClient({
          modelName: 'pattern',
          local: true,
          localRuntimeUrl: location.origin,
          iceTransportPolicy: 'relay',
        });
        w.client.on('trackReceived', (name, track) => {
          if (name !== 'main_video') return;
          video.srcObject = new MediaStream([track]);
          void video.play().catch((error: unknown) => console.error(`video.play(): ${String(error)}`));
        });
        // Record what the client was given, to compare with what coturn saw.
        const given: RTCIceServer[] = [];
        const Original = window.RTCPeerConnection;
        window.RTCPeerConnection = class extends Original {
          constructor(config?: RTCConfiguration) {
            given.push(...(config?.iceServers ?? []));
            if (config?.iceTransportPolicy !== 'relay')
              throw new Error(`the client passed iceTransportPolicy ${String(config?.iceTransportPolicy)}`);
            super(config);
          }
        } as typeof RTCPeerConnection;
        await w.client.connect();
        window.RTCPeerConnection = Original;
        return given.map((s) => ({
          urls: s.urls,
          username: s.username ?? null,
          hasCredential: typeof s.credential === 'string' && s.credential.length > 0,
        }));
      });
      const sessionId = runtime!.sessions.current?.id;
      expect(sessionId).toBeDefined();
      expect(iceServers).toEqual([
        { urls: [coturn!.url], username: expect.stringMatching(new RegExp(`^\\d+:${sessionId}$`)), hasCredential: true },
      ]);

      // Decoded frames with the right picture: pattern's red patch at its place.
      await until(
        'decoded frames',
        () => page.evaluate(() => (window as unknown as TestWindow).video.getVideoPlaybackQuality().totalVideoFrames > 5),
        diagnostics,
        20_000,
      );
      const red = { r: 0xe0, g: 0x10, b: 0x10 };
      const fx = (PATCH.x + PATCH.size / 2) / WIDTH;
      const fy = (PATCH.y + PATCH.size / 2) / HEIGHT;
      let sample: Rgb | null = null;
      const pixel = await until(
        'the red patch',
        async () => {
          sample = await samplePixel(page, fx, fy);
          return near(sample, red, 40) ? sample : undefined;
        },
        () => `last sample ${JSON.stringify(sample)}\n${diagnostics()}`,
      );
      expect(near(pixel, red, 40), JSON.stringify(pixel)).toBe(true);
      expect(
        await page.evaluate(() => [
          (window as unknown as TestWindow).video.videoWidth,
          (window as unknown as TestWindow).video.videoHeight,
        ]),
      ).toEqual([WIDTH, HEIGHT]);

      // The media path is the relay: local candidate = coturn's relayed address, remote = the
      // runtime's host candidate on its port range.
      const pair = await until(
        'a selected candidate pair',
        async () => {
          const p = await selectedPair(page);
          return p?.local && p.remote ? p : undefined;
        },
        diagnostics,
      );
      expect(pair.local, JSON.stringify(pair)).toMatchObject({ candidateType: 'relay', address: coturn!.address, relayProtocol: 'udp' });
      expect(pair.local!.port).toBeGreaterThanOrEqual(coturn!.relayPorts[0]);
      expect(pair.local!.port).toBeLessThanOrEqual(coturn!.relayPorts[1]);
      expect(pair.remote, JSON.stringify(pair)).toMatchObject({ address: net!.hostAddress });
      expect(pair.remote!.port).toBeGreaterThanOrEqual(PORT_RANGE[0]);
      expect(pair.remote!.port).toBeLessThanOrEqual(PORT_RANGE[1]);
      expect(pair.state).toBe('succeeded');

      // Video keeps flowing over it.
      const before = await inboundVideoBytes(page);
      await until('more video bytes through the relay', async () => (await inboundVideoBytes(page)) > before + 20_000, diagnostics, 10_000);

      // coturn authenticated the session's credential (REST-API username `<expiry>:<session id>`).
      const turnLog = coturn!.log();
      expect(turnLog, diagnostics()).toMatch(new RegExp(`user <\\d+:${sessionId}>: incoming packet ALLOCATE processed, success`));
      expect(turnLog).toMatch(new RegExp(`user <\\d+:${sessionId}>: incoming packet CREATE_PERMISSION processed, success`));

      await page.evaluate(() => (window as unknown as TestWindow).client.disconnect());
      const errors = log.filter((line) => line.startsWith('pageerror'));
      expect(errors, errors.join('\n')).toEqual([]);
    } finally {
      await page.close();
    }
  });
});
