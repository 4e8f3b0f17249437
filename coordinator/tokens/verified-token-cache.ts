/**
 * The signature verdicts TokenService remembers per token string, so a token a browser presents
 * many times (session polling, SDP, ICE) is verified by jose once.
 *
 * Sized for a long-running replica: entries are keyed by the token's SHA-256 (43 characters)
 * rather than the token itself — a token read from an `Authorization` header is a slice of that
 * header, and keeping it as a key kept the whole header alive (~1.2 KB an entry, measured in the
 * coordinator soak's heap snapshots) — and an entry goes once its token has expired, swept a few
 * at a time from the oldest on each insert, so the cache holds the tokens in use, not the last
 * `capacity` ever seen. Capacity still bounds it; the oldest entry goes first.
 */

import { createHash } from 'node:crypto';

export interface CachedVerdict {
  /** Seconds since the epoch, as in the token's `exp` claim. */
  readonly exp: number;
}

/** Expired entries looked at, from the oldest, on each insert: enough to keep up with any insert rate. */
const SWEEP_PER_INSERT = 4;

export class VerifiedTokenCache<Verdict extends CachedVerdict> {
  readonly #entries = new Map<string, Verdict>();
  readonly #capacity: number;
  readonly #now: () => number;

  constructor(options: { readonly capacity: number; readonly now: () => number }) {
    if (!(options.capacity >= 1)) throw new RangeError('capacity must be at least 1');
    this.#capacity = options.capacity;
    this.#now = options.now;
  }

  get size(): number {
    return this.#entries.size;
  }

  get(token: string): Verdict | undefined {
    return this.#entries.get(keyOf(token));
  }

  delete(token: string): void {
    this.#entries.delete(keyOf(token));
  }

  set(token: string, verdict: Verdict): void {
    this.#sweep();
    if (this.#entries.size >= this.#capacity) this.#entries.delete(this.#entries.keys().next().value!);
    this.#entries.set(keyOf(token), verdict);
  }

  /** Drops expired entries among the oldest few (insertion order is roughly expiry order). */
  #sweep(): void {
    const nowSeconds = this.#now() / 1000;
    let looked = 0;
    for (const [key, verdict] of this.#entries) {
      if (looked++ >= SWEEP_PER_INSERT) break;
      if (verdict.exp <= nowSeconds) this.#entries.delete(key);
    }
  }
}

function keyOf(token: string): string {
  return createHash('sha256').update(token).digest('base64url');
}
