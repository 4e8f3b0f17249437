/**
 * `arclight/client/server` — what an app's server needs for hosted mode: minting session tokens
 * with the account's API key (which must never reach a browser), and caching them.
 *
 * @example
 * ```ts
 * import { mintToken } from 'arclight/client/server';
 * app.post('/arclight-token', async (_req, res) => {
 *   const { token, expiresAt } = await mintToken({ coordinatorUrl, apiKey, models: ['pattern'], maxSessions: 1 });
 *   res.json({ token, expires_at: Math.floor(expiresAt / 1000) });
 * });
 * ```
 */
export { mintToken, type MintTokenOptions, type MintedToken } from './server-token.ts';
export { cacheToken, type ExpiringToken, type TokenCacheOptions } from './token-cache.ts';
export { ArclightError } from '../protocol/errors.ts';
export type { ResolvedSessionAuthorizationDetail, TokenResponse } from '../protocol/coordinator.ts';
