/**
 * The python-tint example (its inference in a Python worker) driven through the playground in a
 * real Chromium, as a model author would try it: the page is built from the runtime's /schema (a
 * set_tint form from the command declared in model.py), the generative pattern plays before any
 * webcam, Chromium's fake webcam is published and tinted in numpy, and a white tint at full
 * strength turns the picture grey.
 *
 * Chromium runs in a throwaway network namespace (test/support/netns.ts), as in
 * playground.browser.test.ts, whose helpers this file follows.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import { createLogger } from '../../server-kit/log.ts';
import pythonTint, { HEIGHT, WIDTH } from '../../models/examples/python-tint/index.ts';
import { launchChromiumInNamespace, recordPageLog, type LaunchedChromium } from '../support/chromium.ts';
import { createTestNetwork, type TestNetwork } from '../support/netns.ts';
import { pollUntil } from '../support/poll.ts';

const TEST_TIMEOUT = 120_000;

interface FrameStats {
  r: number;
  g: number;
  b: number;
  luma: number;
  width: number;
  height: number;
}

let net: TestNetwork | undefined;
let chrome: LaunchedChromium | undefined;
let runtime: Runtime | undefined;
let page: Page;
let pageLog: string[] = [];

beforeAll(async () => {
  net = await createTestNetwork();
  runtime = await startRuntime({
    model: pythonTint as never,
    port: 0,
    host: net.hostAddress,
    ice: { hostAddresses: [net.hostAddress] },
    logger: createLogger({ test: 'python-tint-playground' }, 'warn'),
  });
  await runtime.loaded;
  chrome = await launchChromiumInNamespace(net, { secureOrigins: [runtime.url] });
  page = await chrome.newPage({ viewport: { width: 1440, height: 1000 } });
  pageLog = recordPageLog(page);
  await page.goto(`${runtime.url}/`);
}, 90_000);

afterAll(async () => {
  await chrome?.close().catch(() => {});
  await runtime?.close().catch(() => {});
  await pythonTint.python.close();
  await net?.close();
}, 60_000);

function until<T>(what: string, probe: () => Promise<T | undefined | null | false>, timeoutMs = 25_000): Promise<T> {
  return pollUntil(what, probe, {
    timeoutMs,
    intervalMs: 150,
    diagnostics: async () => {
      const log = await page
        .evaluate(() => [...document.querySelectorAll('#log li')].slice(0, 30).map((li) => li.textContent?.replace(/\s+/g, ' ').trim()))
        .catch(() => []);
      return `\n--- playground log ---\n${log.join('\n')}\n--- console ---\n${pageLog.slice(-40).join('\n')}`;
    },
  });
}

/** Mean colour and luma of main_video's current frame (drawn at 160×120). */
function frameStats(): Promise<FrameStats | null> {
  return page.evaluate(() => {
    const video = document.querySelector<HTMLVideoElement>('video[data-track="main_video"]');
    if (!video || video.videoWidth === 0) return null;
    const canvas = document.createElement('canvas');
    canvas.width = 160;
    canvas.height = 120;
    const ctx = canvas.getContext('2d', { willReadFrequently: true })!;
    ctx.drawImage(video, 0, 0, canvas.width, canvas.height);
    const data = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
    let r = 0;
    let g = 0;
    let b = 0;
    const n = data.length / 4;
    for (let i = 0; i < data.length; i += 4) {
      r += data[i]!;
      g += data[i + 1]!;
      b += data[i + 2]!;
    }
    const [mr, mg, mb] = [r / n, g / n, b / n];
    return {
      r: Math.round(mr),
      g: Math.round(mg),
      b: Math.round(mb),
      luma: Math.round(0.299 * mr + 0.587 * mg + 0.114 * mb),
      width: video.videoWidth,
      height: video.videoHeight,
    };
  });
}

async function submit(command: string, values: Record<string, string>): Promise<{ state: string; text: string }> {
  const form = page.locator(`form[data-command="${command}"]`);
  for (const [name, value] of Object.entries(values)) await form.locator(`[name="${name}"]`).fill(value);
  await form.locator('[data-result]').evaluate((node) => node.setAttribute('data-state', 'stale'));
  await form.locator('button[type="submit"]').click();
  return until(`a result for ${command}`, async () => {
    const state = await form.locator('[data-result]').getAttribute('data-state');
    if (!state || state === 'stale' || state === 'pending') return undefined;
    return { state, text: (await form.locator('[data-result]').textContent()) ?? '' };
  });
}

describe('the playground with python-tint (a Python worker)', () => {
  it(
    'plays the pattern, tints the published webcam in numpy, and set_tint white at full strength turns it grey',
    { timeout: TEST_TIMEOUT },
    async () => {
      await page.waitForSelector('#connect:not([disabled])', { timeout: 15_000 });
      expect(await page.textContent('#model-name')).toBe('python-tint');
      expect(await page.locator('form[data-command="set_tint"]').count()).toBe(1);
      expect(await page.locator('[data-publish="webcam"]').count()).toBe(1);

      await page.click('#connect');
      await until('status ready', async () => (await page.getAttribute('#status', 'data-status')) === 'ready', 30_000);
      // The generative pattern in the default tint (#ff8800): orange, red above blue.
      const pattern = await until('the orange pattern', async () => {
        const stats = await frameStats();
        return stats && stats.r > stats.b + 20 ? stats : undefined;
      });
      expect([pattern.width, pattern.height]).toEqual([WIDTH, HEIGHT]);

      await page.click('[data-publish="webcam"]');
      await until('input_started in the log', () => page.locator('#log li[data-kind="message"][data-type="input_started"]').count());

      const reply = await submit('set_tint', { color: '#ffffff', strength: '1' });
      expect(reply.state, reply.text).toBe('ok');
      expect(reply.text).toContain('tint_changed');
      // Every pixel its own luma: a neutral picture (Chromium's fake camera is colourful otherwise).
      const grey = await until('a grey picture', async () => {
        const stats = await frameStats();
        return stats && Math.max(stats.r, stats.g, stats.b) - Math.min(stats.r, stats.g, stats.b) < 8 ? stats : undefined;
      });
      expect(grey.luma).toBeGreaterThan(10);

      const errors = pageLog.filter((line) => line.startsWith('[pageerror]'));
      expect(errors, errors.join('\n')).toEqual([]);
    },
  );
});
