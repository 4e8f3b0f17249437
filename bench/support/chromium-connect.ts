/**
 * Time to ready in Chromium (bench/time-to-ready.ts, `chromium-local`): our browser client
 * (client/browser.ts, bundled) on a bench page in headless Chromium, inside a throwaway network
 * namespace (Chromium gathers no loopback candidate: test/support/netns.ts), against a runtime
 * bound to the namespace's host address. The page stamps the same steps as the Node wrappers
 * (bench/support/connect-timeline.ts) — a pass-through `fetch`, an RTCPeerConnection wrapper — on
 * its own wall clock (`performance.timeOrigin + performance.now()`), and its first frames with
 * `requestVideoFrameCallback` (presented, so Chromium's render scheduling is in them).
 */

import type { Server } from 'node:http';
import { launchChromiumInNamespace, type LaunchedChromium } from '../../test/support/chromium.ts';
import { createTestNetwork, type TestNetwork } from '../../test/support/netns.ts';
import type { Page } from 'playwright-core';
import { startChildRuntime, type ChildRuntime } from './child-runtime.ts';
import { httpLabel, wallClockMs } from './connect-timeline.ts';
import { servePage } from './page-server.ts';

const PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><title>time to ready</title></head>
<body style="margin:0;background:#000">
<script type="module">
import { ArclightClient } from '/arclight-client.js';
const now = () => performance.timeOrigin + performance.now();
let tl = null;
const mark = (t, name) => { if (t && !(name in t.marks)) t.marks[name] = now(); };

const realFetch = window.fetch.bind(window);
window.fetch = async (input, init) => {
  const t = tl;
  const url = new URL(typeof input === 'string' ? input : (input.url ?? String(input)), location.href);
  const call = { method: (init && init.method) || 'GET', path: url.pathname, start: now(), end: NaN, status: 0 };
  const response = await realFetch(input, init);
  call.end = now();
  call.status = response.status;
  if (t) t.http.push(call);
  return response;
};

const canvas = new OffscreenCanvas(32, 18);
const ctx = canvas.getContext('2d', { willReadFrequently: true });
function isBlack(video) {
  ctx.drawImage(video, 0, 0, 32, 18);
  const px = ctx.getImageData(0, 0, 32, 18).data;
  let sum = 0;
  for (let i = 0; i < px.length; i += 4) sum += 0.299 * px[i] + 0.587 * px[i + 1] + 0.114 * px[i + 2];
  return sum / (px.length / 4) < 12;
}

const Real = window.RTCPeerConnection;
function Instrumented(config) {
  const pc = new Real(config);
  const t = tl;
  if (!t) return pc;
  mark(t, 'pc_created');
  const createOffer = pc.createOffer.bind(pc);
  pc.createOffer = async (...a) => { const o = await createOffer(...a); mark(t, 'offer_created'); return o; };
  const setRemote = pc.setRemoteDescription.bind(pc);
  pc.setRemoteDescription = async (d) => { mark(t, 'answer_apply_start'); await setRemote(d); mark(t, 'answer_applied'); };
  const createDataChannel = pc.createDataChannel.bind(pc);
  pc.createDataChannel = (label, init) => { const c = createDataChannel(label, init); c.addEventListener('open', () => mark(t, 'channel_open')); return c; };
  pc.addEventListener('icegatheringstatechange', () => pc.iceGatheringState === 'complete' && mark(t, 'gathered'));
  pc.addEventListener('iceconnectionstatechange', () => {
    if (pc.iceConnectionState === 'checking') mark(t, 'ice_checking');
    if (pc.iceConnectionState === 'connected' || pc.iceConnectionState === 'completed') mark(t, 'ice_connected');
  });
  pc.addEventListener('connectionstatechange', () => pc.connectionState === 'connected' && mark(t, 'dtls_connected'));
  pc.addEventListener('track', (event) => {
    if (event.track.kind !== 'video' || 'video_track' in t.marks) return;
    mark(t, 'video_track');
    const video = document.createElement('video');
    video.muted = true; video.autoplay = true; video.playsInline = true;
    video.srcObject = new MediaStream([event.track]);
    document.body.appendChild(video);
    t.video = video;
    const onFrame = () => {
      mark(t, 'first_frame');
      if (!isBlack(video)) { mark(t, 'first_model_frame'); return; }
      video.requestVideoFrameCallback(onFrame);
    };
    video.requestVideoFrameCallback(onFrame);
  });
  return pc;
}
Instrumented.prototype = Real.prototype;
window.RTCPeerConnection = Instrumented;

