/**
 * The playground's hosted mode in a real Chromium against the full local stack
 * (dev/local-stack.ts: coordinator on SQLite, a hosted runtime registered with it, the
 * playground's runtime with `playgroundHosted`), every server on the test namespace's host
 * address (see test/support/netns.ts) with a temporary database.
 *
 * Driven through the page only: Mode → Hosted (coordinator), Connect → the page fetches a token
 * from its runtime and connects through the coordinator, which places the session on the hosted
 * runtime; video decodes; a generated command form gets its reply over the relayed connection;
 * "Clip last 10 s" and "Download" work through the coordinator's relay; Disconnect ends the
 * session at the coordinator and on the runtime. Then Mode → Local runtime connects to the
 * playground's own runtime as before.
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pattern from '../../models/examples/pattern/index.ts';
import { createLogger } from '../../server-kit/log.ts';
import { startLocalStack, type LocalStack } from '../../dev/local-stack.ts';
import { launchChromiumInNamespace, recordPageLog, type LaunchedChromium } from '../support/chromium.ts';
import { createTestNetwork, type TestNetwork } from '../support/netns.ts';
import { waitUntil } from '../support/video-probe.ts';

let net: TestNetwork | undefined;
let stack: LocalStack | undefined;
let chrome: LaunchedChromium | undefined;
const folder = mkdtempSync(join(tmpdir(), 'arclight-stack-browser-'));

beforeAll(async () => {
  net = await createTestNetwork();
  stack = await startLocalStack({
    model: pattern as never,
    port: 0,
    coordinatorPort: 0,
    database: join(folder, 'coordinator.db'),
    host: net.hostAddress,
    ice: { hostAddresses: [net.hostAddress] },
    logger: createLogger({ test: 'playground-hosted' }, 'warn'),
  });
  chrome = await launchChromiumInNamespace(net, { secureOrigins: [stack.playgroundUrl] });
}, 90_000);

afterAll(async () => {
  await chrome?.close().catch(() => {});
  await stack?.close().catch(() => {});
  await net?.close();
  rmSync(folder, { recursive: true, force: true });
}, 60_000);

/** Polls the page; on timeout, fails with its status line, log panel and console. */
async function until(page: Page, lines: string[], what: string, probe: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  try {
    await waitUntil(probe, timeoutMs, what);
  } catch (error) {
    const ui = await page
      .evaluate(() => ({
        status: document.querySelector('#status')?.textContent,
        detail: document.querySelector('#status-detail')?.textContent,
        log: [...document.querySelectorAll('#log li')].slice(0, 30).map((li) => li.textContent?.replace(/\s+/g, ' ').trim()),
      }))
      .catch((e: unknown) => ({ error: String(e) }));
    throw new Error(
      `${(error as Error).message}\n--- page ---\n${JSON.stringify(ui, null, 1)}\n--- console ---\n${lines.slice(-40).join('\n')}`,
    );
  }
}

function decodedFrames(page: Page): Promise<number> {
  return page.evaluate(() => {
    const video = document.querySelector<HTMLVideoElement>('video[data-track="main_video"]');
    return video && video.videoWidth > 0 ? video.getVideoPlaybackQuality().totalVideoFrames : 0;
  });
}

const sessionIdOf = (page: Page): Promise<string | undefined> =>
  page.evaluate(() =>
    (window as unknown as { playground: { client?: { getSessionId(): string | undefined } } }).playground.client?.getSessionId(),
  );

