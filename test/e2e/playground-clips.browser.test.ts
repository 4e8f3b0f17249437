/**
 * The playground's Clips panel in a real Chromium against real runtimes (pattern model), set up as
 * the other playground tests are: Chromium inside a throwaway network namespace, the runtimes on
 * its host-side address (see test/support/netns.ts).
 *
 *  - A runtime with `recording: {}`: Connect, ~6 s of video, "Clip last 10 s" → the page shows
 *    the clip's duration and a link to its playlist, which (fetched from here) is an HLS playlist
 *    with an init segment; "Download" → the page reports the saved file's size, and the file
 *    Chromium saved (`arclight-clip.mp4`: downloadClipAsFile's default name, since the playground
 *    passes none) has that size and opens with an MP4 `ftyp` box.
 *  - A runtime without recording: "Clip last 10 s" shows `recording_error` in the page's banner
 *    and log, and Download stays disabled.
 */

import { readFile } from 'node:fs/promises';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pattern from '../../models/examples/pattern/index.ts';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import { createLogger } from '../../server-kit/log.ts';
import { launchChromiumInNamespace, recordPageLog, type LaunchedChromium } from '../support/chromium.ts';
import { createTestNetwork, type TestNetwork } from '../support/netns.ts';
import { waitUntil } from '../support/video-probe.ts';

let net: TestNetwork | undefined;
let chrome: LaunchedChromium | undefined;
let recorded: Runtime | undefined;
let unrecorded: Runtime | undefined;

beforeAll(async () => {
  net = await createTestNetwork();
  const logger = createLogger({ test: 'playground-clips' }, 'warn');
  const common = { model: pattern as never, port: 0, host: net.hostAddress, ice: { hostAddresses: [net.hostAddress] }, logger };
  // startRuntime() records nothing unless asked; `arclight serve` and `arclight stack` ask.
  [recorded, unrecorded] = await Promise.all([startRuntime({ ...common, recording: {} }), startRuntime(common)]);
  chrome = await launchChromiumInNamespace(net, { secureOrigins: [recorded.url, unrecorded.url] });
}, 90_000);

afterAll(async () => {
  await chrome?.close().catch(() => {});
  await recorded?.close().catch(() => {});
  await unrecorded?.close().catch(() => {});
  await net?.close();
}, 60_000);

interface Harness {
  readonly page: Page;
  readonly lines: string[];
}

async function openPlayground(runtime: Runtime): Promise<Harness> {
  const page = await chrome!.newPage({ viewport: { width: 1440, height: 1000 } });
  const lines = recordPageLog(page);
  await page.goto(`${runtime.url}/`);
  return { page, lines };
}

/** Polls the page; on timeout, fails with its status line, banner, log panel and console. */
async function until(h: Harness, what: string, probe: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  try {
    await waitUntil(probe, timeoutMs, what);
  } catch (error) {
    const ui = await h.page
      .evaluate(() => ({
        status: document.querySelector('#status')?.textContent,
        detail: document.querySelector('#status-detail')?.textContent,
        clip: document.querySelector('#clip-info')?.textContent,
        progress: document.querySelector('#clip-progress')?.textContent,
        log: [...document.querySelectorAll('#log li')].slice(0, 30).map((li) => li.textContent?.replace(/\s+/g, ' ').trim()),
      }))
      .catch((e: unknown) => ({ error: String(e) }));
    throw new Error(
      `${(error as Error).message}\n--- page ---\n${JSON.stringify(ui, null, 1)}\n--- console ---\n${h.lines.slice(-40).join('\n')}`,
    );
  }
}

function decodedFrames(page: Page): Promise<number> {
  return page.evaluate(() => {
    const video = document.querySelector<HTMLVideoElement>('video[data-track="main_video"]');
    return video && video.videoWidth > 0 ? video.getVideoPlaybackQuality().totalVideoFrames : 0;
  });
}

async function connect(h: Harness): Promise<void> {
  await h.page.waitForSelector('#connect:not([disabled])', { timeout: 15_000 });
  // Nothing to clip before a session exists.
  expect(await h.page.isDisabled('#clip')).toBe(true);
  expect(await h.page.isDisabled('#download')).toBe(true);
  await h.page.click('#connect');
  await until(h, 'status ready', async () => (await h.page.getAttribute('#status', 'data-status')) === 'ready', 30_000);
  await until(h, 'decoded frames', async () => (await decodedFrames(h.page)) > 0, 10_000);
}

async function disconnect(h: Harness): Promise<void> {
  await h.page.click('#disconnect');
  await until(h, 'status disconnected', async () => (await h.page.getAttribute('#status', 'data-status')) === 'disconnected');
  expect(await h.page.isDisabled('#clip')).toBe(true);
  expect(await h.page.isDisabled('#download')).toBe(true);
}

