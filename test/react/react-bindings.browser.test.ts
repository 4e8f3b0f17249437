/**
 * The React bindings (`arclight/client/react`) in Chromium, on a small app built with Vite
 * (test/react/main.tsx: the provider with autoConnect under StrictMode, the hooks, the video
 * view, the webcam publisher, a command button, a message list) against a real runtime serving
 * the `echo` model. The page is served from the test network's host address; Chromium's fake
 * camera is the webcam.
 *
 * Checked: one session and one connect despite StrictMode's double effects; status `ready` in
 * the UI; the <video> plays the model's frames; the webcam reaches the model (its
 * `input_started` message, through both message hooks); the stats hook updates; the command
 * button's reply shows (and arrives as a message too); a second page's refused connect shows its
 * error; after a disconnect and a new connect the webcam is published again and the video view
 * plays the new track; unmounting the tree stops the camera and ends the session.
 */

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import echo from '../../models/examples/echo/index.ts';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import { createLogger } from '../../server-kit/log.ts';
import { launchChromiumInNamespace, recordPageLog, type LaunchedChromium } from '../support/chromium.ts';
import { createTestNetwork, type TestNetwork } from '../support/netns.ts';
import { pollUntil } from '../support/poll.ts';
import { serveStaticFiles, type StaticFileServer } from '../support/static-file-server.ts';
import { buildReactPage } from './build-page.ts';

let net: TestNetwork | undefined;
let runtime: Runtime | undefined;
let site: StaticFileServer | undefined;
let chrome: LaunchedChromium | undefined;
let pageDir: string | undefined;

beforeAll(async () => {
  pageDir = await mkdtemp(join(tmpdir(), 'arclight-react-page-'));
  await buildReactPage(pageDir);
  net = await createTestNetwork();
  runtime = await startRuntime({
    model: echo as never,
    port: 0,
    host: net.hostAddress,
    ice: { hostAddresses: [net.hostAddress] },
    logger: createLogger({ test: 'react-bindings' }, 'warn'),
  });
  site = await serveStaticFiles(pageDir, net.hostAddress);
  // Both origins: the page's for getUserMedia, the runtime's for what the client asks of it.
  chrome = await launchChromiumInNamespace(net, { secureOrigins: [site.url, runtime.url] });
}, 90_000);

afterAll(async () => {
  await chrome?.close().catch(() => {});
  await site?.close();
  await runtime?.close().catch(() => {});
  await net?.close();
  if (pageDir) await rm(pageDir, { recursive: true, force: true });
}, 60_000);

interface VideoState {
  width: number;
  time: number;
  frames: number;
}

/** The output <video>'s size, playback time and decoded frames (null before it exists). */
function outputVideo(page: Page): Promise<VideoState | null> {
  return page.evaluate(() => {
    const video = document.querySelector<HTMLVideoElement>('video#output');
    if (!video) return null;
    return { width: video.videoWidth, time: video.currentTime, frames: video.getVideoPlaybackQuality().totalVideoFrames };
  });
}

