import { describe, expect, it } from 'vitest';
import { ArclightError } from '../protocol/errors.ts';
import { CandidateTrickler } from './candidate-trickler.ts';
import { DEFAULT_RECONNECT_POLICY, reconnectDelayMs, worthRetrying } from './connection-recovery.ts';
import type { IceCandidatesRequest } from '../protocol/transport.ts';

describe('reconnectDelayMs', () => {
  const policy = DEFAULT_RECONNECT_POLICY;

  it('doubles per attempt, between half and all of the ceiling, capped', () => {
    expect([1, 2, 3, 4, 5].map((n) => reconnectDelayMs(n, policy, () => 0))).toEqual([125, 250, 500, 1_000, 2_000]);
    expect([1, 2, 3, 4, 5].map((n) => reconnectDelayMs(n, policy, () => 0.999999))).toEqual([250, 500, 1_000, 2_000, 4_000]);
    expect(reconnectDelayMs(10, policy, () => 0.999999)).toBe(8_000);
    expect(reconnectDelayMs(10, policy, () => 0)).toBe(4_000);
  });

  it('spreads clients that failed together', () => {
    const delays = new Set(Array.from({ length: 50 }, () => reconnectDelayMs(3, policy)));
    expect(delays.size).toBeGreaterThan(10);
  });
});

describe('worthRetrying', () => {
  it('stops on refusals a retry cannot change, goes on for paths and busy servers', () => {
    for (const code of [
      'forbidden',
      'unauthorized',
      'token_expired',
      'session_ended',
      'session_not_found',
      'connection_closed',
      'invalid_sdp',
    ]) {
      expect(worthRetrying(new ArclightError(code, '')), code).toBe(false);
    }
    for (const code of ['timeout', 'connection_failed', 'internal_error', 'unavailable', 'not_ready']) {
      expect(worthRetrying(new ArclightError(code, '')), code).toBe(true);
    }
  });
});

describe('CandidateTrickler', () => {
  const candidate = (n: number) => ({ candidate: `candidate:${n} 1 udp 1 127.0.0.1 ${1000 + n} typ host`, sdp_mid: '0' });

  it('sends a burst as one request, in order, the end of candidates with the last', async () => {
    const sent: IceCandidatesRequest[] = [];
    const trickler = new CandidateTrickler(
      async (request) => void sent.push(request),
      () => {},
    );
    trickler.push(candidate(1));
    trickler.push(candidate(2));
    await trickler.settled();
    trickler.push(candidate(3));
    trickler.push(undefined);
    trickler.push(candidate(4)); // after the end: dropped
    await trickler.settled();
    expect(sent).toEqual([{ candidates: [candidate(1), candidate(2)] }, { candidates: [candidate(3)], end_of_candidates: true }]);
  });

  it('reports refusals the app must hear of, not the races of a connection moving on', async () => {
    const errors: string[] = [];
    const refusals = ['forbidden', 'not_ready', 'connection_closed', 'invalid_request'];
    const trickler = new CandidateTrickler(
      async () => {
        throw new ArclightError(refusals.shift()!, '');
      },
      (error) => errors.push(error.code),
    );
    for (let n = 0; n < 4; n++) {
      trickler.push(candidate(n));
      await trickler.settled();
    }
    expect(errors).toEqual(['forbidden', 'invalid_request']);
  });

  it('sends nothing once stopped', async () => {
    const sent: IceCandidatesRequest[] = [];
    const trickler = new CandidateTrickler(
      async (request) => void sent.push(request),
      () => {},
    );
    trickler.push(candidate(1));
    trickler.stop();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(sent).toEqual([]);
  });
});
