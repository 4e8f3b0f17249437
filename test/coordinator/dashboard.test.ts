/**
 * The account dashboard's sign-in and the platform API behind it, over real HTTP, on SQLite and
 * PostgreSQL (docs/dashboard.md): an API key (or an operator's one-time link) is exchanged for an
 * HttpOnly, SameSite=Strict session cookie, stored hashed, ending after 12 h, 1 h idle, at
 * sign-out or when its key is revoked; every change made with the cookie needs the session's
 * X-Arclight-CSRF header and a same-origin request; tokens from POST /tokens are refused for it;
 * and bad input on every form's endpoint is a clear error that charges and grants nothing.
 */

import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main as coordinatorCli } from '../../coordinator/cli.ts';
import { startCoordinator, TestPaymentProvider, type Coordinator } from '../../coordinator/index.ts';
import { DASHBOARD_IDLE_MS, DASHBOARD_SESSION_MS, SIGN_IN_LINK_MS } from '../../coordinator/dashboard/dashboard-sessions.ts';
import { ENGINES, freshDatabase } from './storage-engines.ts';

interface Answer {
  readonly status: number;
  readonly body: Record<string, any>;
  readonly headers: Headers;
}

interface Caller {
  /** The cookie's value. */
  readonly cookie?: string;
  /** X-Arclight-CSRF. */
  readonly csrf?: string;
  readonly origin?: string;
  readonly headers?: Record<string, string>;
}

/** The `arclight_dashboard` value a Set-Cookie header sets. */
function cookieOf(headers: Headers): string | undefined {
  const set = headers.get('set-cookie');
  return set === null ? undefined : /arclight_dashboard=([^;]*)/.exec(set)?.[1];
}

