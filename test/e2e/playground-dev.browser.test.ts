/**
 * The playground under `arclight dev` (a runtime with `dev: true`), in a real Chromium in a network
 * namespace (test/support/netns.ts), while the model is reloaded under it with
 * `runtime.reloadModel` — what the dev server does on each save:
 *
 *  - a new version with the same tracks: the page shows the reload notice, re-renders its command
 *    forms (a new command appears) keeping the value typed into a field that still exists, and
 *    stays connected to the same session;
 *  - a version whose load() throws: an error banner with the file and line, cleared by the next
 *    good version;
 *  - a version with other tracks: the session ends (`model_reloaded`) and the page connects again
 *    by itself, to a new session, the typed value still there;
 *  - the runtime restarting on the same address: the page re-reads the model and connects again.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { startRuntime, type ModelDefinition, type Runtime } from '../../runtime/index.ts';
import { createLogger } from '../../server-kit/log.ts';
import { launchChromiumInNamespace, recordPageLog, type LaunchedChromium } from '../support/chromium.ts';
import { createTestNetwork, type TestNetwork } from '../support/netns.ts';
import { pollUntil } from '../support/poll.ts';

const TEST_TIMEOUT = 120_000;

function version(tag: string, options: { width?: number; extraCommand?: boolean; failLoad?: boolean } = {}): ModelDefinition {
  const width = options.width ?? 64;
  return {
    name: 'dev-page',
    fps: 10,
    tracks: [{ name: 'main_video', kind: 'video', direction: 'recvonly', width, height: 64 }],
    ...(options.failLoad
      ? {
          load: () => {
            throw new Error('weights missing');
          },
        }
      : {}),
    commands: {
      set_label: {
        description: `label (${tag})`,
        params: { type: 'object', properties: { label: { type: 'string', maxLength: 40 } }, required: ['label'] },
        handler: (params: unknown) => ({ tag, label: (params as { label: string }).label }),
      },
      ...(options.extraCommand ? { extra: { params: { type: 'object' }, handler: () => ({ tag }) } } : {}),
    },
    async run(session) {
      const frame = { width, height: 64, format: 'i420' as const, data: new Uint8Array(width * 64 * 1.5).fill(120) };
      for await (const _ of session.ticks()) await session.emit('main_video', frame);
    },
  };
}

let net: TestNetwork | undefined;
let chrome: LaunchedChromium | undefined;
let runtime: Runtime;

beforeAll(async () => {
  net = await createTestNetwork();
  runtime = await startRuntime({
    model: version('v1') as never,
    port: 0,
    host: net.hostAddress,
    ice: { hostAddresses: [net.hostAddress] },
    logger: createLogger({ test: 'playground-dev' }, 'error'),
    dev: true,
  });
  chrome = await launchChromiumInNamespace(net, { secureOrigins: [runtime.url] });
}, 90_000);

afterAll(async () => {
  await chrome?.close().catch(() => {});
  await runtime?.close().catch(() => {});
  await net?.close();
}, 60_000);

describe('playground under arclight dev', () => {
  it(
    'follows reloads: keeps form values and the session, shows load errors, reconnects after a tracks change',
    async () => {
      const page: Page = await chrome!.newPage({ viewport: { width: 1280, height: 900 } });
      const consoleLines = recordPageLog(page);
      const diagnostics = async () => {
        const ui = await page
          .evaluate(() => ({
            status: document.querySelector('#status')?.textContent,
            detail: document.querySelector('#status-detail')?.textContent,
            notice: document.querySelector('#reload-notice')?.textContent,
            log: [...document.querySelectorAll('#log li')].slice(0, 30).map((li) => li.textContent?.replace(/\s+/g, ' ').trim()),
          }))
          .catch((error: unknown) => ({ error: String(error) }));
        return `\n--- page ---\n${JSON.stringify(ui, null, 1)}\n--- console ---\n${consoleLines.slice(-40).join('\n')}`;
      };
      const until = <T>(what: string, probe: () => Promise<T | undefined | null | false>, timeoutMs = 20_000) =>
        pollUntil(what, probe, { timeoutMs, diagnostics });
      const status = () => page.getAttribute('#status', 'data-status');
      const sessionText = () => page.textContent('#session-id');
      const label = 'form[data-command="set_label"] [name="label"]';

      await page.goto(`${runtime.url}/`);
      await until('the command form', async () => (await page.$(label)) !== null);
      await page.click('#connect');
      await until('status ready', async () => (await status()) === 'ready', 30_000);
      const firstSession = await sessionText();
      await page.fill(label, 'kept text');

      // Same tracks: the forms follow, the value stays, the session stays.
      expect((await runtime.reloadModel(version('v2', { extraCommand: true }) as never)).ok).toBe(true);
      await until('the reload notice', async () => page.isVisible('#reload-notice'));
      await until('the new command form', async () => (await page.$('form[data-command="extra"]')) !== null);
      expect(await page.inputValue(label)).toBe('kept text');
      expect(await status()).toBe('ready');
      expect(await sessionText()).toBe(firstSession);
      await page.click('form[data-command="set_label"] button[type="submit"]');
      await until('the v2 reply', async () => (await page.textContent('[data-result="set_label"]'))?.includes('v2'));

      // A failing load: a banner with where, the old version still serving.
      expect((await runtime.reloadModel(version('broken', { failLoad: true }) as never)).ok).toBe(false);
      await until('the load error banner', async () => page.isVisible('#load-error'));
      expect(await page.textContent('#load-error-where')).toMatch(/playground-dev\.browser\.test\.ts:\d+:\d+/);
      expect(await page.textContent('#load-error-detail')).toContain('weights missing');

      // Other tracks: the session ends and the page connects again by itself; the banner clears.
      expect((await runtime.reloadModel(version('v3', { width: 96, extraCommand: true }) as never)).ok).toBe(true);
      await until('the banner to clear', async () => !(await page.isVisible('#load-error')));
      await until(
        'a new session, ready',
        async () => (await status()) === 'ready' && (await sessionText()) !== firstSession && Boolean(await sessionText()),
        40_000,
      );
      expect(await page.inputValue(label)).toBe('kept text');
      await until(
        'a decoded frame of the new size',
        async () => page.evaluate(() => document.querySelector<HTMLVideoElement>('video[data-track="main_video"]')?.videoWidth === 96),
        20_000,
      );

      // The runtime restarts (same address, first version again): the page follows it and connects again.
      const secondSession = await sessionText();
      const port = runtime.port;
      await runtime.close();
      runtime = await startRuntime({
        model: version('v4', { extraCommand: false }) as never,
        port,
        host: net!.hostAddress,
        ice: { hostAddresses: [net!.hostAddress] },
        logger: createLogger({ test: 'playground-dev' }, 'error'),
        dev: true,
      });
      await until('the forms of the restarted runtime', async () => (await page.$('form[data-command="extra"]')) === null, 30_000);
      expect(await page.inputValue(label)).toBe('kept text');
      await until(
        'connected to the restarted runtime',
        async () => (await status()) === 'ready' && (await sessionText()) !== secondSession && Boolean(await sessionText()),
        40_000,
      );
      await page.click('form[data-command="set_label"] button[type="submit"]');
      await until('the v4 reply', async () => (await page.textContent('[data-result="set_label"]'))?.includes('v4'));
      await page.close();
    },
    TEST_TIMEOUT,
  );
});
