import { describe, expect, it } from 'vitest';
import { VerifiedTokenCache } from './verified-token-cache.ts';

describe('VerifiedTokenCache', () => {
  it('returns what was stored for the same token string, and nothing for another', () => {
    const cache = new VerifiedTokenCache<{ exp: number; jti: string }>({ capacity: 10, now: () => 0 });
    cache.set('token-a', { exp: 100, jti: 'a' });
    expect(cache.get('token-a')).toEqual({ exp: 100, jti: 'a' });
    expect(cache.get('token-b')).toBeUndefined();
    cache.delete('token-a');
    expect(cache.get('token-a')).toBeUndefined();
  });

  it('lets expired entries go as new ones arrive, so it holds the tokens in use rather than filling to capacity', () => {
    let now = 0;
    const cache = new VerifiedTokenCache<{ exp: number }>({ capacity: 10_000, now: () => now });
    // A token a second, each living 60 s, for an hour: about 60 are live at any time.
    for (let second = 0; second < 3_600; second++) {
      now = second * 1000;
      cache.set(`token-${second}`, { exp: second + 60 });
    }
    expect(cache.size).toBeLessThanOrEqual(61);
    expect(cache.get('token-3599')).toEqual({ exp: 3_659 });
    expect(cache.get('token-0')).toBeUndefined();
  });

  it('never holds more than its capacity, the oldest going first', () => {
    const cache = new VerifiedTokenCache<{ exp: number }>({ capacity: 3, now: () => 0 });
    for (const name of ['a', 'b', 'c', 'd']) cache.set(name, { exp: 1_000 });
    expect(cache.size).toBe(3);
    expect(cache.get('a')).toBeUndefined();
    expect(cache.get('d')).toBeDefined();
  });
});
