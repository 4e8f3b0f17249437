import { describe, expect, it } from 'vitest';
import { ntpTimestamp } from './rtp-track-sender.ts';

describe('ntpTimestamp', () => {
  it('is seconds since 1900 and a binary fraction of the second', () => {
    const atMs = 1234.5;
    const unixMs = performance.timeOrigin + atMs;
    const ntp = ntpTimestamp(atMs);
    const seconds = Number(ntp >> 32n);
    const fraction = Number(ntp & 0xffffffffn) / 2 ** 32;
    expect(seconds).toBe(Math.floor(unixMs / 1000) + 2_208_988_800);
    expect((seconds - 2_208_988_800 + fraction) * 1000).toBeCloseTo(unixMs, 3);
  });

  it('keeps sub-millisecond steps (werift 0.24.4 had whole seconds)', () => {
    const a = ntpTimestamp(10_000);
    const b = ntpTimestamp(10_020);
    const stepMs = (Number(b - a) / 2 ** 32) * 1000;
    expect(stepMs).toBeCloseTo(20, 3);
  });
});