describe.each(ENGINES)('the account dashboard on %s', (engine) => {
  let coordinator: Coordinator;
  let database: string;
  let now = Date.now();
  const provider = new TestPaymentProvider();

  const call = async (method: string, path: string, caller: Caller = {}, body?: unknown): Promise<Answer> => {
    const response = await fetch(`${coordinator.url}${path}`, {
      method,
      headers: {
        ...(caller.cookie === undefined ? {} : { cookie: `arclight_dashboard=${caller.cookie}` }),
        ...(caller.csrf === undefined ? {} : { 'x-arclight-csrf': caller.csrf }),
        ...(caller.origin === undefined ? {} : { origin: caller.origin }),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...caller.headers,
      },
      ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
    });
    const text = await response.text();
    return { status: response.status, body: text ? (JSON.parse(text) as Record<string, any>) : {}, headers: response.headers };
  };
  const signIn = (body: unknown, headers: Record<string, string> = {}) => call('POST', '/platform/dashboard/sign-in', { headers }, body);
  /** Signed in with `key`: the cookie and the CSRF token, as the page holds them. */
  const session = async (key: string): Promise<Required<Pick<Caller, 'cookie' | 'csrf'>>> => {
    const answer = await signIn({ api_key: key });
    expect(answer.status).toBe(200);
    return { cookie: cookieOf(answer.headers)!, csrf: answer.body.csrf_token as string };
  };
  const customer = async (name: string, credits = 100_000) => {
    const account = await coordinator.accounts.create(name);
    if (credits > 0) await coordinator.ledger.grantPromotional(account.id, credits);
    const { key, record } = await coordinator.apiKeys.create(account.id, { now });
    return { id: account.id, key, keyId: record.id };
  };
  const mint = async (key: string, scoped: boolean): Promise<string> => {
    const response = await fetch(`${coordinator.url}/tokens`, {
      method: 'POST',
      headers: { 'Service-API-Key': key, 'content-type': 'application/json' },
      body: JSON.stringify(scoped ? { authorization_details: [{ type: 'session', resources: { models: { match: ['pattern'] } } }] } : {}),
    });
    expect(response.status).toBe(200);
    return ((await response.json()) as { token: string }).token;
  };
  const cli = async (...args: string[]) => {
    let stdout = '';
    const write = process.stdout.write;
    const writeErr = process.stderr.write;
    process.stdout.write = ((chunk: string | Uint8Array) => ((stdout += String(chunk)), true)) as typeof process.stdout.write;
    process.stderr.write = (() => true) as typeof process.stderr.write;
    try {
      const code = await coordinatorCli(['admin', ...args, '--database', database]);
      return { code, out: code === 0 ? (JSON.parse(stdout) as Record<string, any>) : {} };
    } finally {
      process.stdout.write = write;
      process.stderr.write = writeErr;
    }
  };

  beforeAll(async () => {
    database = await freshDatabase(engine);
    coordinator = await startCoordinator({
      database,
      port: 0,
      now: () => now,
      meterFlushMs: 0,
      signupCredits: 0,
      paymentProvider: provider,
    });
    await coordinator.catalog.add('pattern', 5);
  });
  afterAll(async () => coordinator?.close());

  it('serves the page with a strict CSP, and nothing else under /dashboard/', async () => {
    const redirect = await fetch(`${coordinator.url}/dashboard`, { redirect: 'manual' });
    expect(redirect.status).toBe(308);
    expect(redirect.headers.get('location')).toBe('/dashboard/');
    const page = await fetch(`${coordinator.url}/dashboard/`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(page.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    expect(page.headers.get('x-frame-options')).toBe('DENY');
    expect(await page.text()).toContain('/dashboard/dashboard.js');
    for (const file of ['dashboard.js', 'dashboard.css']) expect((await fetch(`${coordinator.url}/dashboard/${file}`)).status).toBe(200);
    expect((await fetch(`${coordinator.url}/dashboard/..%2Fcli.ts`)).status).toBe(404);
    expect((await fetch(`${coordinator.url}/dashboard/secret.txt`)).status).toBe(404);
  });

  it('signs in with an API key: an opaque, hashed session in an HttpOnly, SameSite=Strict cookie that reads the platform API', async () => {
    const acme = await customer('Acme');
    const answer = await signIn({ api_key: ` ${acme.key} ` });
    expect(answer.status).toBe(200);
    expect(answer.headers.get('cache-control')).toBe('no-store');
    const setCookie = answer.headers.get('set-cookie')!;
    expect(setCookie).toMatch(/^arclight_dashboard=ds_[A-Za-z0-9_-]{43}; Max-Age=43200; Path=\/; HttpOnly; SameSite=Strict$/);
    expect(setCookie).not.toContain('Secure'); // plain http here
    expect(answer.body).toEqual({
      account: { id: acme.id, name: 'Acme' },
      method: 'api_key',
      key_id: acme.keyId,
      created_at: now,
      expires_at: now + DASHBOARD_SESSION_MS,
      idle_expires_at: now + DASHBOARD_IDLE_MS,
      csrf_token: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
    });
    const cookie = cookieOf(answer.headers)!;
    // Only the hash is stored.
    const rows = await coordinator.storage.db.selectFrom('dashboard_sessions').selectAll().where('account_id', '=', acme.id).execute();
    expect(rows.map((r) => r.id_hash)).toEqual([createHash('sha256').update(cookie).digest('hex')]);

    const me = await call('GET', '/platform/dashboard/session', { cookie });
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({ account: { id: acme.id }, csrf_token: answer.body.csrf_token });
    const balance = await call('GET', '/platform/balance', { cookie });
    expect(balance.status).toBe(200);
    expect(balance.body.credits).toBe(100_000);
    for (const path of [
      '/platform/account',
      '/platform/models',
      '/platform/sessions',
      '/platform/usage',
      '/platform/keys',
      '/platform/purchases',
      '/platform/auto-topup',
    ]) {
      expect((await call('GET', path, { cookie })).status, path).toBe(200);
    }
    // The key this session signed in with is `current`.
    expect((await call('GET', '/platform/keys', { cookie })).body.keys).toEqual([
      expect.objectContaining({ id: acme.keyId, current: true }),
    ]);
    // Behind TLS (a proxy saying so), the cookie is Secure too.
    const secure = await signIn({ api_key: acme.key }, { 'x-forwarded-proto': 'https' });
    expect(secure.headers.get('set-cookie')).toContain('; Secure');
    // Without a cookie, or with one naming nothing: 401, as for a missing key.
    expect((await call('GET', '/platform/balance')).status).toBe(401);
    const stale = await call('GET', '/platform/dashboard/session', { cookie: 'ds_' + 'A'.repeat(43) });
    expect(stale.status).toBe(401);
    expect(stale.body.code).toBe('unauthorized');
    expect(stale.headers.get('set-cookie')).toContain('Max-Age=0');
  });

  it('refuses changes made with the cookie without the session-bound CSRF header, or from another site', async () => {
    const beta = await customer('Beta');
    const mine = await session(beta.key);
    const other = await session((await customer('Other')).key);
    const keys = async () => (await coordinator.apiKeys.list(beta.id)).length;

    const refused = [
      { what: 'no CSRF header', caller: { cookie: mine.cookie } },
      { what: "another session's CSRF token", caller: { cookie: mine.cookie, csrf: other.csrf } },
      { what: 'a made-up CSRF token', caller: { cookie: mine.cookie, csrf: 'x'.repeat(43) } },
      { what: 'a cross-site Origin', caller: { ...mine, origin: 'https://evil.example' } },
      { what: 'Sec-Fetch-Site: cross-site', caller: { ...mine, headers: { 'sec-fetch-site': 'cross-site' } } },
      { what: 'Sec-Fetch-Site: same-site', caller: { ...mine, headers: { 'sec-fetch-site': 'same-site' } } },
    ];
    for (const { what, caller } of refused) {
      const created = await call('POST', '/platform/keys', caller, { name: 'x' });
      expect(created.status, what).toBe(403);
      expect(created.body.code, what).toBe('csrf_check_failed');
      expect((await call('POST', '/platform/purchases', caller, { dollars: 5 })).body.code, what).toBe('csrf_check_failed');
      expect((await call('PUT', '/platform/auto-topup', caller, { threshold_credits: 1000, amount_dollars: 10 })).body.code, what).toBe(
        'csrf_check_failed',
      );
      expect((await call('POST', '/platform/dashboard/sign-out', caller)).body.code, what).toBe('csrf_check_failed');
    }
    // A cross-site HTML form: text/plain, the cookie (were SameSite ignored), no custom header.
    const form = await fetch(`${coordinator.url}/platform/purchases`, {
      method: 'POST',
      headers: {
        cookie: `arclight_dashboard=${mine.cookie}`,
        'content-type': 'text/plain',
        origin: 'https://evil.example',
        'sec-fetch-site': 'cross-site',
      },
      body: '{"dollars":5}',
    });
    expect(form.status).toBe(403);
    // Nothing was created, bought or set.
    expect(await keys()).toBe(1);
    expect((await coordinator.purchases.list(beta.id)).purchases).toEqual([]);
    expect((await coordinator.purchases.autoTopup(beta.id)).enabled).toBe(false);
    expect((await coordinator.ledger.balance(beta.id)).credits).toBe(100_000);
    // Still signed in (sign-out was refused too).
    expect((await call('GET', '/platform/dashboard/session', { cookie: mine.cookie })).status).toBe(200);
    // The platform API answers no preflight: a cross-site page cannot even ask to send the header.
    const preflight = await fetch(`${coordinator.url}/platform/keys`, {
      method: 'OPTIONS',
      headers: {
        origin: 'https://evil.example',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'x-arclight-csrf',
      },
    });
    expect(preflight.headers.get('access-control-allow-origin')).toBeNull();

    // The same request, same-origin with the header: made.
    const made = await call(
      'POST',
      '/platform/keys',
      { ...mine, origin: new URL(coordinator.url).origin, headers: { 'sec-fetch-site': 'same-origin' } },
      { name: 'from the dashboard' },
    );
    expect(made.status).toBe(201);
    expect(made.body).toMatchObject({ name: 'from the dashboard', key: expect.stringMatching(/^rk_/), current: false });

    // Signing in from another site (login CSRF) or as a form is refused too.
    const crossSignIn = await signIn({ api_key: beta.key }, { origin: 'https://evil.example' });
    expect(crossSignIn.status).toBe(403);
    expect(crossSignIn.body.code).toBe('csrf_check_failed');
    expect(cookieOf(crossSignIn.headers)).toBeUndefined();
    const formSignIn = await call(
      'POST',
      '/platform/dashboard/sign-in',
      { headers: { 'content-type': 'application/x-www-form-urlencoded' } },
      `api_key=${beta.key}`,
    );
    expect(formSignIn.status).toBe(400);
    expect(formSignIn.body.field).toBe('Content-Type');
  });

  it('never accepts a token from POST /tokens for the dashboard, nor beside its cookie', async () => {
    const gamma = await customer('Gamma');
    const scoped = await mint(gamma.key, true);
    const unscoped = await mint(gamma.key, false);
    for (const token of [scoped, unscoped]) {
      const answer = await signIn({ api_key: token });
      expect(answer.status).toBe(403);
      expect(answer.body).toMatchObject({ code: 'forbidden', field: '/api_key' });
      expect(cookieOf(answer.headers)).toBeUndefined();
      // As a cookie: names no session.
      expect((await call('GET', '/platform/balance', { cookie: token })).status).toBe(401);
      expect((await call('GET', '/platform/dashboard/session', { cookie: token })).status).toBe(401);
    }
    // A scoped token as bearer is refused even with a valid cookie beside it: the header is read first.
    const mine = await session(gamma.key);
    const mixed = await call('GET', '/platform/balance', { cookie: mine.cookie, headers: { authorization: `Bearer ${scoped}` } });
    expect(mixed.status).toBe(403);
    expect(mixed.body.code).toBe('forbidden');
    const mixedChange = await call(
      'POST',
      '/platform/purchases',
      { ...mine, headers: { authorization: `Bearer ${scoped}` } },
      { dollars: 5 },
    );
    expect(mixedChange.status).toBe(403);
    expect((await coordinator.purchases.list(gamma.id)).purchases).toEqual([]);
  });

  it('ends a session 12 h after sign-in, after 1 h idle, at sign-out, and when its key is revoked (not rotated)', async () => {
    const delta = await customer('Delta');
    const start = now;
    try {
      // Idle: used every 50 minutes it lives on, until the absolute end.
      const busy = await session(delta.key);
      for (let t = 50; t < 12 * 60; t += 50) {
        now = start + t * 60_000;
        expect((await call('GET', '/platform/account', { cookie: busy.cookie })).status, `after ${t} min`).toBe(200);
      }
      now = start + DASHBOARD_SESSION_MS;
      expect((await call('GET', '/platform/account', { cookie: busy.cookie })).status).toBe(401);

      now = start + 13 * 3_600_000;
      const idle = await session(delta.key);
      now += DASHBOARD_IDLE_MS - 1;
      expect((await call('GET', '/platform/dashboard/session', { cookie: idle.cookie })).status).toBe(200);
      now += DASHBOARD_IDLE_MS;
      expect((await call('GET', '/platform/dashboard/session', { cookie: idle.cookie })).status).toBe(401);

      const leaving = await session(delta.key);
      const out = await call('POST', '/platform/dashboard/sign-out', leaving);
      expect(out.status).toBe(200);
      expect(out.headers.get('set-cookie')).toMatch(/^arclight_dashboard=; Max-Age=0; Path=\/; HttpOnly; SameSite=Strict/);
      expect((await call('GET', '/platform/account', { cookie: leaving.cookie })).status).toBe(401);
      // Idempotent: signing out again (or without a session) is fine.
      expect((await call('POST', '/platform/dashboard/sign-out', leaving)).status).toBe(200);

      // Rotating the key it signed in with leaves the session; revoking it (or its rotated predecessor) ends it.
      const second = await coordinator.apiKeys.create(delta.id, { now });
      const viaSecond = await session(second.key);
      const viaFirst = await session(delta.key);
      const rotated = await call('POST', `/platform/keys/${delta.keyId}/rotate`, viaFirst);
      expect(rotated.status).toBe(201);
      expect((await call('GET', '/platform/account', { cookie: viaFirst.cookie })).status).toBe(200);
      expect((await call('DELETE', `/platform/keys/${delta.keyId}`, viaSecond)).status).toBe(200);
      expect((await call('GET', '/platform/account', { cookie: viaFirst.cookie })).status).toBe(401);
      expect((await call('GET', '/platform/account', { cookie: viaSecond.cookie })).status).toBe(200);
      // The revoked key cannot sign in again.
      expect((await signIn({ api_key: delta.key })).status).toBe(401);
      // Housekeeping tidies what ended.
      await coordinator.housekeeping();
      const left = await coordinator.storage.db
        .selectFrom('dashboard_sessions')
        .select('id_hash')
        .where('account_id', '=', delta.id)
        .execute();
      expect(left).toHaveLength(1);
    } finally {
      now = start;
    }
  });

  it("signs in with an operator's link: once, within 15 minutes, stored hashed (arclight admin dashboard-link)", async () => {
    const epsilon = await customer('Epsilon');
    const start = now;
    try {
      now = Date.now();
      const issued = await cli('dashboard-link', epsilon.id, '--base-url', 'https://api.example.com/');
      expect(issued.code).toBe(0);
      expect(issued.out).toMatchObject({
        account_id: epsilon.id,
        url: expect.stringMatching(/^https:\/\/api\.example\.com\/dashboard\/#link=dl_[A-Za-z0-9_-]{43}$/),
        single_use: true,
      });
      expect(issued.out.expires_at).toBeGreaterThan(now + SIGN_IN_LINK_MS - 60_000);
      const token = /#link=(.+)$/.exec(issued.out.url as string)![1]!;
      expect(
        await coordinator.storage.db.selectFrom('dashboard_links').select('token_hash').where('token_hash', '=', token).execute(),
      ).toEqual([]);

      const [first, second] = await Promise.all([signIn({ link: token }), signIn({ link: token })]);
      const statuses = [first.status, second.status].sort();
      expect(statuses).toEqual([200, 401]);
      const winner = first.status === 200 ? first : second;
      expect(winner.body).toMatchObject({ account: { id: epsilon.id }, method: 'link', key_id: null });
      expect((first.status === 401 ? first : second).body.code).toBe('sign_in_link_invalid');
      const cookie = cookieOf(winner.headers)!;
      // A link session manages keys (no key to tie it to), and is not `current` on any.
      const listed = await call('GET', '/platform/keys', { cookie });
      expect(listed.body.keys.every((k: { current: boolean }) => !k.current)).toBe(true);

      const late = await cli('dashboard-link', epsilon.id);
      expect(late.out.url).toMatch(/^http:\/\/127\.0\.0\.1:8090\/dashboard\/#link=/);
      now = Date.now() + SIGN_IN_LINK_MS + 1_000;
      const expired = await signIn({ link: /#link=(.+)$/.exec(late.out.url as string)![1] });
      expect(expired.status).toBe(401);
      expect(expired.body.code).toBe('sign_in_link_invalid');
      for (const bad of ['dl_nope', 'x'.repeat(300), 'ds_' + 'A'.repeat(43)])
        expect((await signIn({ link: bad })).body.code).toBe('sign_in_link_invalid');
      expect((await cli('dashboard-link', 'no-such-account')).code).toBe(1);
      expect((await cli('dashboard-link', epsilon.id, '--base-url', 'https://x.example/path')).code).toBe(2);
    } finally {
      now = start;
    }
  });

  it('answers bad input on every form and endpoint with a clear error, charging and granting nothing', async () => {
    const zeta = await customer('Zeta');
    const mine = await session(zeta.key);
    const expectRefused = (answer: Answer, status: number, code: string, field?: string) => {
      expect(answer.status, JSON.stringify(answer.body)).toBe(status);
      expect(answer.body.code).toBe(code);
      expect(typeof answer.body.message).toBe('string');
      expect(answer.body.message.length).toBeGreaterThan(10);
      if (field !== undefined) expect(answer.body.field).toBe(field);
    };
    // Sign-in.
    expectRefused(await signIn({}), 400, 'invalid_request', '/api_key');
    expectRefused(await signIn({ api_key: zeta.key, link: 'dl_x' }), 400, 'invalid_request');
    expectRefused(await signIn({ api_key: 42 }), 400, 'invalid_request', '/api_key');
    expectRefused(await signIn({ api_key: '' }), 400, 'invalid_request', '/api_key');
    expectRefused(await signIn({ api_key: 'rk_wrong' }), 401, 'unauthorized', '/api_key');
    expectRefused(await signIn({ api_key: zeta.key, remember: true }), 400, 'invalid_request', '/remember');
    expectRefused(await signIn('{"api_key":'), 400, 'invalid_json');
    expectRefused(await signIn([zeta.key]), 400, 'invalid_request', '');

    // Buying: bounds, types, unknown fields, bad JSON — and a declined card.
    for (const dollars of [0, 1001, 2.5, -1, '10', null, true]) {
      expectRefused(await call('POST', '/platform/purchases', mine, { dollars }), 400, 'invalid_request', '/dollars');
    }
    expectRefused(await call('POST', '/platform/purchases', mine, {}), 400, 'invalid_request', '/dollars');
    expectRefused(await call('POST', '/platform/purchases', mine, { dollars: 10, cents: 5 }), 400, 'invalid_request', '/cents');
    expectRefused(await call('POST', '/platform/purchases', mine, '{"dollars": 10'), 400, 'invalid_json');
    expectRefused(
      await call('POST', '/platform/purchases', { ...mine, headers: { 'idempotency-key': 'has space' } }, { dollars: 10 }),
      400,
      'invalid_request',
      'Idempotency-Key',
    );
    const declined = await call('POST', '/platform/purchases', mine, { dollars: provider.declineDollars });
    expectRefused(declined, 402, 'payment_failed');
    expect((await coordinator.ledger.balance(zeta.id)).credits).toBe(100_000);
    const purchases = (await call('GET', '/platform/purchases', { cookie: mine.cookie })).body.purchases as {
      status: string;
      grant_id: string | null;
    }[];
    expect(purchases).toEqual([
      expect.objectContaining({ status: 'failed', grant_id: null, failure: expect.stringContaining('declined') }),
    ]);
    expect(provider.checkouts.filter((c) => c.accountId === zeta.id)).toHaveLength(1); // only the declined one reached the provider

    // Automatic top-up.
    const maxThreshold = 99_900_000;
    const topups: [unknown, string][] = [
      [{ threshold_credits: 0, amount_dollars: 10 }, '/threshold_credits'],
      [{ threshold_credits: maxThreshold + 1, amount_dollars: 10 }, '/threshold_credits'],
      [{ threshold_credits: '5000', amount_dollars: 10 }, '/threshold_credits'],
      [{ threshold_credits: 1.5, amount_dollars: 10 }, '/threshold_credits'],
      [{ threshold_credits: 5000, amount_dollars: 9 }, '/amount_dollars'],
      [{ threshold_credits: 5000, amount_dollars: 1001 }, '/amount_dollars'],
      [{ threshold_credits: 5000 }, '/amount_dollars'],
      [{ threshold_credits: maxThreshold, amount_dollars: 1000 }, '/amount_dollars'],
      [{ threshold_credits: 5000, amount_dollars: 10, when: 'always' }, '/when'],
    ];
    for (const [body, field] of topups) expectRefused(await call('PUT', '/platform/auto-topup', mine, body), 400, 'invalid_request', field);
    expect((await coordinator.purchases.autoTopup(zeta.id)).enabled).toBe(false);

    // Keys.
    for (const name of ['', '   ', 'x'.repeat(65), 'tab\there', 42])
      expectRefused(await call('POST', '/platform/keys', mine, { name }), 400, 'invalid_request', '/name');
    expectRefused(await call('POST', '/platform/keys', mine, { label: 'x' }), 400, 'invalid_request', '/label');
    expectRefused(await call('POST', `/platform/keys/${zeta.keyId}/rotate`, mine, { name: 'x' }), 400, 'invalid_request', '/name');
    expectRefused(await call('POST', '/platform/keys/no-such-key/rotate', mine), 404, 'api_key_not_found');
    expectRefused(await call('DELETE', '/platform/keys/no-such-key', mine), 404, 'api_key_not_found');
    expectRefused(await call('DELETE', `/platform/keys/${zeta.keyId}`, mine), 409, 'last_api_key');
    expect((await coordinator.apiKeys.list(zeta.id)).map((k) => k.revokedAt)).toEqual([null]);

    // Sessions.
    expectRefused(await call('DELETE', '/platform/sessions/no-such-session', mine), 404, 'session_not_found');
    expectRefused(await call('DELETE', `/platform/sessions/${'x'.repeat(300)}`, mine), 404, 'session_not_found');

    // Usage.
    expectRefused(await call('GET', '/platform/usage?since=yesterday', { cookie: mine.cookie }), 400, 'invalid_request', 'since');
    expectRefused(await call('GET', '/platform/purchases?limit=0', { cookie: mine.cookie }), 400, 'invalid_request', 'limit');

    // After all of it: the balance, the grants and the purchases are as they were.
    expect((await coordinator.ledger.balance(zeta.id)).grants).toHaveLength(1);
    expect((await coordinator.ledger.balance(zeta.id)).credits).toBe(100_000);
    expect((await coordinator.purchases.list(zeta.id)).purchases).toHaveLength(1);
  });

  it("buys credits, sets automatic top-up and ends a session with the cookie; other accounts' sessions are not found", async () => {
    const eta = await customer('Eta');
    const theta = await customer('Theta');
    const mine = await session(eta.key);
    const bought = await call('POST', '/platform/purchases', { ...mine, headers: { 'idempotency-key': 'dash-1' } }, { dollars: 12 });
    expect(bought.status).toBe(200);
    expect(bought.body).toMatchObject({ status: 'confirmed', dollars: 12, credits: 120_000, provider: 'test' });
    expect((await coordinator.ledger.balance(eta.id)).credits).toBe(220_000);
    const topup = await call('PUT', '/platform/auto-topup', mine, { threshold_credits: 50_000, amount_dollars: 10 });
    expect(topup.body).toMatchObject({ enabled: true, armed: true, threshold_credits: 50_000, amount_dollars: 10 });

    const token = await mint(eta.key, true);
    const created = await fetch(`${coordinator.url}/sessions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: { name: 'pattern' } }),
    });
    const sessionId = ((await created.json()) as { session_id: string }).session_id;
    expect(
      (await call('GET', '/platform/sessions', { cookie: mine.cookie })).body.sessions.map((s: { session_id: string }) => s.session_id),
    ).toEqual([sessionId]);
    // Another account's dashboard cannot see or end it.
    const theirs = await session(theta.key);
    expect((await call('DELETE', `/platform/sessions/${sessionId}`, theirs)).body.code).toBe('session_not_found');
    expect((await call('DELETE', `/platform/sessions/${sessionId}`, mine, { reason: 'x'.repeat(257) })).body.field).toBe('/reason');
    const ended = await call('DELETE', `/platform/sessions/${sessionId}`, mine);
    expect(ended.status).toBe(200);
    expect(ended.body).toMatchObject({
      session_id: sessionId,
      model: 'pattern',
      status: 'ended',
      end_reason: expect.stringContaining('dashboard'),
    });
    expect((await coordinator.sessions.get(sessionId))?.status).toBe('ended');
    // Idempotent; and the API key may do the same from a server.
    expect((await call('DELETE', `/platform/sessions/${sessionId}`, mine)).status).toBe(200);
    expect((await call('DELETE', `/platform/sessions/${sessionId}`, { headers: { authorization: `Bearer ${eta.key}` } })).status).toBe(200);
    // A scoped token cannot.
    expect((await call('DELETE', `/platform/sessions/${sessionId}`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(403);
  });

  it('arclight admin buy-credits records a confirmed purchase the account sees', async () => {
    const iota = await customer('Iota', 0);
    const bought = await cli('buy-credits', iota.id, '7');
    expect(bought.code).toBe(0);
    expect(bought.out).toMatchObject({ kind: 'purchased', credits: 70_000, purchase_id: expect.any(String) });
    const mine = await session(iota.key);
    const listed = await call('GET', '/platform/purchases', { cookie: mine.cookie });
    expect(listed.body.purchases).toEqual([
      expect.objectContaining({
        id: bought.out.purchase_id,
        kind: 'operator',
        provider: 'operator',
        status: 'confirmed',
        dollars: 7,
        credits: 70_000,
        grant_id: bought.out.id,
      }),
    ]);
    expect((await cli('buy-credits', iota.id, '0')).code).toBe(2);
    expect((await cli('buy-credits', iota.id, '1001')).code).toBe(1);
    expect((await coordinator.purchases.list(iota.id)).purchases).toHaveLength(1);
    expect(await coordinator.ledger.reconcile(iota.id)).toEqual([]);
  });
});
