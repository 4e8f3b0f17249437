/**
 * The account dashboard in a real Chromium, against a real hosted stack (a coordinator on SQLite
 * with the test payment provider, a hosted runtime serving `pattern`, all on 127.0.0.1), driven
 * through the page only, as a person would: sign in with the API key; a page of another site in
 * the same browser tries to buy (a credentialed fetch, a form) and cannot; read the balance by grant;
 * buy credits (and see a bad amount and a declined card refused, nothing charged); set automatic
 * top-up and watch it fire exactly once while a real hosted session (our Node client over WebRTC)
 * bills; read usage per session, per model and per day; end the session from the Sessions screen;
 * create a key (shown once), mint a token with it, revoke it — its POST /tokens then fails; sign
 * out; sign in again with an operator's one-time link. A second coordinator without a payment
 * provider shows the Credits screen saying so.
 *
 * Every screen is photographed at desktop (1280×800) and phone (375×812) widths into
 * .tmp/dashboard-shots/ (gitignored) — look at them.
 */

import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCoordinator, TestPaymentProvider, type Coordinator } from '../../coordinator/index.ts';
import { launchChromiumOnLoopback, recordPageLog, type LaunchedChromium } from '../support/chromium.ts';
import { startHostedStack, type HostedStack } from '../support/hosted-stack.ts';
import { waitUntil } from '../support/video-probe.ts';
import { freshDatabase } from '../coordinator/storage-engines.ts';

const SHOTS = join(process.cwd(), '.tmp', 'dashboard-shots');
const NODE = [process.execPath, '--conditions=source', '--import', 'tsx'];
const DESKTOP = { width: 1280, height: 800 };
const PHONE = { width: 375, height: 812 };

let stack: HostedStack | undefined;
let chrome: LaunchedChromium | undefined;
let client: ChildProcess | undefined;
const provider = new TestPaymentProvider();

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  stack = await startHostedStack({ runtimeId: 'dashboard-gpu', credits: 100_000, paymentProvider: provider });
  chrome = await launchChromiumOnLoopback();
}, 90_000);

afterAll(async () => {
  client?.kill('SIGKILL');
  await chrome?.close().catch(() => {});
  await stack?.close().catch(() => {});
}, 60_000);

/** Photographs the page at both widths (full page), then goes back to the desktop width. */
async function shoot(page: Page, name: string): Promise<void> {
  for (const [size, viewport] of [
    ['desktop', DESKTOP],
    ['phone', PHONE],
  ] as const) {
    await page.setViewportSize(viewport);
    await page.waitForTimeout(150);
    await page.screenshot({ path: join(SHOTS, `${name}-${size}.png`), fullPage: true });
  }
  await page.setViewportSize(DESKTOP);
}

