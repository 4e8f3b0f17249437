/**
 * The dashboard cookie on the platform API (docs/dashboard.md): which session a request's cookie
 * names, and the CSRF defence every state-changing request authenticated by it must pass —
 *
 * 1. `SameSite=Strict`: browsers send the cookie only on requests that a page of this origin's
 *    site makes;
 * 2. the request must not say it comes from elsewhere: `Sec-Fetch-Site` (sent by every current
 *    browser) must be `same-origin` when present, and `Origin`, when present, this service's origin;
 * 3. it must carry `X-Arclight-CSRF` with the session's token, which only a page that read the
 *    sign-in answer knows — and a cross-site page can send a custom header only after a CORS
 *    preflight, which `/platform/*` never answers.
 *
 * Any one of them stops a cross-site form or fetch; together they also cover old browsers and
 * same-site (other subdomain) attackers. Safe methods (GET, HEAD) change nothing and need only
 * the cookie: a cross-site page can make the browser send them but cannot read the answers.
 */

import type { Context } from 'hono';
import { getCookie, setCookie } from 'hono/cookie';
import { ArclightError } from '../../protocol/errors.ts';
import {
  CSRF_HEADER,
  DASHBOARD_COOKIE,
  DASHBOARD_SESSION_MS,
  csrfTokenMatches,
  type DashboardSession,
  type DashboardSessionStore,
} from './dashboard-sessions.ts';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** A request authenticated by the dashboard cookie. */
export interface CookieCaller {
  readonly session: DashboardSession;
  /** The cookie's value (to sign out). */
  readonly cookie: string;
}

export interface DashboardAuthOptions {
  /** `--public-url`: its origin is this service's too (behind a proxy, the Host may differ). */
  readonly publicUrl: string | undefined;
}

export class DashboardAuth {
  readonly #store: DashboardSessionStore;
  readonly #publicOrigin: string | undefined;

  constructor(store: DashboardSessionStore, options: DashboardAuthOptions) {
    this.#store = store;
    this.#publicOrigin = options.publicUrl === undefined ? undefined : new URL(options.publicUrl).origin;
  }

  /** Whether the request carries a dashboard cookie at all. */
  hasCookie(c: Context): boolean {
    return getCookie(c, DASHBOARD_COOKIE) !== undefined;
  }

  /**
   * The session the cookie names: undefined without a cookie; 401 `unauthorized` when it names no
   * live session; for state-changing methods, 403 `csrf_check_failed` unless the request is
   * same-origin and carries the session's `X-Arclight-CSRF`.
   */
  async caller(c: Context): Promise<CookieCaller | undefined> {
    const cookie = getCookie(c, DASHBOARD_COOKIE);
    if (cookie === undefined) return undefined;
    const unsafe = !SAFE_METHODS.has(c.req.method);
    // Checked before the session is looked up: a cross-site request learns nothing, touches nothing.
    if (unsafe) this.assertSameOrigin(c);
    const session = await this.#store.authenticate(cookie);
    if (!session)
      throw new ArclightError(
        'unauthorized',
        'The dashboard session has ended (signed out, expired, or its API key was revoked); sign in again.',
      );
    if (unsafe && !csrfTokenMatches(cookie, c.req.header(CSRF_HEADER))) {
      throw new ArclightError(
        'csrf_check_failed',
        `A change made with the dashboard cookie must carry the session's ${CSRF_HEADER} header (the csrf_token of the sign-in answer).`,
        { field: CSRF_HEADER },
      );
    }
    return { session, cookie };
  }

  /**
   * 403 `csrf_check_failed` when the browser says the request comes from another site or origin:
   * `Sec-Fetch-Site` other than `same-origin` (or `none`, a user's own navigation), or an `Origin`
   * that is not this service's. Tools that send neither header pass (they hold no victim's cookie).
   */
  assertSameOrigin(c: Context): void {
    const site = c.req.header('sec-fetch-site');
    if (site !== undefined && site !== 'same-origin' && site !== 'none') {
      throw new ArclightError('csrf_check_failed', `Requests from another site are refused here (Sec-Fetch-Site: ${site}).`);
    }
    const origin = c.req.header('origin');
    if (origin === undefined) return;
    if (!this.#origins(c).has(origin))
      throw new ArclightError(
        'csrf_check_failed',
        `Requests from ${origin} are refused here: only the dashboard's own pages may make them.`,
      );
  }

  /** `Set-Cookie` for a new session: HttpOnly, SameSite=Strict, Path=/, Secure over https, 12 h. */
  setSessionCookie(c: Context, value: string): void {
    setCookie(c, DASHBOARD_COOKIE, value, {
      path: '/',
      httpOnly: true,
      sameSite: 'Strict',
      secure: this.#secure(c),
      maxAge: DASHBOARD_SESSION_MS / 1000,
    });
  }

  /** `Set-Cookie` that removes it (sign-out, or a cookie naming no live session). */
  clearSessionCookie(c: Context): void {
    setCookie(c, DASHBOARD_COOKIE, '', { path: '/', httpOnly: true, sameSite: 'Strict', secure: this.#secure(c), maxAge: 0 });
  }

  #origins(c: Context): Set<string> {
    const url = new URL(c.req.url);
    const origins = new Set([url.origin]);
    if (this.#publicOrigin !== undefined) origins.add(this.#publicOrigin);
    // TLS ended at a proxy: the browser's origin is https while this server sees http.
    const proto = c.req.header('x-forwarded-proto');
    const host = c.req.header('x-forwarded-host') ?? c.req.header('host');
    if (proto !== undefined && host !== undefined && /^https?$/.test(proto)) origins.add(`${proto}://${host}`);
    return origins;
  }

  /** Over https (here, at a proxy, or by the public URL): the cookie is `Secure`. */
  #secure(c: Context): boolean {
    return (
      new URL(c.req.url).protocol === 'https:' ||
      c.req.header('x-forwarded-proto') === 'https' ||
      this.#publicOrigin?.startsWith('https:') === true
    );
  }
}
