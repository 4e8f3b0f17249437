/**
 * `mintToken()`: exchanges an API key for a session token at the coordinator (`POST /tokens`),
 * on a server. The key never goes to a browser; the page gets the scoped token this returns.
 *
 * @example
 * ```ts
 * import { mintToken } from 'arclight/client/server';
 * const { token, expiresAt } = await mintToken({
 *   coordinatorUrl: 'http://127.0.0.1:8090',
 *   apiKey: process.env.ARCLIGHT_API_KEY!,
 *   models: ['pattern'],
 *   maxSessions: 1,
 * });
 * // hand `token` to the page; it connects with new ArclightClient({ modelName: 'pattern', apiUrl }).connect(token)
 * ```
 */

import {
  API_KEY_HEADER,
  type ResolvedSessionAuthorizationDetail,
  type SessionAuthorizationDetail,
  type TokenRequest,
  type TokenResponse,
} from '../protocol/coordinator.ts';
import { ArclightError } from '../protocol/errors.ts';
import { errorFromResponse } from './http-errors.ts';
import type { ExpiringToken } from './token-cache.ts';

export interface MintTokenOptions {
  /** The coordinator's base URL, e.g. `http://127.0.0.1:8090`. */
  readonly coordinatorUrl: string;
  /** An `rk_` API key of the account the sessions are billed to. */
  readonly apiKey: string;
  /**
   * Model slugs the token may create sessions of: a session-scoped token, for browsers. Omitted
   * (with every option below): an unscoped token, which may do anything the key may — keep it on
   * servers.
   */
  readonly models?: readonly string[];
  /** Open sessions of the account the token may act on (to hand a session to another client). */
  readonly bind?: readonly string[];
  /** Sessions the token may create, bound ones included (coordinator default 5; with `bind`, its length). */
  readonly maxSessions?: number;
  /** Ceiling on each session's duration; the account's own maximum still applies. */
  readonly maxSessionDurationSeconds?: number;
  /** Token lifetime in seconds (default 3600; 21600 and above become 21600: read `expiresAt`). */
  readonly expiresAfter?: number;
  readonly signal?: AbortSignal;
}

export interface MintedToken extends ExpiringToken {
  /** The JWT, for `Authorization: Bearer` (the client library's `connect(jwtToken)`). */
  readonly token: string;
  /** When it expires, in **milliseconds** since the epoch (the wire's `expires_at` is seconds). */
  readonly expiresAt: number;
  /** The grant as the coordinator resolved it (defaults filled in); absent for an unscoped token. */
  readonly authorizationDetails?: readonly ResolvedSessionAuthorizationDetail[];
}

/**
 * Mints a token. Rejects with `ArclightError`: the coordinator's `code` and `message` for a
 * refusal (`unauthorized` for a bad key, `forbidden` for a model or session out of reach,
 * `invalid_request` with `field`), `connection_failed` when it cannot be reached. Throws
 * `TypeError` for options that cannot make a request (scope without `models`).
 */
export async function mintToken(options: MintTokenOptions): Promise<MintedToken> {
  const url = `${options.coordinatorUrl.replace(/\/+$/, '')}/tokens`;
  const body = JSON.stringify(tokenRequest(options));
  let response: Response;
  try {
    response = await fetch(url, {
      method: 'POST',
      headers: { [API_KEY_HEADER]: options.apiKey, 'Content-Type': 'application/json' },
      body,
      ...(options.signal ? { signal: options.signal } : {}),
    });
  } catch (error) {
    if ((error as Error).name === 'AbortError') throw error;
    throw new ArclightError('connection_failed', `Could not reach the coordinator at ${url}: ${(error as Error).message}`, {
      cause: error,
    });
  }
  if (!response.ok) throw await errorFromResponse(response);
  const minted = (await response.json().catch(() => undefined)) as Partial<TokenResponse> | undefined;
  if (typeof minted?.token !== 'string' || typeof minted.expires_at !== 'number') {
    throw new ArclightError('internal_error', `POST ${url} answered ${response.status} without a token and expires_at.`);
  }
  return {
    token: minted.token,
    expiresAt: minted.expires_at * 1000,
    ...(minted.authorization_details ? { authorizationDetails: minted.authorization_details } : {}),
  };
}

/** The `POST /tokens` body: one RFC 9396 `session` entry when scoped, nothing when unscoped. */
function tokenRequest(options: MintTokenOptions): TokenRequest {
  const asksScope = options.bind !== undefined || options.maxSessions !== undefined || options.maxSessionDurationSeconds !== undefined;
  if (options.models === undefined) {
    if (asksScope)
      throw new TypeError(
        'mintToken: bind, maxSessions and maxSessionDurationSeconds need models (a scoped token names the models it may use).',
      );
    return options.expiresAfter === undefined ? {} : { expires_after: options.expiresAfter };
  }
  const constraints = {
    ...(options.maxSessions === undefined ? {} : { max_sessions: options.maxSessions }),
    ...(options.maxSessionDurationSeconds === undefined ? {} : { max_session_duration_seconds: options.maxSessionDurationSeconds }),
  };
  const detail: SessionAuthorizationDetail = {
    type: 'session',
    resources: { models: { match: [...options.models] }, ...(options.bind ? { sessions: { bind: [...options.bind] } } : {}) },
    ...(Object.keys(constraints).length > 0 ? { constraints } : {}),
  };
  return { authorization_details: [detail], ...(options.expiresAfter === undefined ? {} : { expires_after: options.expiresAfter }) };
}
