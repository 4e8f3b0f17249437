/**
 * A token resolver that keeps the token it minted and mints again only near expiry.
 *
 * Why: the client calls its `jwtToken` resolver before every request of a session (SDP,
 * ICE, reconnects). A token minted per call has an empty bound set, so it cannot act on the
 * session the first token created (403): the resolver must hand back the same token until it is
 * about to expire. Hold one cache per session (or per connect): a scoped token's `max_sessions`
 * counts every session it created, so one cache shared by many connects runs out.
 *
 * @example
 * ```ts
 * import { ArclightClient, cacheToken } from 'arclight/client';
 * const token = cacheToken(async () => {
 *   const res = await fetch('/my-server/arclight-token', { method: 'POST' }); // your server calls mintToken()
 *   const { token, expires_at } = await res.json();
 *   return { token, expiresAt: expires_at * 1000 };
 * });
 * await new ArclightClient({ modelName: 'pattern', apiUrl }).connect(token);
 * ```
 */

/** A token and when it stops working, in milliseconds since the epoch. */
export interface ExpiringToken {
  readonly token: string;
  readonly expiresAt: number;
}

export interface TokenCacheOptions {
  /** Mint again this long before expiry (default 60 000 ms; at most half the token's lifetime). */
  readonly refreshBeforeMs?: number;
  /** Milliseconds since the epoch (tests move time). Default `Date.now`. */
  readonly now?: () => number;
}

const DEFAULT_REFRESH_BEFORE_MS = 60_000;

/**
 * Wraps `mint` into a resolver for `connect(jwtToken)`. Concurrent calls share one mint; a failed
 * mint is not kept, so the next call tries again.
 */
export function cacheToken(mint: () => Promise<ExpiringToken>, options: TokenCacheOptions = {}): () => Promise<string> {
  const now = options.now ?? Date.now;
  const refreshBeforeMs = options.refreshBeforeMs ?? DEFAULT_REFRESH_BEFORE_MS;
  let current: { token: string; refreshAt: number } | undefined;
  let minting: Promise<string> | undefined;
  return async () => {
    if (current && now() < current.refreshAt) return current.token;
    minting ??= (async () => {
      try {
        const mintedAt = now();
        const { token, expiresAt } = await mint();
        // A token shorter-lived than the margin would otherwise be minted again on every call.
        const margin = Math.min(refreshBeforeMs, Math.max(0, (expiresAt - mintedAt) / 2));
        current = { token, refreshAt: expiresAt - margin };
        return token;
      } finally {
        minting = undefined;
      }
    })();
    return minting;
  };
}
