/**
 * The account dashboard: its page (`GET /dashboard/`, static files from coordinator/dashboard/page/
 * — plain HTML, CSS and JavaScript, no build step) and its sign-in (`/platform/dashboard/…`).
 * Everything else the page shows or changes goes through the documented platform API with the
 * session cookie (platform-routes.ts): the page has no private back door. docs/dashboard.md.
 */

import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Context, Hono } from 'hono';
import { getCookie } from 'hono/cookie';
import type { DashboardSessionBody } from '../../protocol/coordinator.ts';
import { ArclightError } from '../../protocol/errors.ts';
import { packageRoot } from '../../server-kit/package-root.ts';
import { API_KEY_PREFIX, type ApiKeyStore } from '../accounts/api-keys.ts';
import type { DashboardAuth } from '../dashboard/dashboard-auth.ts';
import { DASHBOARD_COOKIE, type DashboardSession, type DashboardSessionStore } from '../dashboard/dashboard-sessions.ts';
import type { CoordinatorStorage } from '../storage/database.ts';
import { objectBody } from './platform-routes.ts';

export interface DashboardRouteServices {
  readonly apiKeys: ApiKeyStore;
  readonly store: DashboardSessionStore;
  readonly auth: DashboardAuth;
  readonly storage: CoordinatorStorage;
}

const PAGE_FILES: Record<string, string> = {
  'index.html': 'text/html; charset=utf-8',
  'dashboard.js': 'text/javascript; charset=utf-8',
  'dashboard.css': 'text/css; charset=utf-8',
};

/**
 * The page's headers: it handles API keys (shown once) and a session, so nothing but this origin's
 * own files and calls, no framing, no sniffing, and no Referer (a sign-in link's token lives in
 * the URL's fragment, which browsers never send, but the page's path is nobody's business).
 */
const PAGE_HEADERS: Record<string, string> = {
  'content-security-policy': [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; '),
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
  'cache-control': 'no-cache',
};

/** Looks like a JWT (three base64url parts): a token from `POST /tokens`, never accepted here. */
const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

export function registerDashboardRoutes(app: Hono, services: DashboardRouteServices): void {
  const { store, auth } = services;
  const folder = join(packageRoot(), 'coordinator', 'dashboard', 'page');
  const files = new Map<string, Promise<Buffer>>();
  const serve = async (name: string): Promise<Response> => {
    const type = PAGE_FILES[name];
    if (!type) throw new ArclightError('not_found', `No dashboard file ${name}.`);
    let body = files.get(name);
    if (!body) {
      body = readFile(join(folder, name));
      // Kept in memory (a few tens of KB); a failed read is tried again next time.
      body.catch(() => files.delete(name));
      files.set(name, body);
    }
    return new Response(new Uint8Array(await body), { headers: { 'content-type': type, ...PAGE_HEADERS } });
  };
  app.get('/dashboard', (c) => c.redirect('/dashboard/', 308));
  app.get('/dashboard/', () => serve('index.html'));
  app.get('/dashboard/:file', (c) => serve(c.req.param('file')));

  const body = async (c: Context, session: DashboardSession): Promise<DashboardSessionBody> => {
    const account = await services.storage.db
      .selectFrom('accounts')
      .select(['id', 'name'])
      .where('id', '=', session.accountId)
      .executeTakeFirstOrThrow();
    c.header('Cache-Control', 'no-store');
    return {
      account: { id: account.id, name: account.name },
      method: session.method,
      key_id: session.apiKeyId,
      created_at: session.createdAt,
      expires_at: session.expiresAt,
      idle_expires_at: session.idleExpiresAt,
      csrf_token: session.csrfToken,
    };
  };

  /**
   * Signs in with an API key (`{api_key}`) or an operator's one-time link (`{link}`): a new session
   * in the `arclight_dashboard` cookie, and its CSRF token in the answer. JSON only, and never from
   * another site (a forged sign-in would put the victim in the attacker's account).
   */
  app.post('/platform/dashboard/sign-in', async (c) => {
    auth.assertSameOrigin(c);
    const type = c.req.header('content-type') ?? '';
    if (!/^application\/json\b/i.test(type)) {
      throw new ArclightError(
        'invalid_request',
        'Send the sign-in as JSON (Content-Type: application/json): {"api_key": "rk_…"} or {"link": "dl_…"}.',
        { field: 'Content-Type' },
      );
    }
    const fields = await objectBody(c, ['api_key', 'link']);
    const apiKey = fields['api_key'];
    const link = fields['link'];
    if ((apiKey === undefined) === (link === undefined)) {
      throw new ArclightError(
        'invalid_request',
        'Send exactly one of api_key (an rk_ API key of the account) and link (the token of a sign-in link).',
        { field: apiKey === undefined ? '/api_key' : '/link' },
      );
    }
    let signedIn;
    if (apiKey !== undefined) {
      if (typeof apiKey !== 'string' || apiKey.trim() === '')
        throw new ArclightError('invalid_request', 'api_key must be the API key, a string starting with rk_.', { field: '/api_key' });
      const key = apiKey.trim();
      // Tokens from POST /tokens (scoped or not) are for sessions and servers, never a sign-in.
      if (!key.startsWith(API_KEY_PREFIX) && JWT_SHAPE.test(key)) {
        throw new ArclightError(
          'forbidden',
          'Tokens are not accepted for the dashboard: sign in with an API key of the account (rk_…), or a sign-in link from your operator.',
          { field: '/api_key' },
        );
      }
      const owner = await services.apiKeys.authenticate(key);
      if (!owner)
        throw new ArclightError('unauthorized', 'The API key is not valid (unknown, revoked or malformed).', { field: '/api_key' });
      signedIn = await store.signIn(owner.accountId, owner.keyId, 'api_key');
    } else {
      if (typeof link !== 'string')
        throw new ArclightError('invalid_request', 'link must be the token of a sign-in link (dl_…).', { field: '/link' });
      signedIn = await store.redeemLink(link.trim());
    }
    // A cookie of an earlier session in this browser is replaced; that session ends now.
    const previous = getCookie(c, DASHBOARD_COOKIE);
    if (previous !== undefined) await store.signOut(previous);
    auth.setSessionCookie(c, signedIn.cookie);
    return c.json(await body(c, signedIn.session), 200);
  });

  /** Who is signed in (the page asks on load): 401 without a live session, and the stale cookie removed. */
  app.get('/platform/dashboard/session', async (c) => {
    let caller;
    try {
      caller = await auth.caller(c);
    } catch (error) {
      auth.clearSessionCookie(c);
      throw error;
    }
    if (!caller) throw new ArclightError('unauthorized', 'Not signed in to the dashboard.');
    return c.json(await body(c, caller.session), 200);
  });

  /** Ends the session (CSRF-checked like every change) and removes the cookie; idempotent without one. */
  app.post('/platform/dashboard/sign-out', async (c) => {
    let caller;
    try {
      caller = await auth.caller(c);
    } catch (error) {
      // A cookie naming no live session: nothing to end, and nothing to protect.
      if (!(error instanceof ArclightError) || error.code !== 'unauthorized') throw error;
    }
    if (caller) await store.signOut(caller.cookie);
    auth.clearSessionCookie(c);
    c.header('Cache-Control', 'no-store');
    return c.json({ signed_out: true }, 200);
  });
}
