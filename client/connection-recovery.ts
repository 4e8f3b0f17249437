/**
 * When and how often the client tries to get a broken connection back (ICE failed, or
 * disconnected past its grace): a fresh peer renegotiated on the same connection id, after a
 * jittered exponential backoff, a bounded number of times.
 *
 * Jitter ("equal jitter": half the delay fixed, half random) keeps the clients of one runtime
 * from all coming back in the same instant after a shared outage (a runtime's uplink, a Wi-Fi
 * access point), while the fixed half keeps a single client from retrying at once into a path
 * that is still down.
 */

import { ArclightError } from '../protocol/errors.ts';

export interface ReconnectPolicy {
  /** Attempts before giving up (status `disconnected`, `reconnect()` still possible). Default 5. */
  readonly maxAttempts?: number;
  /** The first attempt's delay; doubled per attempt. Default 250 ms. */
  readonly baseDelayMs?: number;
  /** The longest delay. Default 8 s. */
  readonly maxDelayMs?: number;
}

export const DEFAULT_RECONNECT_POLICY: Required<ReconnectPolicy> = { maxAttempts: 5, baseDelayMs: 250, maxDelayMs: 8_000 };

/** The wait before attempt `attempt` (1-based): in [d/2, d], d = min(base·2^(attempt−1), max). */
export function reconnectDelayMs(attempt: number, policy: Required<ReconnectPolicy>, random: () => number = Math.random): number {
  const ceiling = Math.min(policy.baseDelayMs * 2 ** (attempt - 1), policy.maxDelayMs);
  return Math.round(ceiling / 2 + (ceiling / 2) * random());
}

/**
 * Whether another attempt can help. Refusals of the credentials (401/403: a resolver minting
 * unbound tokens, an expired token) and an ended session or retired connection will be refused
 * the same way again; timeouts, lost paths and busy servers may not.
 */
export function worthRetrying(error: ArclightError): boolean {
  return error.retryable;
}
