/**
 * Compatibility in a real browser: an UNMODIFIED `@reactor-team/js-sdk@2.9.0` bundled for the
 * browser (esbuild; react, zustand and zod bundled in; `process.env.NODE_ENV` defined as
 * "production", as an app's bundler would) drives the Arclight runtime in local mode from
 * headless Chromium.
 *
 * Topology (see test/support/netns.ts): Chromium runs in a throwaway network namespace; the
 * runtime and a tiny page server both bind to the host end of the veth, on different ports, so
 * the page is cross-origin to the runtime and every SDK call is a CORS request (with a preflight:
 * the SDK sends Reactor-* headers, Authorization and Content-Type: application/json).
 *
 * The page is not the playground: it only does what an app on 2.9.0 does (construct, connect,
 * attach the `main_video` track to a <video>, sendCommand) and reports to the test through
 * `window.compat`. A transparent `fetch` wrapper records each call's method, path and status.
 */

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import pattern, { PATCH } from '../../models/examples/pattern/index.ts';
import { launchChromiumInNamespace, type LaunchedChromium } from '../support/chromium.ts';
import { assertCanCreateNetworkNamespaces, createTestNetwork, type TestNetwork } from '../support/netns.ts';

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
const PATCH_CENTRE = { x: PATCH.x + PATCH.size / 2, y: PATCH.y + PATCH.size / 2 };

/** The app's entry module: nothing but the SDK's public export. */
const ENTRY = `export { Reactor } from '@reactor-team/js-sdk';`;

/** The "app": plain 2.9.0 usage, plus reporting into window.compat for the test. */
function pageHtml(runtimeUrl: string): string {
  return `<!doctype html>
<meta charset="utf-8">
<title>js-sdk 2.9.0 compat</title>
<video id="v" autoplay muted playsinline width="1280" height="720"></video>
<script type="module">
const compat = (window.compat = {
  statuses: [], messages: [], runtimeMessages: [], errors: [], tracks: [], wire: [], frameCallbacks: 0, connectError: null, connected: false,
});
// Transparent wire recorder.
const realFetch = window.fetch.bind(window);
window.fetch = async (input, init) => {
  const url = new URL(typeof input === 'string' ? input : input.url);
  try {
    const res = await realFetch(input, init);
    compat.wire.push({ method: (init && init.method) || 'GET', path: url.pathname, status: res.status });
    return res;
  } catch (e) {
    compat.wire.push({ method: (init && init.method) || 'GET', path: url.pathname, status: 'network error: ' + String(e) });
    throw e;
  }
};

const { Reactor } = await import('/sdk.js');
const video = document.getElementById('v');
const reactor = new Reactor({ modelName: 'pattern', local: true, apiUrl: ${JSON.stringify(runtimeUrl)} });
window.reactor = reactor;
reactor.on('statusChanged', (s) => compat.statuses.push(s));
reactor.on('message', (m) => compat.messages.push(m));
reactor.on('runtimeMessage', (m) => compat.runtimeMessages.push(m));
reactor.on('error', (e) => compat.errors.push(e));
reactor.on('trackReceived', (name, track) => {
  compat.tracks.push({ name, kind: track.kind });
  if (name === 'main_video') {
    video.srcObject = new MediaStream([track]);
    video.play().catch((e) => compat.errors.push({ code: 'PLAY', message: String(e) }));
    const onFrame = () => { compat.frameCallbacks++; video.requestVideoFrameCallback(onFrame); };
    video.requestVideoFrameCallback(onFrame);
  }
});

window.videoInfo = () => ({
  width: video.videoWidth,
  height: video.videoHeight,
  totalVideoFrames: video.getVideoPlaybackQuality().totalVideoFrames,
  frameCallbacks: compat.frameCallbacks,
});
window.samplePixel = (x, y) => {
  if (!video.videoWidth) return null;
  const canvas = document.createElement('canvas');
  canvas.width = video.videoWidth;
  canvas.height = video.videoHeight;
  const ctx = canvas.getContext('2d', { willReadFrequently: true });
  ctx.drawImage(video, 0, 0);
  const [r, g, b] = ctx.getImageData(x, y, 1, 1).data;
  return { r, g, b };
};

reactor.connect().then(
  () => { compat.connected = true; },
  (e) => { compat.connectError = String(e && e.stack || e); },
);
</script>`;
}

