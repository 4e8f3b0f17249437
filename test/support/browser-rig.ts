/**
 * The set-up every Chromium end-to-end test shares: a throwaway network namespace
 * (./netns.ts), a runtime serving the test's model on the namespace's host address (HTTP and
 * ICE), and Chromium inside the namespace treating the runtime's origin as secure. `browserRig`
 * registers it in `beforeAll` and tears it down in `afterAll`.
 */
import type { Page } from 'playwright-core';
import { afterAll, beforeAll } from 'vitest';
import type { ArclightClient } from '../../client/index.ts';
import { startRuntime, type Runtime, type RuntimeOptions } from '../../runtime/index.ts';
import type { PeerFaults } from '../../runtime/faults/peer-faults.ts';
import { startRuntimeWithFaults } from '../../runtime/faults/start-runtime-with-faults.ts';
import { createLogger } from '../../server-kit/log.ts';
import { launchChromiumInNamespace, type LaunchedChromium } from './chromium.ts';
import { createTestNetwork, type TestNetwork } from './netns.ts';

export interface BrowserRig {
  readonly net: TestNetwork;
  readonly runtime: Runtime;
  readonly chrome: LaunchedChromium;
}

export interface BrowserRigOptions {
  /** More runtime options (model, host, ICE and logger are set here). */
  readonly runtime?: Omit<Partial<RuntimeOptions>, 'model'>;
  /** Test faults on the runtime's peers (runtime/faults/peer-faults.ts). */
  readonly peerFaults?: PeerFaults;
  /** Extra Chromium switches. */
  readonly chromiumArgs?: string[];
}

/** Registers the rig for this test file; call the returned function inside tests. */
export function browserRig(model: unknown, name: string, options: BrowserRigOptions = {}): () => BrowserRig {
  let rig: Partial<{ -readonly [K in keyof BrowserRig]: BrowserRig[K] }> = {};
  beforeAll(async () => {
    rig.net = await createTestNetwork();
    const runtimeOptions: RuntimeOptions = {
      ...options.runtime,
      model: model as never,
      port: 0,
      host: rig.net.hostAddress,
      ice: { hostAddresses: [rig.net.hostAddress] },
      logger: createLogger({ test: name }, 'warn'),
    };
    rig.runtime = options.peerFaults
      ? await startRuntimeWithFaults(runtimeOptions, options.peerFaults)
      : await startRuntime(runtimeOptions);
    rig.chrome = await launchChromiumInNamespace(rig.net, {
      secureOrigins: [rig.runtime.url],
      ...(options.chromiumArgs ? { extraArgs: options.chromiumArgs } : {}),
    });
  }, 90_000);
  afterAll(async () => {
    await rig.chrome?.close().catch(() => {});
    await rig.runtime?.close().catch(() => {});
    await rig.net?.close();
    rig = {};
  }, 60_000);
  return () => {
    if (!rig.net || !rig.runtime || !rig.chrome) throw new Error('browserRig: used outside a test (before beforeAll ran)');
    return rig as BrowserRig;
  };
}

/** The client library as a page script sees it after `openClientPage`. */
export type PageWindow = Window & { ArclightClient: typeof ArclightClient };

/**
 * A page on the runtime's origin (the playground) with the client library's `ArclightClient`
 * on `window`, and the page's console collected in `log`. A module script rather than a dynamic
 * import inside `page.evaluate`, which vitest would rewrite.
 */
export async function openClientPage(rig: BrowserRig): Promise<{ page: Page; log: string[] }> {
  // bypassCSP: the playground's CSP (script-src 'self') refuses the inline module injected below.
  const page = await rig.chrome.newPage({ bypassCSP: true });
  const log: string[] = [];
  page.on('console', (m) => log.push(`${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => log.push(`pageerror: ${e.message}`));
  await page.goto(rig.runtime.url);
  await page.addScriptTag({
    type: 'module',
    content: "import { ArclightClient } from '/playground/arclight-client.js'; window.ArclightClient = ArclightClient;",
  });
  await page.waitForFunction(() => 'ArclightClient' in window);
  return { page, log };
}
