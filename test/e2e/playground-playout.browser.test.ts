/**
 * The playground's Playout box (Stats panel), in a real Chromium in a network namespace
 * (test/support/netns.ts), against real runtimes on the namespace's host address:
 *
 *  - the `diffuse` example (a step model, `fps: 'adaptive'`, ~60 ms of simulated compute a frame,
 *    ±20 %): the box shows the adaptive rate and, under it, the production estimate from
 *    `media_stats` ("adaptive · model 16.4 fps"), both near the rate the model makes frames, in
 *    full (not cut off); after `set_ms_per_frame` (sent through the playground's generated form)
 *    they follow the slower model down;
 *  - a fixed-rate model (15 fps, no `fps` on its track): the box shows "15 fps" and "fixed".
 *
 * Bounds come from what the models do, not from timings: diffuse cannot produce faster than its
 * shortest compute per frame (48 ms → 20.8 fps) and, on a loaded 2-core machine, may take longer
 * than its longest (72 ms → 13.9 fps) — so the lower bounds allow half that rate; playout stays
 * within the pacer's correction of the estimate (−25 % … +50 %) and under the declared ceiling.
 *
 * Screenshots of both at desktop (1280×800) and phone (375×812) widths go to .tmp/playout-shots/.
 */

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import diffuse, { FPS as DIFFUSE_MAX_FPS } from '../../models/examples/diffuse/index.ts';
import { defineModel, startRuntime, type Runtime } from '../../runtime/index.ts';
import { createLogger } from '../../server-kit/log.ts';
import { launchChromiumInNamespace, recordPageLog, type LaunchedChromium } from '../support/chromium.ts';
import { createTestNetwork, type TestNetwork } from '../support/netns.ts';
import { pollUntil } from '../support/poll.ts';

const TEST_TIMEOUT = 120_000;
const SHOTS = join(process.cwd(), '.tmp', 'playout-shots');
const VIEWPORTS = { desktop: { width: 1280, height: 800 }, phone: { width: 375, height: 812 } } as const;

/** diffuse's compute per frame is its ms_per_frame setting ±20 % (models/examples/diffuse). */
const productionBounds = (msPerFrame: number): { min: number; max: number } => ({
  // Never faster than its quickest compute (+10 % for the estimate's rounding and timer slack).
  max: (1000 / (0.8 * msPerFrame)) * 1.1,
  // A loaded machine may stretch a step (timers late, the encoder queued): allow half the slowest.
  min: 1000 / (1.2 * msPerFrame) / 2,
});

const FIXED_FPS = 15;
const fixedModel = defineModel({
  name: 'fixed-rate',
  fps: FIXED_FPS,
  tracks: [{ name: 'main_video', kind: 'video', direction: 'recvonly', width: 320, height: 180 }],
  async run(session) {
    const frame = { width: 320, height: 180, format: 'i420' as const, data: new Uint8Array(320 * 180 * 1.5).fill(90) };
    for await (const _ of session.ticks()) await session.emit('main_video', frame);
  },
});

interface Playout {
  /** What the box shows (its text, for messages). */
  readonly text: string;
  readonly mode: string;
  readonly fps: number;
  readonly production?: number;
}

/** The box's one line for the single video track, from its data-* attributes. */
async function readPlayout(page: Page): Promise<Playout | undefined> {
  return page.evaluate(() => {
    const lines = [...document.querySelectorAll<HTMLElement>('#stats [data-stat="playout"] .playout-line')];
    if (lines.length !== 1) return undefined;
    const line = lines[0]!;
    const production = line.dataset['productionFps'];
    return {
      text: (line.textContent ?? '').trim(),
      mode: line.dataset['mode'] ?? '',
      fps: Number(line.dataset['fps']),
      ...(production === undefined ? {} : { production: Number(production) }),
    };
  });
}