it('drives a model from React: provider, hooks, video view, webcam publisher, unmount', async () => {
  const page = await chrome!.newPage();
  const log = recordPageLog(page);
  // Every camera stream the page opens, to check that unmounting stopped them all.
  await page.addInitScript(() => {
    const opened: MediaStream[] = [];
    (window as unknown as { __cameras: MediaStream[] }).__cameras = opened;
    const original = navigator.mediaDevices.getUserMedia.bind(navigator.mediaDevices);
    navigator.mediaDevices.getUserMedia = async (constraints) => {
      const stream = await original(constraints);
      opened.push(stream);
      return stream;
    };
  });
  const sessionStarts: string[] = [];
  page.on('request', (request) => {
    if (request.method() === 'POST' && request.url().endsWith('/start_session')) sessionStarts.push(request.url());
  });
  const diagnostics = async (): Promise<string> => {
    const ui = await page.evaluate(() => document.querySelector('#root')?.textContent).catch((e: unknown) => String(e));
    return `\n--- page ---\n${ui}\n--- log (last 40) ---\n${log.slice(-40).join('\n')}`;
  };
  const until = <T>(what: string, probe: () => Promise<T | undefined | null | false>, timeoutMs = 20_000): Promise<T> =>
    pollUntil(what, probe, { timeoutMs, intervalMs: 150, diagnostics });

  await page.goto(`${site!.url}/?runtime=${encodeURIComponent(runtime!.url)}`);

  // The provider connects by itself, once, although StrictMode ran its effect twice.
  await until('status ready', async () => (await page.getAttribute('#status', 'data-status')) === 'ready');
  expect(sessionStarts).toHaveLength(1);
  expect(await page.textContent('#error')).toBe('');
  const session = runtime!.sessions.current;
  expect(session).toBeDefined();

  // The video view plays the model's frames.
  const first = await until('the output video playing', async () => {
    const state = await outputVideo(page);
    return state && state.width > 0 && state.frames > 0 ? state : null;
  });
  expect(first.width).toBe(640);
  await until('the output video advancing', async () => {
    const state = await outputVideo(page);
    return state && state.time > first.time + 0.5 && state.frames > first.frames + 5;
  });

  // The webcam publisher's frames reach the model: it announces the input's size, which both
  // message hooks show.
  const size = await until('input_started in the page', async () => {
    const text = await page.textContent('#input-size');
    return text?.startsWith('{') ? (JSON.parse(text) as { width: number; height: number }) : null;
  });
  expect(size).toEqual({ width: 320, height: 240 });
  expect(Number(await page.getAttribute('#input-size', 'data-heard'))).toBeGreaterThanOrEqual(1);
  expect(await page.locator('#messages li[data-type="input_started"]').count()).toBeGreaterThanOrEqual(1);
  // ...and the preview shows the camera.
  await until('the preview playing', () =>
    page.evaluate(() => (document.querySelector<HTMLVideoElement>('video#preview')?.videoWidth ?? 0) > 0),
  );

  // The stats hook renders newer samples as they come.
  const framesBefore = Number(await page.getAttribute('#stats', 'data-frames'));
  await until('the stats hook updating', async () => Number(await page.getAttribute('#stats', 'data-frames')) > framesBefore + 10);

  // A command round trip: the reply shows next to its button and in the message list.
  await page.click('#dim');
  const reply = await until('the command reply', async () => {
    const text = await page.textContent('#reply');
    return text ? text : null;
  });
  expect(JSON.parse(reply)).toEqual({ type: 'brightness_changed', data: { brightness: 0.5 } });
  await until(
    'the reply in the message list',
    async () => (await page.locator('#messages li[data-type="brightness_changed"]').count()) === 1,
  );

  // A second app on the same runtime is refused while the session is live: the error shows.
  const other = await chrome!.newPage();
  try {
    await other.goto(`${site!.url}/?runtime=${encodeURIComponent(runtime!.url)}`);
    await until(
      'the second page refused',
      async () =>
        (await other.textContent('#error'))?.startsWith('session_conflict') &&
        (await other.getAttribute('#status', 'data-status')) === 'disconnected',
    );
  } finally {
    await other.close();
  }
  expect(runtime!.sessions.current).toBe(session);

  // A new connect (a new session) gets the webcam published again: the model announces it anew,
  // and the message hooks start the new session's list empty.
  await page.click('#disconnect');
  await until('status disconnected', async () => (await page.getAttribute('#status', 'data-status')) === 'disconnected');
  await until('the first session ended', async () => session!.ended);
  await page.click('#connect');
  await until('status ready again', async () => (await page.getAttribute('#status', 'data-status')) === 'ready');
  const second = runtime!.sessions.current;
  expect(second).toBeDefined();
  expect(second).not.toBe(session);
  await until('input_started heard again', async () => Number(await page.getAttribute('#input-size', 'data-heard')) >= 2);
  expect(await page.locator('#messages li[data-type="brightness_changed"]').count()).toBe(0);
  expect(sessionStarts).toHaveLength(2);
  // The video view shows the new connection's track (the placeholder stood in meanwhile).
  await until('the output video playing again', async () => {
    const state = await outputVideo(page);
    return state && state.width > 0 && state.frames > 5;
  });

  // Unmounting the tree stops the camera and ends the session.
  await page.click('#unmount');
  await until('the session ended', async () => second!.ended && runtime!.sessions.current === undefined);
  const cameras = await page.evaluate(() =>
    (window as unknown as { __cameras: MediaStream[] }).__cameras.map((stream) => stream.getTracks().map((track) => track.readyState)),
  );
  expect(cameras.length).toBeGreaterThanOrEqual(1);
  expect(cameras.flat().every((state) => state === 'ended')).toBe(true);
  expect(sessionStarts).toHaveLength(2);
  expect(log.filter((line) => line.startsWith('[pageerror]'))).toEqual([]);
}, 60_000);