/** Our Node client as a process, connected through the coordinator with `token`; resolves once ready. */
async function startClient(apiUrl: string, token: string): Promise<{ process: ChildProcess; sessionId: string }> {
  const child = spawn(NODE[0]!, [...NODE.slice(1), 'test/support/node-client-process.ts', apiUrl, 'pattern'], {
    env: { ...process.env, ARCLIGHT_TEST_TOKEN: token },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  child.stderr!.on('data', (chunk: Buffer) => lines.push(chunk.toString()));
  const sessionId = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the Node client was not ready within 30 s:\n${lines.join('')}`)), 30_000);
    createInterface({ input: child.stdout! }).on('line', (line) => {
      lines.push(line);
      const event = JSON.parse(line) as { event: string; status?: string; session_id?: string };
      if (event.event === 'status' && event.status === 'ready' && event.session_id) {
        clearTimeout(timer);
        resolve(event.session_id);
      }
    });
    child.once('exit', (code) => reject(new Error(`the Node client exited (${code}):\n${lines.join('\n')}`)));
  });
  return { process: child, sessionId };
}

/**
 * Another site (http://localhost:<port>, not the dashboard's 127.0.0.1) open in the signed-in
 * browser tries to buy credits: a `fetch` with credentials, then an auto-submitted text/plain form
 * (the classic CSRF). The browser keeps the SameSite=Strict cookie home, so the form's POST
 * arrives signed out (401); the fetch never gets an answer it may read.
 */
async function crossSiteAttempt(page: Page, coordinatorUrl: string): Promise<void> {
  const target = `${coordinatorUrl}/platform/purchases`;
  const evil = `<!doctype html><title>evil</title>
<form id="f" method="POST" action="${target}" enctype="text/plain"><input name='{"dollars":7,"pad":"' value='"}'></form>
<script>
fetch(${JSON.stringify(target)}, { method: 'POST', credentials: 'include', headers: { 'content-type': 'text/plain' }, body: '{"dollars":7}' })
  .then((r) => r.text()).then((t) => (document.title = 'read: ' + t), () => (document.title = 'fetch refused'))
  .finally(() => document.getElementById('f').submit());
</script>`;
  const server: Server = createServer((_request, response) => response.writeHead(200, { 'content-type': 'text/html' }).end(evil));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const { port } = server.address() as AddressInfo;
    const tab = await page.context().newPage();
    const seen: string[] = [];
    const posts: string[] = [];
    let formAnswer: number | undefined;
    tab.on('request', (r) => {
      seen.push(`request ${r.method()} ${r.url()}`);
      if (r.url() === target) posts.push(r.isNavigationRequest() ? 'form' : 'fetch');
    });
    tab.on('requestfailed', (r) => seen.push(`failed ${r.url()} ${r.failure()?.errorText}`));
    tab.on('response', (r) => {
      seen.push(`response ${r.status()} ${r.url()}`);
      if (r.url() === target && r.request().isNavigationRequest()) formAnswer = r.status();
    });
    await tab.goto(`http://localhost:${port}/`);
    await waitUntil(() => formAnswer !== undefined, 10_000, "the cross-site form's answer").catch((error: unknown) => {
      throw new Error(`${(error as Error).message}\n${seen.join('\n')}`);
    });
    expect(posts.sort()).toEqual(['fetch', 'form']);
    expect(formAnswer).toBe(401);
    await tab.close();
  } finally {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

const postTokens = (url: string, key: string) =>
  fetch(`${url}/tokens`, { method: 'POST', headers: { 'Service-API-Key': key, 'content-type': 'application/json' }, body: '{}' });

/** The text of a screen's element, whitespace collapsed. */
const text = async (page: Page, selector: string): Promise<string> =>
  ((await page.textContent(selector)) ?? '').replace(/\s+/g, ' ').trim();

describe('the account dashboard (Chromium, hosted stack)', () => {
  it(
    'signs in, buys, tops up while a session bills, shows usage, ends the session, manages keys, signs out and in by link',
    { timeout: 180_000 },
    async () => {
      const { coordinator, key, accountId } = stack!;
      const url = coordinator.url;
      const page = await chrome!.newPage({ viewport: DESKTOP });
      const lines = recordPageLog(page);
      page.on('dialog', (dialog) => void dialog.accept());
      const requests: string[] = [];
      page.on('request', (r) => requests.push(`${r.method()} ${new URL(r.url()).pathname}`));

      // ---- sign in ----
      await page.goto(`${url}/dashboard/`);
      await page.waitForSelector('#view-signin:not([hidden])');
      await shoot(page, '01-sign-in');
      await page.fill('#api-key', 'rk_not_a_real_key');
      await page.click('#signin-form button[type="submit"]');
      await page.waitForSelector('#signin-msg[data-state="error"]');
      expect(await text(page, '#signin-msg')).toContain('not valid');
      await shoot(page, '02-sign-in-error');
      await page.fill('#api-key', key);
      await page.click('#signin-form button[type="submit"]');
      await page.waitForSelector('#view-overview:not([hidden])');
      await page.waitForFunction(() => document.querySelector('#ov-balance')?.textContent?.includes('credits'));
      // The cookie is HttpOnly: the page's script cannot read it.
      expect(await page.evaluate(() => document.cookie)).toBe('');
      const cookies = await page.context().cookies();
      expect(cookies).toEqual([expect.objectContaining({ name: 'arclight_dashboard', httpOnly: true, sameSite: 'Strict' })]);
      expect(await text(page, '#account-name')).toBe('Acme');

      // ---- a cross-site page in the same browser cannot spend the session ----
      await crossSiteAttempt(page, url);
      expect((await coordinator.purchases.list(accountId)).purchases).toEqual([]);

      // ---- overview: balance by grant with its expiry, quotas, pricing ----
      expect(await text(page, '#ov-balance')).toBe('100,000 credits');
      expect(await text(page, '#ov-balance-usd')).toBe('$10.00');
      const grantRow = await text(page, '#grants-table tbody tr');
      expect(grantRow).toContain('Promotional');
      expect(grantRow).toMatch(/in (89|90) days/);
      expect(await text(page, '#quotas')).toContain('Concurrent sessions5');
      expect(await text(page, '#pricing-table tbody')).toContain('pattern');
      await shoot(page, '03-overview');

      // ---- credits: a bad amount and a declined card charge nothing; a purchase is granted ----
      await page.click('#tabs a[data-tab="credits"]');
      await page.waitForSelector('#view-credits:not([hidden]) #payments-on:not([hidden])');
      await page.fill('#buy-dollars', '0');
      await page.click('#buy-form button[type="submit"]');
      await page.waitForSelector('#buy-msg[data-state="error"]');
      expect(await text(page, '#buy-msg')).toContain('1 to 1000 whole US dollars');
      expect(await page.getAttribute('#buy-dollars', 'aria-invalid')).toBe('true');
      await shoot(page, '04-credits-bad-amount');
      await page.fill('#buy-dollars', String(provider.declineDollars));
      await page.click('#buy-form button[type="submit"]');
      await page.waitForFunction(() => document.querySelector('#buy-msg')?.textContent?.includes('declined'));
      expect((await coordinator.ledger.balance(accountId)).credits).toBe(100_000);
      await page.fill('#buy-dollars', '10');
      await page.click('#buy-form button[type="submit"]');
      await page.waitForSelector('#buy-msg[data-state="ok"]');
      expect(await text(page, '#buy-msg')).toBe('Bought 100,000 credits for $10.00.');
      expect((await coordinator.ledger.balance(accountId)).credits).toBe(200_000);
      await page.waitForFunction(() => document.querySelectorAll('#purchases-table tbody tr').length === 2);
      expect(await text(page, '#purchases-table tbody tr:nth-child(1)')).toContain('confirmed');
      expect(await text(page, '#purchases-table tbody tr:nth-child(2)')).toContain('failed');

      // ---- automatic top-up: a bad amount refused; then set just under the balance ----
      await page.fill('#topup-threshold', '199990');
      await page.fill('#topup-amount', '5');
      await page.click('#topup-form button[type="submit"]');
      await page.waitForSelector('#topup-msg[data-state="error"]');
      expect(await text(page, '#topup-msg')).toContain('amount_dollars must be 10 to 1000');
      expect((await coordinator.purchases.autoTopup(accountId)).enabled).toBe(false);
      await page.fill('#topup-amount', '10');
      await page.click('#topup-form button[type="submit"]');
      await page.waitForSelector('#topup-msg[data-state="ok"]');
      expect(await text(page, '#topup-state')).toContain('On: when the balance falls below 199,990 credits, buy $10.00. Ready to top up.');
      await shoot(page, '05-credits');

      // ---- a hosted session bills; the top-up fires once ----
      const token = await stack!.mintToken();
      const started = await startClient(url, token);
      client = started.process;
      await waitUntil(
        async () => (await coordinator.sessions.get(started.sessionId))?.status === 'ready',
        10_000,
        'the session to be ready',
      );
      const topups = async () => (await coordinator.purchases.list(accountId)).purchases.filter((p) => p.kind === 'auto_topup');
      // The meter charges up to the runtime's last heartbeat (each second); 5 credits/s: two seconds cross the threshold.
      await waitUntil(
        async () => {
          await coordinator.housekeeping();
          return (await topups()).length > 0;
        },
        30_000,
        'the automatic top-up',
      );
      await waitUntil(async () => (await topups())[0]?.status === 'confirmed', 10_000, 'the top-up to be confirmed');
      // More billing: the balance is far above the threshold again, so no second top-up.
      await new Promise((resolve) => setTimeout(resolve, 2_500));
      await coordinator.housekeeping();
      expect(await topups()).toHaveLength(1);
      const balance = (await coordinator.ledger.balance(accountId)).credits;
      expect(balance).toBeGreaterThan(290_000);
      expect(balance).toBeLessThan(300_000);

      await page.click('#view-credits [data-refresh]');
      await page.waitForFunction(() => document.querySelector('#purchases-table tbody tr')?.textContent?.includes('Automatic top-up'));
      expect(await text(page, '#purchases-table tbody tr:nth-child(1)')).toMatch(/Automatic top-up\s?\$10\.00\s?100,000\s?confirmed/);
      expect(await text(page, '#topup-state')).toContain('Last top-up');
      expect(await text(page, '#topup-state')).toContain('confirmed');
      await shoot(page, '06-credits-after-topup');

      // ---- sessions: the open session, ended from the page ----
      await page.click('#tabs a[data-tab="sessions"]');
      await page.waitForFunction(() => document.querySelector('#sessions-table tbody')?.textContent?.includes('pattern'));
      expect(await text(page, '#sessions-table tbody')).toContain('ready');
      await shoot(page, '07-sessions');
      await page.click('#sessions-table button:has-text("End")');
      await page.waitForSelector('#sessions-msg[data-state="ok"]');
      expect(await text(page, '#sessions-msg')).toMatch(/^Session \S+ ended after/);
      expect((await coordinator.sessions.get(started.sessionId))?.status).toBe('ended');
      await page.waitForFunction(() => document.querySelector('#sessions-table tbody')?.textContent?.includes('No open sessions'));
      client.kill('SIGTERM');

      // ---- usage: per session, per model, per day (the chart) ----
      const billed = (await coordinator.sessions.get(started.sessionId))!;
      await page.click('#tabs a[data-tab="usage"]');
      await page.waitForSelector('#usage-chart svg rect.bar');
      const sessionRow = await text(page, '#by-session-table tbody tr');
      expect(sessionRow).toContain('pattern');
      expect(sessionRow).toContain(String(billed.billed_seconds * 5));
      expect(await text(page, '#by-model-table tbody tr')).toContain('pattern');
      expect(await text(page, '#us-credits')).toBe(String(billed.billed_seconds * 5));
      await shoot(page, '08-usage');
      // The overview's balance now shows three grants: promotional, purchased and the top-up's.
      await page.click('#tabs a[data-tab="overview"]');
      await page.waitForFunction(() => document.querySelectorAll('#grants-table tbody tr').length === 3);
      expect(await text(page, '#grants-table tbody')).toMatch(/Purchased.*in (364|365) days/);
      await shoot(page, '09-overview-after');

      // ---- keys: create (shown once), use, revoke; the revoked key's POST /tokens fails ----
      await page.click('#tabs a[data-tab="keys"]');
      await page.waitForSelector('#keys-table tbody tr');
      // The field stops at 64 characters; past it (set by script), the service's answer is shown.
      expect(await page.getAttribute('#key-name', 'maxlength')).toBe('64');
      await page.evaluate(() => ((document.querySelector('#key-name') as HTMLInputElement).value = 'x'.repeat(65)));
      await page.click('#key-form button[type="submit"]');
      await page.waitForSelector('#key-msg[data-state="error"]');
      expect(await text(page, '#key-msg')).toContain('1 to 64 characters');
      await page.fill('#key-name', 'ci-deploy');
      await page.click('#key-form button[type="submit"]');
      await page.waitForSelector('#secret-box:not([hidden])');
      const secret = await page.inputValue('#secret-value');
      expect(secret).toMatch(/^rk_/);
      expect((await postTokens(url, secret)).status).toBe(200);
      await page.waitForFunction(() => document.querySelector('#keys-table tbody')?.textContent?.includes('ci-deploy'));
      await shoot(page, '10-keys-new-secret');
      await page.click('#secret-done');
      expect(await page.inputValue('#secret-value')).toBe('');
      await page.click('#keys-table button[aria-label="Revoke key ci-deploy"]');
      await page.waitForFunction(() => document.querySelector('#key-msg')?.textContent?.includes('revoked'));
      const refused = await postTokens(url, secret);
      expect(refused.status).toBe(401);
      expect(((await refused.json()) as { code: string }).code).toBe('unauthorized');
      expect(await text(page, '#keys-table tbody')).toContain('revoked');
      await shoot(page, '11-keys');

      // ---- sign out; then in again with an operator's one-time link ----
      await page.click('#sign-out');
      await page.waitForSelector('#view-signin:not([hidden])');
      expect(await page.context().cookies()).toEqual([]);
      const { token: link } = await coordinator.dashboardSessions.issueLink(accountId);
      await page.goto(`${url}/dashboard/#link=${link}`);
      await page.waitForSelector('#link-form:not([hidden])');
      expect(page.url()).toBe(`${url}/dashboard/`); // the token left the address bar
      await shoot(page, '12-sign-in-link');
      await page.click('#link-form button[type="submit"]');
      await page.waitForSelector('#view-overview:not([hidden])');
      // The same link a second time: refused, and the key form offered instead.
      await page.click('#sign-out');
      await page.goto(`${url}/dashboard/#link=${link}`);
      await page.click('#link-form button[type="submit"]');
      await page.waitForSelector('#link-msg[data-state="error"]');
      expect(await text(page, '#link-msg')).toContain('used already');
      expect(await page.isVisible('#signin-form')).toBe(true);

      // The page used nothing but the documented API (and its own files).
      const paths = new Set(requests.map((r) => r.replace(/\/[0-9a-f-]{36}(?=$|\/)/g, '/{id}')));
      for (const path of paths) expect(path, path).toMatch(/^(GET \/dashboard\/.*|GET \/pricing|(GET|POST|PUT|DELETE) \/platform\/.+)$/);
      const errors = lines.filter((line) => line.startsWith('[pageerror]'));
      expect(errors, errors.join('\n')).toEqual([]);
      await page.close();
    },
  );

  it('says purchases are off when the coordinator has no payment provider', { timeout: 60_000 }, async () => {
    let bare: Coordinator | undefined;
    try {
      bare = await startCoordinator({ database: await freshDatabase('sqlite'), port: 0, meterFlushMs: 0 });
      const account = await bare.accounts.create('No Payments Ltd');
      const { key } = await bare.apiKeys.create(account.id);
      const page = await chrome!.newPage({ viewport: DESKTOP });
      await page.goto(`${bare.url}/dashboard/#credits`);
      await page.fill('#api-key', key);
      await page.click('#signin-form button[type="submit"]');
      await page.waitForSelector('#view-credits:not([hidden]) #payments-off:not([hidden])');
      expect(await page.isVisible('#buy-form')).toBe(false);
      expect(await text(page, '#payments-off')).toContain('no payment provider');
      await shoot(page, '13-credits-no-provider');
      await page.close();
    } finally {
      await bare?.close();
    }
  });
});