let net: TestNetwork | undefined;
let chrome: LaunchedChromium | undefined;
let adaptive: Runtime | undefined;
let fixed: Runtime | undefined;

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  net = await createTestNetwork();
  const serve = (model: unknown, name: string): Promise<Runtime> =>
    startRuntime({
      model: model as never,
      port: 0,
      host: net!.hostAddress,
      ice: { hostAddresses: [net!.hostAddress] },
      logger: createLogger({ test: name }, 'error'),
    });
  adaptive = await serve(diffuse, 'playout-adaptive');
  fixed = await serve(fixedModel, 'playout-fixed');
  chrome = await launchChromiumInNamespace(net, { secureOrigins: [adaptive.url, fixed.url] });
}, 90_000);

afterAll(async () => {
  await chrome?.close().catch(() => {});
  await adaptive?.close().catch(() => {});
  await fixed?.close().catch(() => {});
  await net?.close();
}, 60_000);

/** Opens the playground of `runtime`, connects, and returns the page with helpers. */
async function connectedPlayground(runtime: Runtime, viewport: { width: number; height: number }) {
  const page: Page = await chrome!.newPage({ viewport });
  const consoleLines = recordPageLog(page);
  const diagnostics = async (): Promise<string> => {
    const ui = await page
      .evaluate(() => ({
        status: document.querySelector('#status')?.getAttribute('data-status'),
        stats: [...document.querySelectorAll('#stats [data-stat]')].map((n) => `${n.getAttribute('data-stat')}=${n.textContent}`),
      }))
      .catch((error: unknown) => ({ error: String(error) }));
    return `\n--- page ---\n${JSON.stringify(ui)}\n--- console ---\n${consoleLines.slice(-30).join('\n')}`;
  };
  const until = <T>(what: string, probe: () => Promise<T | undefined | null | false>, timeoutMs = 30_000): Promise<T> =>
    pollUntil(what, probe, { timeoutMs, diagnostics, intervalMs: 250 });
  await page.goto(`${runtime.url}/`);
  await until('the connect button', async () => page.isEnabled('#connect'));
  await page.click('#connect');
  await until('status ready', async () => (await page.getAttribute('#status', 'data-status')) === 'ready', 40_000);
  /**
   * The Playout box's readings once `accept` has held for 5 s on end — at least two media_stats
   * reports (they come every 2 s) — each distinct text once.
   */
  const settledPlayout = async (what: string, accept: (p: Playout) => boolean): Promise<Playout[]> => {
    let seen: Playout[] = [];
    let since: number | undefined;
    await until(
      what,
      async () => {
        const parsed = await readPlayout(page);
        if (!parsed || !accept(parsed)) {
          seen = [];
          since = undefined;
          return false;
        }
        since ??= Date.now();
        if (seen.at(-1)?.text !== parsed.text) seen.push(parsed);
        return Date.now() - since >= 5_000;
      },
      60_000,
    );
    return seen;
  };
  return { page, until, settledPlayout, diagnostics };
}

/**
 * Whether the Playout box shows its whole text (the rate, and under it how it is paced — the
 * production estimate for an adaptive track) inside the Stats panel, and how wide the page is.
 */
async function layoutOf(page: Page): Promise<{ clipped: boolean; inside: boolean; detail: string; pageWidth: number }> {
  return page.evaluate(() => {
    const value = document.querySelector<HTMLElement>('#stats [data-stat="playout"]')!;
    const detail = value.querySelector<HTMLElement>('.playout-detail');
    const panel = document.querySelector<HTMLElement>('#stats')!.getBoundingClientRect();
    const box = value.getBoundingClientRect();
    const text = detail?.textContent ?? '';
    return {
      clipped:
        value.scrollWidth > value.clientWidth + 1 ||
        value.scrollHeight > value.clientHeight + 1 ||
        (detail !== null && detail.getBoundingClientRect().right > box.right + 1),
      inside: box.left >= panel.left - 1 && box.right <= panel.right + 1,
      detail: /^adaptive · model \d+(\.\d)? fps$/.test(text) ? 'adaptive' : text,
      pageWidth: document.documentElement.scrollWidth,
    };
  });
}