describe('playground in hosted mode (the local stack)', () => {
  it('connects through the coordinator to the hosted runtime, and still connects locally', { timeout: 90_000 }, async () => {
    const { coordinator, hostedRuntime, localRuntime, apiKey } = stack!;
    const page = await chrome!.newPage({ viewport: { width: 1440, height: 1000 } });
    const lines = recordPageLog(page);
    const requests: string[] = [];
    page.on('request', (r) => requests.push(`${r.method()} ${r.url()}`));
    await page.goto(`${stack!.playgroundUrl}/`);
    await page.waitForSelector('#connect:not([disabled])', { timeout: 15_000 });

    // Hosted mode is on offer, local stays the default.
    expect(await page.isVisible('#mode-picker')).toBe(true);
    expect(await page.inputValue('#mode')).toBe('local');
    await page.selectOption('#mode', 'hosted');

    await page.click('#connect');
    await until(page, lines, 'status ready (hosted)', async () => (await page.getAttribute('#status', 'data-status')) === 'ready', 30_000);
    expect(await page.isDisabled('#mode')).toBe(true); // no switching while connected
    await until(page, lines, 'decoded frames', async () => (await decodedFrames(page)) > 0, 10_000);
    const sessionId = await sessionIdOf(page);
    expect(sessionId).toBeDefined();
    // The coordinator placed it on the hosted runtime; the playground's own runtime is idle.
    expect(hostedRuntime.sessions.current?.id).toBe(sessionId);
    expect(localRuntime.sessions.current).toBeUndefined();
    await until(
      page,
      lines,
      'the coordinator to see the session ready',
      async () => (await coordinator.sessions.get(sessionId!))?.status === 'ready',
      10_000,
    );
    // The page asked its runtime for a token and talked to the coordinator; the key never reached it.
    expect(requests).toContain(`POST ${stack!.playgroundUrl}/playground/token`);
    expect(requests.some((r) => r.startsWith(`POST ${stack!.coordinatorUrl}/sessions`))).toBe(true);
    expect(requests.some((r) => r.includes(hostedRuntime.url))).toBe(false);
    expect(await page.content()).not.toContain(apiKey);

    // A command over the relayed connection, through the generated form.
    const form = page.locator('form[data-command="set_color"]');
    await form.locator('[name="color"]').fill('#00ff00');
    await form.locator('button[type="submit"]').click();
    await until(
      page,
      lines,
      'the set_color reply',
      async () => (await form.locator('[data-result]').getAttribute('data-state')) === 'ok',
      10_000,
    );
    expect(await form.locator('[data-result]').textContent()).toContain('color_changed');
    // The Session log panel follows the log through the coordinator (cross-origin, with the token).
    await until(
      page,
      lines,
      "the model's line in the Session log panel",
      async () => (await page.locator('#session-log li[data-source="model"]', { hasText: 'patch colour set' }).count()) > 0,
      10_000,
    );

    // A clip of the hosted session (the stack's runtimes record): its playlist URL points at the
    // coordinator, which relays it and the files (cross-origin from this page) to the runtime.
    await page.click('#clip');
    await until(page, lines, 'the clip', async () => (await page.getAttribute('#clip-info', 'data-duration')) !== null, 10_000);
    expect(Number(await page.getAttribute('#clip-info', 'data-duration'))).toBeGreaterThan(0);
    expect((await page.getAttribute('#clip-link', 'href'))!.startsWith(`${stack!.coordinatorUrl}/sessions/`)).toBe(true);
    const [download] = await Promise.all([page.waitForEvent('download', { timeout: 15_000 }), page.click('#download')]);
    await until(page, lines, 'the download', async () => (await page.getAttribute('#clip-progress', 'data-state')) === 'done', 15_000);
    expect(download.suggestedFilename()).toBe('arclight-clip.mp4');
    expect(Number(await page.getAttribute('#clip-progress', 'data-bytes'))).toBeGreaterThan(0);

    // Disconnect ends the session at the coordinator, which ends it on the runtime.
    await page.click('#disconnect');
    await until(page, lines, 'status disconnected', async () => (await page.getAttribute('#status', 'data-status')) === 'disconnected');
    await until(page, lines, 'the hosted runtime to end the session', async () => hostedRuntime.sessions.current === undefined, 10_000);
    expect((await coordinator.sessions.get(sessionId!))?.status).toBe('ended');

    // Back to local mode: straight to the playground's runtime, as without the stack.
    await page.selectOption('#mode', 'local');
    await page.click('#connect');
    await until(page, lines, 'status ready (local)', async () => (await page.getAttribute('#status', 'data-status')) === 'ready', 30_000);
    expect(localRuntime.sessions.current?.id).toBe(await sessionIdOf(page));
    await until(page, lines, 'decoded frames (local)', async () => (await decodedFrames(page)) > 0, 10_000);
    await page.click('#disconnect');
    await until(
      page,
      lines,
      'status disconnected (local)',
      async () => (await page.getAttribute('#status', 'data-status')) === 'disconnected',
    );

    const errors = lines.filter((line) => line.startsWith('[pageerror]'));
    expect(errors, errors.join('\n')).toEqual([]);
    await page.close();
  });
});