interface Rgb {
  r: number;
  g: number;
  b: number;
}

interface CompatState {
  statuses: string[];
  messages: { type: string; data?: unknown }[];
  runtimeMessages: { type: string; data?: unknown }[];
  errors: unknown[];
  tracks: { name: string; kind: string }[];
  wire: { method: string; path: string; status: number | string }[];
  connectError: string | null;
  connected: boolean;
}

function near(actual: Rgb | null, expected: Rgb, tolerance: number): boolean {
  return (
    actual !== null &&
    Math.abs(actual.r - expected.r) <= tolerance &&
    Math.abs(actual.g - expected.g) <= tolerance &&
    Math.abs(actual.b - expected.b) <= tolerance
  );
}

function listen(server: Server, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve((server.address() as AddressInfo).port));
  });
}

describe('@reactor-team/js-sdk@2.9.0 in Chromium against the runtime in local mode', () => {
  let net: TestNetwork | undefined;
  let runtime: Runtime | undefined;
  let pageServer: Server | undefined;
  let chrome: LaunchedChromium | undefined;
  let page: Page;
  let pageOrigin: string;
  const consoleLines: string[] = [];
  const pageErrors: string[] = [];

  let lastPatchSample: Rgb | null = null;

  const state = (): Promise<CompatState> => page.evaluate('window.compat') as Promise<CompatState>;
  const diagnostics = async (): Promise<string> =>
    JSON.stringify(
      { compat: await state().catch((e: unknown) => String(e)), lastPatchSample, console: consoleLines.slice(-40), pageErrors },
      null,
      1,
    );
  /** A check that samples the patch centre from the <video> through a canvas. */
  const patchIs = (expected: Rgb) => async (): Promise<boolean> => {
    lastPatchSample = (await page.evaluate(`window.samplePixel(${PATCH_CENTRE.x}, ${PATCH_CENTRE.y})`)) as Rgb | null;
    return near(lastPatchSample, expected, 60);
  };

  async function waitFor(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (await check()) return;
      if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}\n${await diagnostics()}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  beforeAll(async () => {
    assertCanCreateNetworkNamespaces();
    net = await createTestNetwork();
    const host = net.hostAddress;
    runtime = await startRuntime({ model: pattern as never, port: 0, host, ice: { hostAddresses: [host] }, playground: false });
    await runtime.loaded;

    const bundle = await build({
      stdin: { contents: ENTRY, resolveDir: REPO_ROOT, loader: 'js', sourcefile: 'compat-entry.js' },
      bundle: true,
      format: 'esm',
      platform: 'browser',
      target: 'es2022',
      define: { 'process.env.NODE_ENV': '"production"' },
      write: false,
      logLevel: 'silent',
    });
    const sdkJs = bundle.outputFiles[0]!.text;
    const runtimeUrl = runtime.url;

    pageServer = createServer((req, res) => {
      if (req.url === '/sdk.js') res.writeHead(200, { 'content-type': 'text/javascript; charset=utf-8' }).end(sdkJs);
      else if (req.url === '/') res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(pageHtml(runtimeUrl));
      else if (req.url === '/favicon.ico')
        res.writeHead(204).end(); // keep the console free of unrelated 404s
      else res.writeHead(404).end();
    });
    const port = await listen(pageServer, host);
    pageOrigin = `http://${host}:${port}`;
    expect(pageOrigin).not.toBe(new URL(runtimeUrl).origin);

    chrome = await launchChromiumInNamespace(net, { secureOrigins: [pageOrigin] });
    page = await chrome.newPage(); // grants camera/mic: without it Chromium gathers no candidates here
    page.on('console', (m) => {
      if (m.type() !== 'debug') consoleLines.push(`[${m.type()}] ${m.text()} (${m.location().url})`);
    });
    page.on('pageerror', (e) => pageErrors.push(String(e.stack ?? e)));
  });

  afterAll(async () => {
    await chrome?.close().catch(() => {});
    await new Promise<void>((r) => (pageServer ? pageServer.close(() => r()) : r()));
    await runtime?.close();
    await net?.close();
  });

  it('connects, plays main_video, exchanges messages and commands, and stops the session', { timeout: 150_000 }, async () => {
    await page.goto(`${pageOrigin}/`);

    await waitFor(
      async () => {
        const s = await state();
        return s.statuses.includes('ready') || s.connectError !== null || s.errors.length > 0;
      },
      45_000,
      'status ready',
    );
    let s = await state();
    expect(s.connectError, await diagnostics()).toBeNull();
    expect(s.errors, await diagnostics()).toEqual([]);
    expect(s.statuses).toEqual(['connecting', 'waiting', 'ready']);
    expect(s.tracks).toEqual(
      expect.arrayContaining([
        { name: 'main_video', kind: 'video' },
        { name: 'tone', kind: 'audio' },
      ]),
    );

    // Every HTTP call went through CORS and got the status the SDK requires.
    const calls = s.wire.map((c) => `${c.method} ${c.path.replace(/\/sessions\/[^/]+\//, '/sessions/{sid}/')} ${c.status}`);
    expect(calls.slice(0, 3)).toEqual([
      'POST /start_session 200',
      'GET /sessions/{sid}/transport/webrtc/ice_servers 200',
      'POST /sessions/{sid}/transport/webrtc/sdp_params 202',
    ]);
    expect(calls.at(-1)).toBe('GET /sessions/{sid}/transport/webrtc/sdp_params 200');

    // Decoded frames, at the model's size.
    await waitFor(
      async () => {
        const info = (await page.evaluate('window.videoInfo()')) as { totalVideoFrames: number; frameCallbacks: number };
        return info.totalVideoFrames > 10 && info.frameCallbacks > 10;
      },
      30_000,
      'decoded video frames',
    );
    const info = (await page.evaluate('window.videoInfo()')) as { width: number; height: number };
    expect(info).toMatchObject({ width: 1280, height: 720 });

    // #e01010 after VP8/H.264 and YUV->RGB; colour-matrix differences stay well inside the slack.
    await waitFor(patchIs({ r: 0xe0, g: 0x10, b: 0x10 }), 30_000, 'the red patch');

    await waitFor(async () => (await state()).messages.some((m) => m.type === 'welcome'), 15_000, 'the welcome message');
    s = await state();
    expect(s.messages.find((m) => m.type === 'welcome')?.data).toMatchObject({ model: 'pattern' });

    await page.evaluate(`window.reactor.sendCommand('set_color', { color: '#00ff00' })`);
    await waitFor(async () => (await state()).messages.some((m) => m.type === 'color_changed'), 15_000, 'color_changed');
    s = await state();
    expect(s.messages.find((m) => m.type === 'color_changed')).toEqual({ type: 'color_changed', data: { color: '#00ff00' } });
    expect(s.runtimeMessages.filter((m) => m.type === 'command_failed')).toEqual([]);
    await waitFor(patchIs({ r: 0x00, g: 0xff, b: 0x00 }), 30_000, 'the green patch');

    // Non-recoverable disconnect: POST /stop_session, and the runtime has no session left.
    await page.evaluate('window.reactor.disconnect()');
    s = await state();
    expect(s.statuses.at(-1)).toBe('disconnected');
    expect(s.wire.at(-1)).toEqual({ method: 'POST', path: '/stop_session', status: 200 });
    await waitFor(async () => (await fetch(`${runtime!.url}/session`)).status === 404, 10_000, 'GET /session to answer 404');
    expect(runtime!.sessions.current).toBeUndefined();

    // Nothing the SDK logged as an error or warning.
    expect(pageErrors).toEqual([]);
    expect(consoleLines.filter((l) => l.startsWith('[error]') || l.startsWith('[warning]'))).toEqual([]);
  });
});