const pageErrors = (h: Harness): string[] => h.lines.filter((line) => line.startsWith('[pageerror]'));

describe('playground clips', () => {
  it('clips the last 10 s, links its playlist, and downloads it as one MP4', { timeout: 60_000 }, async () => {
    const h = await openPlayground(recorded!);
    const { page } = h;
    await connect(h);
    expect(await page.isEnabled('#clip')).toBe(true);
    expect(await page.isDisabled('#download')).toBe(true); // no clip yet
    await page.waitForTimeout(6_000); // something worth clipping: over one ~4 s segment

    await page.click('#clip');
    await until(h, 'the clip', async () => (await page.getAttribute('#clip-info', 'data-duration')) !== null);
    const duration = Number(await page.getAttribute('#clip-info', 'data-duration'));
    expect(duration).toBeGreaterThan(0);
    expect(duration).toBeLessThan(20); // at most everything recorded in this short session
    expect(await page.textContent('#clip-info')).toContain(`${duration.toFixed(1)} s`);
    const playlistUrl = (await page.getAttribute('#clip-link', 'href'))!;
    expect(playlistUrl.startsWith(`${recorded!.url}/sessions/`)).toBe(true);

    // The link is the real thing: an HLS playlist with an init segment, whose durations add up.
    const response = await fetch(playlistUrl);
    expect(response.status).toBe(200);
    const playlist = await response.text();
    expect(playlist.startsWith('#EXTM3U')).toBe(true);
    expect(playlist).toContain('#EXT-X-MAP:URI=');
    const extinf = [...playlist.matchAll(/#EXTINF:([\d.]+),/g)].reduce((sum, m) => sum + Number(m[1]), 0);
    expect(extinf).toBeCloseTo(duration, 1);

    // Download: the page shows progress then the size; Chromium saves the file the library joined.
    const [download] = await Promise.all([page.waitForEvent('download', { timeout: 20_000 }), page.click('#download')]);
    await until(h, 'the download to finish', async () => (await page.getAttribute('#clip-progress', 'data-state')) === 'done');
    const bytes = Number(await page.getAttribute('#clip-progress', 'data-bytes'));
    expect(bytes).toBeGreaterThan(0);
    expect(await page.textContent('#clip-progress')).toContain('arclight-clip.mp4');
    expect(download.suggestedFilename()).toBe('arclight-clip.mp4');
    const file = await readFile((await download.path())!);
    expect(file.byteLength).toBe(bytes);
    expect(file.subarray(4, 8).toString('latin1')).toBe('ftyp');
    // Chromium plays the file itself: the recording of this H.264 viewer's session is the live
    // stream's own frames, `avc3` with SPS/PPS in band (track-recorder.ts).
    const played = await page.evaluate(async (base64) => {
      const bytes = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
      const video = document.createElement('video');
      video.muted = true;
      video.src = URL.createObjectURL(new Blob([bytes], { type: 'video/mp4' }));
      document.body.append(video);
      await new Promise((resolve, reject) => {
        video.onloadeddata = resolve;
        video.onerror = () => reject(new Error(`video error ${video.error?.code}: ${video.error?.message}`));
      });
      await video.play();
      await new Promise((resolve) => video.requestVideoFrameCallback(resolve));
      const result = { width: video.videoWidth, duration: video.duration };
      video.remove();
      return result;
    }, file.toString('base64'));
    expect(played.width).toBeGreaterThan(0);
    expect(played.duration).toBeCloseTo(duration, 0);
    expect(await page.isEnabled('#clip')).toBe(true);
    expect(await page.isEnabled('#download')).toBe(true);
    expect(await page.isHidden('#status-detail')).toBe(true);

    await disconnect(h);
    const errors = pageErrors(h);
    expect(errors, errors.join('\n')).toEqual([]);
    await page.close();
  });

  it('shows recording_error when the runtime does not record', { timeout: 40_000 }, async () => {
    const h = await openPlayground(unrecorded!);
    const { page } = h;
    await connect(h);

    await page.click('#clip');
    await until(
      h,
      'the error banner',
      async () =>
        (await page.isVisible('#status-detail')) && ((await page.textContent('#status-detail')) ?? '').includes('recording_error'),
    );
    expect(await page.textContent('#status-detail')).toContain('Recording is off');
    expect(await page.locator('#log li[data-kind="error"][data-type="recording_error"]').count()).toBe(1);
    expect(await page.isHidden('#clip-info')).toBe(true);
    expect(await page.isDisabled('#download')).toBe(true);
    await until(h, 'Clip enabled again', () => page.isEnabled('#clip'));
    expect(await page.getAttribute('#status', 'data-status')).toBe('ready'); // the session goes on

    await disconnect(h);
    const errors = pageErrors(h);
    expect(errors, errors.join('\n')).toEqual([]);
    await page.close();
  });
});
