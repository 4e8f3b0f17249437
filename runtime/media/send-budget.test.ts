/**
 * The send budget (issue 25 part 5) with an injected clock: a token bucket per stream at the
 * viewers' lowest estimate, half a second deep.
 */
import { describe, expect, it } from 'vitest';
import { SendBudget } from './send-budget.ts';

describe('SendBudget', () => {
  it('holds nothing back without an estimate, or while frames fit the link', () => {
    let now = 0;
    const budget = new SendBudget(500, () => now);
    budget.spent('h264', 100_000, undefined);
    expect(budget.waitMs()).toBe(0);
    // 1,000 kbit/s = 125 bytes/ms: 30 fps of 4,000-byte frames (960 kbit/s) fits.
    for (let i = 0; i < 300; i++) {
      budget.spent('h264', 4_000, 1_000);
      now += 1000 / 30;
      expect(budget.waitMs()).toBe(0);
    }
  });

  it('lets a keyframe go at once and has the frames after it wait until it is paid back', () => {
    let now = 0;
    const budget = new SendBudget(500, () => now);
    // 2,000 kbit/s = 250 bytes/ms, a 125,000-byte bucket: a 175,000-byte keyframe owes 50,000 bytes.
    budget.spent('h264', 175_000, 2_000);
    expect(budget.waitMs()).toBeCloseTo(200, 6);
    now += 150;
    expect(budget.waitMs()).toBeCloseTo(50, 6);
    now += 50;
    expect(budget.waitMs()).toBe(0);
  });

  it('paces frames to the link when it is below what the encoder makes, the slowest stream deciding', () => {
    let now = 0;
    const budget = new SendBudget(500, () => now);
    // 8,000-byte frames (1.9 Mbit/s at 30 fps) into a 500 kbit/s link (62.5 bytes/ms): one frame per 128 ms once the bucket is spent.
    let sent = 0;
    while (now < 10_000) {
      const wait = budget.waitMs();
      if (wait > 0) {
        now += wait;
        continue;
      }
      budget.spent('h264', 8_000, 500);
      budget.spent('vp8', 1_000, 5_000);
      sent++;
      now += 1000 / 30;
    }
    // 10 s × 62.5 bytes/ms = 625,000 bytes, plus the bucket's first 31,250: ~82 frames of 8,000.
    expect(sent).toBeGreaterThanOrEqual(80);
    expect(sent).toBeLessThanOrEqual(84);
  });

  it('forgets a stream nobody plays any more', () => {
    let now = 0;
    const budget = new SendBudget(500, () => now);
    budget.spent('vp8', 1_000_000, 100);
    expect(budget.waitMs()).toBeGreaterThan(0);
    budget.keepOnly(new Set(['h264']));
    expect(budget.waitMs()).toBe(0);
    now += 1;
  });
});
