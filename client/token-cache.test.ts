import { describe, expect, it } from 'vitest';
import { cacheToken } from './token-cache.ts';

describe('cacheToken', () => {
  it('keeps the token until near expiry, shares one mint between concurrent calls, and retries a failed mint', async () => {
    let now = 1_000_000;
    let mints = 0;
    let fail = false;
    const resolve = cacheToken(
      async () => {
        mints++;
        if (fail) throw new Error('coordinator down');
        return { token: `t${mints}`, expiresAt: now + 3_600_000 };
      },
      { now: () => now },
    );
    expect(await Promise.all([resolve(), resolve(), resolve()])).toEqual(['t1', 't1', 't1']);
    expect(mints).toBe(1);
    now += 3_600_000 - 60_001; // just before the refresh margin
    expect(await resolve()).toBe('t1');
    now += 2; // inside the last minute
    fail = true;
    await expect(resolve()).rejects.toThrow('coordinator down');
    fail = false;
    expect(await resolve()).toBe('t3');
  });

  it('refreshes a short-lived token at half its lifetime, not on every call', async () => {
    let now = 0;
    let mints = 0;
    const resolve = cacheToken(async () => ({ token: `t${++mints}`, expiresAt: now + 10_000 }), { now: () => now });
    await resolve();
    now = 4_999;
    expect(await resolve()).toBe('t1');
    now = 5_000;
    expect(await resolve()).toBe('t2');
  });
});
