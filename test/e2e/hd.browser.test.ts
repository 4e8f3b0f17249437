/**
 * 1080p and 1440p H.264 decoded in Chromium (issue 3, media engine).
 *
 * Per size, a runtime serving the `hd` fixture (test/fixtures/hd-model.ts: a 1920x1080 or
 * 2560x1440 @30 track with two solid colour patches, top-left and bottom-right, and a frame
 * stamp); Chromium in a throwaway network namespace (test/support/netns.ts) opens the runtime's
 * playground at `/` and clicks Connect. Checked: the inbound video codec is video/H264, the
 * <video> has frames of the full size (element and inbound-rtp stats), frames keep decoding, and
 * the centre of each patch has its colour.
 */

import { describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import type { Runtime } from '../../runtime/index.ts';
import { createHdModel, patchesFor } from '../fixtures/hd-model.ts';
import { browserRig } from '../support/browser-rig.ts';
import { pollUntil } from '../support/poll.ts';

const TRACK = 'main_video';

interface Rgb {
  r: number;
  g: number;
  b: number;
}

interface InboundVideo {
  codec: string | null;
  framesDecoded: number;
  frameWidth: number | null;
  frameHeight: number | null;
  decoder: string | null;
}

/** Polls `probe` until it returns a truthy value; fails with the last value and the page's console. */
function until<T>(
  page: Page,
  log: string[],
  what: string,
  probe: () => Promise<T | undefined | null | false>,
  timeoutMs = 20_000,
): Promise<T> {
  return pollUntil(what, probe, {
    timeoutMs,
    diagnostics: async () =>
      `; status ${await page.textContent('#status').catch(() => null)}\n--- console (last 40) ---\n${log.slice(-40).join('\n')}`,
  });
}

function inboundVideo(page: Page): Promise<InboundVideo | null> {
  return page.evaluate(async () => {
    const pc = (
      window as unknown as { playground: { client: { getPeerConnection(): RTCPeerConnection | undefined } } }
    ).playground.client.getPeerConnection();
    if (!pc) return null;
    const stats = [...(await pc.getStats()).values()] as Array<Record<string, unknown>>;
    const inbound = stats.find((s) => s['type'] === 'inbound-rtp' && s['kind'] === 'video');
    if (!inbound) return null;
    const num = (v: unknown): number | null => (typeof v === 'number' ? v : null);
    return {
      codec: (stats.find((s) => s['id'] === inbound['codecId'])?.['mimeType'] as string | undefined) ?? null,
      framesDecoded: num(inbound['framesDecoded']) ?? 0,
      frameWidth: num(inbound['frameWidth']),
      frameHeight: num(inbound['frameHeight']),
      decoder: (inbound['decoderImplementation'] as string | undefined) ?? null,
    };
  });
}

/** Mean colour of a 9×9 block centred on (x, y), in video pixels, of the <video>'s current frame, drawn at its natural size. */
function samplePixel(page: Page, x: number, y: number): Promise<Rgb | null> {
  return page.evaluate(
    ({ track, x, y }) => {
      const video = document.querySelector<HTMLVideoElement>(`video[data-track="${track}"]`);
      if (!video || video.videoWidth === 0) return null;
      const canvas = document.createElement('canvas');
      canvas.width = video.videoWidth;
      canvas.height = video.videoHeight;
      const ctx = canvas.getContext('2d', { willReadFrequently: true })!;
      ctx.drawImage(video, 0, 0);
      const data = ctx.getImageData(x - 4, y - 4, 9, 9).data;
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
    { track: TRACK, x, y },
  );
}

/** The runtime's count of video frames sent on the track. */
async function framesSent(runtime: Runtime): Promise<number> {
  return (await runtime.metrics.framesSent.get()).values.filter((v) => v.labels.track === TRACK).reduce((sum, v) => sum + v.value, 0);
}

const near = (actual: Rgb | null, expected: Rgb, tolerance: number): boolean =>
  actual !== null &&
  Math.abs(actual.r - expected.r) <= tolerance &&
  Math.abs(actual.g - expected.g) <= tolerance &&
  Math.abs(actual.b - expected.b) <= tolerance;

describe.each([
  { label: '1080p', WIDTH: 1920, HEIGHT: 1080 },
  { label: '1440p', WIDTH: 2560, HEIGHT: 1440 },
])('$label in Chromium', ({ WIDTH, HEIGHT }) => {
  const rig = browserRig(createHdModel(WIDTH, HEIGHT), `hd-${HEIGHT}p`);
  const PATCHES = patchesFor(WIDTH, HEIGHT);

  it(`decodes ${WIDTH}x${HEIGHT} H.264 with the right picture`, { timeout: 90_000 }, async () => {
    const page = await rig().chrome.newPage({ viewport: { width: 1440, height: 1000 } });
    const log: string[] = [];
    page.on('console', (message) => log.push(`[console.${message.type()}] ${message.text()}`));
    page.on('pageerror', (error) => log.push(`[pageerror] ${error.stack ?? error.message}`));
    try {
      await page.goto(`${rig().runtime.url}/`);
      await page.waitForSelector('#connect:not([disabled])', { timeout: 15_000 });
      expect(await page.textContent('#model-name')).toBe('hd');
      await page.click('#connect');
      await until(page, log, 'status ready', async () => (await page.getAttribute('#status', 'data-status')) === 'ready', 30_000);

      // Frames decode at the full size.
      const size = await until(page, log, `decoded frames on ${TRACK}`, () =>
        page.evaluate((track) => {
          const video = document.querySelector<HTMLVideoElement>(`video[data-track="${track}"]`);
          if (!video || video.videoWidth === 0 || video.getVideoPlaybackQuality().totalVideoFrames === 0) return null;
          return { width: video.videoWidth, height: video.videoHeight };
        }, TRACK),
      );
      expect(size).toEqual({ width: WIDTH, height: HEIGHT });

      const first = await until(page, log, 'inbound video stats', async () => {
        const s = await inboundVideo(page);
        return s && s.framesDecoded > 0 ? s : null;
      });
      expect(first.codec).toBe('video/H264');
      expect({ width: first.frameWidth, height: first.frameHeight }).toEqual({ width: WIDTH, height: HEIGHT });

      // Frames keep coming, and Chromium decodes what the runtime sends: 30 more frames, counted
      // against the frames sent meanwhile rather than asked of a rate (it was "≥ 10 fps over 3 s";
      // an HD encode on a loaded 2-core machine may not manage that, which is not what is tested).
      const sentAtFirst = await framesSent(rig().runtime);
      const later = await until(
        page,
        log,
        '30 more decoded frames',
        async () => {
          const s = await inboundVideo(page);
          return s && s.framesDecoded - first.framesDecoded >= 30 ? s : null;
        },
        60_000,
      );
      const sent = (await framesSent(rig().runtime)) - sentAtFirst;
      // The browser trails the runtime by the frames on the wire and in its decoder.
      expect(later.framesDecoded - first.framesDecoded, JSON.stringify({ first, later, sent })).toBeGreaterThanOrEqual(sent - 10);

      // The centre of each patch has its colour: the whole picture arrived, unscaled and uncropped.
      for (const patch of PATCHES) {
        const x = patch.x + patch.size / 2;
        const y = patch.y + patch.size / 2;
        let pixel: Rgb | null = null;
        await until(
          page,
          log,
          `patch colour at (${x}, ${y})`,
          async () => {
            pixel = await samplePixel(page, x, y);
            return near(pixel, patch.rgb, 40);
          },
          10_000,
        );
        expect(near(pixel, patch.rgb, 40), JSON.stringify({ x, y, pixel, expected: patch.rgb })).toBe(true);
      }
      // And the background between them is the dark grey, not a stretched patch.
      const between = await samplePixel(page, WIDTH / 2, HEIGHT / 2);
      expect(near(between, { r: 0x40, g: 0x40, b: 0x40 }, 24), JSON.stringify(between)).toBe(true);

      const errors = log.filter((line) => line.startsWith('[pageerror]'));
      expect(errors, errors.join('\n')).toEqual([]);
    } finally {
      await page
        .context()
        .close()
        .catch(() => {});
    }
  });
});
