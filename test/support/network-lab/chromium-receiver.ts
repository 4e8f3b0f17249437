/**
 * Ours to a browser through the lab: headless Chromium in a test network namespace runs a small
 * page with the client library (bench/support/page-server.ts) that connects to an Arclight
 * runtime through the lab's signalling proxy and reads the frame stamp of every decoded frame
 * (MediaStreamTrackProcessor). Chromium negotiates H.264 with the runtime, so the runtime's
 * REMB-driven bitrate adaptation is in play (its VP8 to wrtc keeps its start-up rate).
 */

import type { Server } from 'node:http';
import type { Page } from 'playwright-core';
import { servePage } from '../../../bench/support/page-server.ts';
import { launchChromiumInNamespace, type LaunchedChromium } from '../chromium.ts';
import type { TestNetwork } from '../netns.ts';
import type { NetworkLab } from './network-lab.ts';
import type { DecodedFrame, InboundVideo } from './stamped-receiver.ts';

const PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><title>network lab</title></head><body>
<script type="module">
import { ArclightClient } from '/arclight-client.js';
const CELLS = 16, CELL = 16;
const state = { frames: [], errors: [], client: null, codec: null };
window.__lab = state;
const luma = new Uint8Array(CELLS * CELL * CELL * 4);
async function watch(track, stamp) {
  const reader = new MediaStreamTrackProcessor({ track }).readable.getReader();
  for (;;) {
    const { value: frame, done } = await reader.read();
    if (done) return;
    const at = performance.timeOrigin + performance.now();
    try {
      const scale = frame.codedWidth / stamp.width;
      let id;
      if (scale === 1 && (frame.format === 'I420' || frame.format === 'NV12')) {
        const layout = await frame.copyTo(luma, { rect: { x: stamp.x, y: stamp.y, width: CELLS * CELL, height: CELL } });
        id = 0;
        for (let bit = 0; bit < CELLS; bit++) if (luma[layout[0].offset + (CELL / 2) * layout[0].stride + bit * CELL + CELL / 2] > 128) id |= 1 << bit;
      }
      state.frames.push(id === undefined ? { at } : { at, id });
    } catch (e) {
      state.errors.push(String(e));
    } finally {
      frame.close();
    }
  }
}
window.labStart = async (runtimeUrl, modelName, stamp) => {
  const client = new ArclightClient({ modelName, local: true, localRuntimeUrl: runtimeUrl });
  state.client = client;
  client.on('trackReceived', (name, track) => {
    if (name === 'main_video') watch(track, stamp).catch((e) => state.errors.push(String(e)));
  });
  await client.connect();
};
window.labInbound = async () => {
  const pc = state.client?.getPeerConnection();
  const zero = { bytesReceived: 0, packetsReceived: 0, packetsLost: 0, framesDecoded: 0, nackCount: 0, pliCount: 0, frameWidth: 0, frameHeight: 0, fecPacketsReceived: 0, fecPacketsDiscarded: 0 };
  if (!pc) return zero;
  let found = zero;
  const report = await pc.getStats();
  report.forEach((s) => {
    if (s.type !== 'inbound-rtp' || s.kind !== 'video') return;
    state.codec = report.get(s.codecId)?.mimeType ?? null;
    for (const key of Object.keys(zero)) found = { ...found, [key]: typeof s[key] === 'number' ? s[key] : 0 };
  });
  return found;
};
window.labStop = () => state.client?.disconnect();
</script></body></html>`;

export interface ChromiumThroughLab {
  readonly page: Page;
  /** Decoded frames so far, on this process's epoch clock (the page's, corrected by the measured offset). */
  frames(): Promise<DecodedFrame[]>;
  frameCount(): Promise<number>;
  inbound(): Promise<InboundVideo>;
  /** The negotiated video codec (e.g. video/H264), once known. */
  codec(): Promise<string | null>;
  close(): Promise<void>;
}

/** page epoch-ms clock − this process's, from the Playwright round trip with the smallest RTT. */
async function clockOffset(page: Page): Promise<number> {
  let best = { offset: 0, uncertainty: Infinity };
  for (let i = 0; i < 20; i++) {
    const t0 = performance.timeOrigin + performance.now();
    const pageNow = await page.evaluate(() => performance.timeOrigin + performance.now());
    const t1 = performance.timeOrigin + performance.now();
    if ((t1 - t0) / 2 < best.uncertainty) best = { offset: pageNow - (t0 + t1) / 2, uncertainty: (t1 - t0) / 2 };
  }
  return best.offset;
}

/**
 * Connects a Chromium page in `net` to `runtimeUrl` through `lab` (whose client side must be
 * `net.hostAddress`, with `net.peerAddress` allowed).
 */
export async function connectChromiumThroughLab(
  lab: NetworkLab,
  net: TestNetwork,
  runtimeUrl: string,
  options: { readonly modelName: string; readonly stamp: { readonly x: number; readonly y: number; readonly width: number } },
): Promise<ChromiumThroughLab> {
  const proxy = await lab.proxyHttp(runtimeUrl);
  const served: { server: Server; url: string } = await servePage(net.hostAddress, PAGE);
  let chrome: LaunchedChromium | undefined;
  try {
    chrome = await launchChromiumInNamespace(net, { secureOrigins: [served.url.replace(/\/$/, ''), proxy.url] });
    const page = await chrome.newPage();
    await page.goto(served.url);
    await page.waitForFunction(() => typeof (window as unknown as { labStart?: unknown }).labStart === 'function');
    await page.evaluate(
      ([url, modelName, stamp]) =>
        (window as unknown as { labStart: (u: string, m: string, s: unknown) => Promise<void> }).labStart(url, modelName, stamp),
      [proxy.url, options.modelName, options.stamp] as const,
    );
    const offset = await clockOffset(page);
    const launched = chrome;
    return {
      page,
      frames: async () =>
        (await page.evaluate(() => (window as unknown as { __lab: { frames: DecodedFrame[] } }).__lab.frames)).map((f) => ({
          ...f,
          at: f.at - offset,
        })),
      frameCount: () => page.evaluate(() => (window as unknown as { __lab: { frames: unknown[] } }).__lab.frames.length),
      inbound: () => page.evaluate(() => (window as unknown as { labInbound: () => Promise<InboundVideo> }).labInbound()),
      codec: () => page.evaluate(() => (window as unknown as { __lab: { codec: string | null } }).__lab.codec),
      close: async () => {
        await page.evaluate(() => (window as unknown as { labStop: () => Promise<void> }).labStop()).catch(() => undefined);
        await launched.close();
        served.server.closeAllConnections();
        await new Promise<void>((resolve) => served.server.close(() => resolve()));
      },
    };
  } catch (error) {
    await chrome?.close();
    served.server.close();
    throw error;
  }
}