async function shoot(page: Page, name: string): Promise<void> {
  // From the top (the header is sticky: scrolled, a full-page shot shows it mid-page), then the
  // Stats panel alone (on a phone it is below the players and the logs).
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
  await page.screenshot({ path: join(SHOTS, `${name}-top.png`) });
  await page.locator('#stats').screenshot({ path: join(SHOTS, `${name}-stats.png`) });
}

describe("the playground's Playout box", () => {
  it(
    'shows an adaptive rate near the rate diffuse makes frames, and follows it when the model slows',
    async () => {
      const { page, settledPlayout, diagnostics } = await connectedPlayground(adaptive!, VIEWPORTS.desktop);
      const normal = productionBounds(60);
      const inBounds =
        (bounds: { min: number; max: number }) =>
        (p: Playout): boolean =>
          p.mode === 'adaptive' && p.production !== undefined && p.production >= bounds.min && p.production <= bounds.max;
      const readings = await settledPlayout('an adaptive playout with a production estimate near 60 ms a frame', inBounds(normal));
      for (const p of readings) {
        const context = `${p.text}${await diagnostics()}`;
        // Playout follows the estimate within the pacer's correction (−25 % … +50 %), under the ceiling.
        expect(p.fps, context).toBeLessThanOrEqual(DIFFUSE_MAX_FPS);
        expect(p.fps, context).toBeGreaterThanOrEqual(p.production! * 0.75 - 0.1);
        expect(p.fps, context).toBeLessThanOrEqual(p.production! * 1.5 + 0.1);
      }
      await shoot(page, 'adaptive-desktop');
      expect(await layoutOf(page)).toEqual({ clipped: false, inside: true, detail: 'adaptive', pageWidth: VIEWPORTS.desktop.width });

      // Slower compute, sent through the form the playground built from /schema: the rate follows.
      const slow = productionBounds(150);
      await page.fill('form[data-command="set_ms_per_frame"] [name="value"]', '150');
      await page.click('form[data-command="set_ms_per_frame"] button[type="submit"]');
      const slower = await settledPlayout('the playout to follow the model down to ~150 ms a frame', inBounds(slow));
      // The slowest possible at 60 ms a frame is faster than the fastest at 150: the two ranges do not meet.
      expect(slow.max).toBeLessThan(1000 / (1.2 * 60));
      for (const p of slower) expect(p.fps, p.text).toBeLessThanOrEqual(p.production! * 1.5 + 0.1);
      await page.close();
    },
    TEST_TIMEOUT,
  );

  it(
    'shows the adaptive rate readably on a phone',
    async () => {
      const { page, settledPlayout } = await connectedPlayground(adaptive!, VIEWPORTS.phone);
      await settledPlayout('an adaptive playout on the phone layout', (p) => p.mode === 'adaptive' && p.production !== undefined);
      await shoot(page, 'adaptive-phone');
      const fits = await layoutOf(page);
      expect(fits).toEqual({ clipped: false, inside: true, detail: 'adaptive', pageWidth: VIEWPORTS.phone.width });
      // The header still names the model (it once squeezed the name to nothing on a phone).
      const name = await page.evaluate(() => {
        const h1 = document.querySelector<HTMLElement>('#model-name')!;
        return { text: h1.textContent, shown: h1.clientWidth > 0 && h1.scrollWidth <= h1.clientWidth };
      });
      expect(name).toEqual({ text: 'diffuse', shown: true });
      await page.close();
    },
    TEST_TIMEOUT,
  );

  it(
    'shows the declared rate, marked fixed, for a model without adaptive playout',
    async () => {
      for (const [name, viewport] of Object.entries(VIEWPORTS)) {
        const { page, settledPlayout } = await connectedPlayground(fixed!, viewport);
        const readings = await settledPlayout('a fixed playout', (p) => p.mode === 'fixed');
        for (const p of readings) expect(p).toEqual({ text: `${FIXED_FPS}fpsfixed`, fps: FIXED_FPS, mode: 'fixed' });
        await shoot(page, `fixed-${name}`);
        expect(await layoutOf(page)).toEqual({ clipped: false, inside: true, detail: 'fixed', pageWidth: viewport.width });
        await page.close();
      }
    },
    TEST_TIMEOUT,
  );
});