window.ttrNow = now;
window.ttrConnect = async (runtimeUrl) => {
  const t = (tl = { t0: now(), marks: {}, http: [] });
  const client = new ArclightClient({ modelName: 'pattern', local: true, localRuntimeUrl: runtimeUrl });
  client.on('statusChanged', (s) => s === 'ready' && mark(t, 'ready'));
  try {
    await client.connect();
    mark(t, 'connect_resolved');
    const until = now() + 5000;
    while (!('first_model_frame' in t.marks) && now() < until) await new Promise((r) => setTimeout(r, 5));
    return { t0: t.t0, marks: t.marks, http: t.http, sessionId: client.getSessionId(), connectionId: client.getConnectionId() };
  } finally {
    tl = null;
    await client.disconnect().catch(() => {});
    if (t.video) { t.video.srcObject = null; t.video.remove(); }
  }
};
</script></body></html>`;

export interface PageConnect {
  /** Wall-clock ms (the page's clock) of the `connect()` call. */
  readonly t0: number;
  readonly marks: Record<string, number>;
  readonly http: Array<{ label: string; start: number; end: number; status: number }>;
  readonly sessionId: string;
  readonly connectionId: number;
  /** Add to a Node-side wall-clock time to put it on the page's clock. */
  readonly clockOffsetMs: number;
}

export interface ChromiumRig {
  readonly runtime: ChildRuntime;
  connect(): Promise<PageConnect>;
  close(): Promise<void>;
}

export async function startChromiumRig(): Promise<ChromiumRig> {
  const net: TestNetwork = await createTestNetwork();
  let runtime: ChildRuntime | undefined;
  let server: Server | undefined;
  let chrome: LaunchedChromium | undefined;
  const close = async () => {
    await chrome?.close().catch(() => {});
    server?.close();
    await runtime?.stop();
    await net.close();
  };
  try {
    runtime = await startChildRuntime(net.hostAddress, { stderrTailChars: 4_000 });
    const served = await servePage(net.hostAddress, PAGE);
    server = served.server;
    chrome = await launchChromiumInNamespace(net);
    const page: Page = await chrome.newPage();
    await page.goto(served.url);
    await page.waitForFunction(() => typeof (window as unknown as { ttrConnect?: unknown }).ttrConnect === 'function');
    const rt = runtime;
    return {
      runtime: rt,
      async connect() {
        // The page's wall clock against this process's, from the middle of one evaluate.
        const before = wallClockMs();
        const pageNow = await page.evaluate(() => (window as unknown as { ttrNow(): number }).ttrNow());
        const clockOffsetMs = pageNow - (before + wallClockMs()) / 2;
        const result = await page.evaluate(
          (url) =>
            (
              window as unknown as {
                ttrConnect(url: string): Promise<
                  Omit<PageConnect, 'clockOffsetMs' | 'http'> & {
                    http: Array<{ method: string; path: string; start: number; end: number; status: number }>;
                  }
                >;
              }
            ).ttrConnect(url),
          rt.url,
        );
        return {
          ...result,
          http: result.http.map((c) => ({ label: httpLabel(c.method, c.path), start: c.start, end: c.end, status: c.status })),
          clockOffsetMs,
        };
      },
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}
