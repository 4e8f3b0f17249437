/**
 * Launch the system (Debian) Chromium through playwright-core, either inside a
 * test network namespace (for WebRTC; see ./netns.ts) or on loopback.
 *
 * Playwright talks to the browser over a pipe (--remote-debugging-pipe, fds 3/4),
 * so the executable can be a generated wrapper script that first enters the
 * namespace: `exec ip netns exec NS chromium "$@"`.
 */
import { accessSync, constants as fsConstants } from 'node:fs';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type BrowserContextOptions, type Page } from 'playwright-core';
import type { TestNetwork } from './netns.ts';

export interface ChromiumOptions {
  /**
   * Origins to treat as secure contexts (e.g. `http://10.231.7.1:43121`).
   * Pages served over plain http from a non-loopback address need this for
   * getUserMedia and other secure-context APIs.
   */
  secureOrigins?: string[];
  /** Additional Chromium command-line switches. */
  extraArgs?: string[];
}

export interface LaunchedChromium {
  browser: Browser;
  /**
   * A new context with camera + microphone permission granted. Use this (not
   * `browser.newPage()`) for WebRTC pages: without a media permission Chromium
   * only offers ICE candidates on the default-route interface, and the test
   * namespace deliberately has no default route, so a page that never calls
   * getUserMedia would gather no candidates at all.
   */
  newContext(options?: BrowserContextOptions): Promise<BrowserContext>;
  /** A page in a fresh `newContext()` context (closed together with the browser). */
  newPage(options?: BrowserContextOptions): Promise<Page>;
  /** Closes the browser and removes its temp dir. Idempotent. */
  close(): Promise<void>;
}

const CHROMIUM_CANDIDATES = ['/usr/lib/chromium/chromium', '/usr/bin/chromium'];

/** Path of the system Chromium binary; throws a descriptive error if none is installed. */
export function findChromium(): string {
  const fromEnv = process.env.ARCLIGHT_CHROMIUM;
  for (const candidate of fromEnv ? [fromEnv, ...CHROMIUM_CANDIDATES] : CHROMIUM_CANDIDATES) {
    try {
      accessSync(candidate, fsConstants.X_OK);
      return candidate;
    } catch {
      // next
    }
  }
  throw new Error(
    `Chromium not found (looked at ${CHROMIUM_CANDIDATES.join(', ')}${fromEnv ? ` and ARCLIGHT_CHROMIUM=${fromEnv}` : ''}). ` +
      'Install the Debian package `chromium` (`npm test` does, through scripts/provision.mjs, when run as root on Debian).',
  );
}

/**
 * Switches every test browser gets. Playwright adds its own defaults on top
 * (its own fresh --user-data-dir, --headless, --no-sandbox via chromiumSandbox: false).
 */
function baseArgs(options: ChromiumOptions | undefined): string[] {
  const args = [
    '--no-sandbox', // root in a container: the setuid/namespace sandbox is unavailable
    '--disable-gpu',
    '--disable-dev-shm-usage',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking', // no Google update/telemetry traffic
    '--disable-component-update',
    '--disable-sync',
    '--use-fake-ui-for-media-stream', // auto-accept camera/mic permission prompts
    '--use-fake-device-for-media-stream', // synthetic webcam/mic instead of real devices
  ];
  const origins = options?.secureOrigins ?? [];
  if (origins.length) args.push(`--unsafely-treat-insecure-origin-as-secure=${origins.join(',')}`);
  args.push(...(options?.extraArgs ?? []));
  return args;
}

async function launch(executablePath: string, dir: string, options: ChromiumOptions | undefined): Promise<LaunchedChromium> {
  const home = join(dir, 'home');
  let browser: Browser;
  try {
    browser = await chromium.launch({
      executablePath,
      headless: true,
      chromiumSandbox: false,
      args: baseArgs(options),
      // A throwaway HOME so Chromium never touches the real one (~/.config, ~/.pki, crash dumps).
      env: { ...process.env, HOME: home, XDG_CONFIG_HOME: join(home, '.config'), XDG_CACHE_HOME: join(home, '.cache') },
      timeout: 30_000,
    });
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw new Error(`failed to launch Chromium via ${executablePath}: ${(err as Error).message}`);
  }
  let closing: Promise<void> | undefined;
  const newContext = (contextOptions?: BrowserContextOptions): Promise<BrowserContext> =>
    browser.newContext({
      ...contextOptions,
      permissions: [...new Set(['camera', 'microphone', ...(contextOptions?.permissions ?? [])])],
    });
  return {
    browser,
    newContext,
    newPage: async (contextOptions) => (await newContext(contextOptions)).newPage(),
    close: () =>
      (closing ??= (async () => {
        try {
          await browser.close();
        } finally {
          await rm(dir, { recursive: true, force: true });
        }
      })()),
  };
}

/**
 * Launches Chromium inside `net`'s namespace. Pages should load from
 * `http://${net.hostAddress}:PORT`; pass that origin in `secureOrigins` if the
 * page needs getUserMedia or other secure-context APIs.
 */
export async function launchChromiumInNamespace(net: TestNetwork, options?: ChromiumOptions): Promise<LaunchedChromium> {
  const chromiumPath = findChromium();
  const dir = await mkdtemp(join(tmpdir(), 'arclight-chromium-'));
  const wrapper = join(dir, 'chromium-in-netns.sh');
  const quote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;
  await writeFile(wrapper, `#!/bin/sh\nexec ${net.wrap([chromiumPath]).map(quote).join(' ')} "$@"\n`);
  await chmod(wrapper, 0o755);
  return launch(wrapper, dir, options);
}

/** Launches Chromium in the host network namespace, for pages that need no WebRTC. */
export async function launchChromiumOnLoopback(options?: ChromiumOptions): Promise<LaunchedChromium> {
  const dir = await mkdtemp(join(tmpdir(), 'arclight-chromium-'));
  return launch(findChromium(), dir, options);
}

/**
 * What a page says, as lines a test can search and print on failure: console messages
 * (`[console.<type>]`), uncaught errors (`[pageerror]`), failed requests and HTTP errors.
 */
export function recordPageLog(page: Page): string[] {
  const lines: string[] = [];
  page.on('console', (message) => lines.push(`[console.${message.type()}] ${message.text()}`));
  page.on('pageerror', (error) => lines.push(`[pageerror] ${error.stack ?? error.message}`));
  page.on('requestfailed', (request) =>
    lines.push(`[requestfailed] ${request.method()} ${request.url()}: ${request.failure()?.errorText}`),
  );
  page.on('response', (response) => {
    if (response.status() >= 400) lines.push(`[http ${response.status()}] ${response.request().method()} ${response.url()}`);
  });
  return lines;
}
