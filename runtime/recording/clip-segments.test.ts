/**
 * Which segments make a clip (issue 21 part 8): at least the asked length when recorded, less
 * than one segment more, and never over the cap — checked over random recordings.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { clipSegments } from './session-recording.ts';

const seg = (seconds: number) => ({ durationMs: seconds * 1000 });
const total = (list: readonly { durationMs: number }[]) => list.reduce((sum, s) => sum + s.durationMs, 0);

describe('clipSegments', () => {
  it('the case that returned 9.5 s for 5: with 4 s segments and a short cut segment, under one segment extra', () => {
    const all = [seg(4), seg(4), seg(4), seg(0.9)];
    const clip = clipSegments(all, 5, 300);
    expect(total(clip) / 1000).toBeCloseTo(8.9);
    expect(total(clip) - 5000).toBeLessThan(clip[0]!.durationMs);
  });

  it('a clip exactly as long as a cap given in fractional seconds fits it (found by the property below)', () => {
    expect(total(clipSegments([seg(1.952), seg(2.06)], 2.061, 4.012))).toBe(4012);
  });

  it('never over the cap: a clip as long as the cap starts one boundary later', () => {
    const all = Array.from({ length: 200 }, () => seg(2)).concat([seg(1.5)]); // 401.5 s recorded
    const clip = clipSegments(all, 300, 300);
    expect(total(clip)).toBeLessThanOrEqual(300_000);
    expect(total(clip)).toBeGreaterThan(300_000 - 2_000);
    expect(total(clipSegments(all, 1_000, 300))).toBe(total(clip)); // asked past the cap: the cap
  });

  it('holds for any recording, ask and cap: a suffix, at least min(asked, cap − segment, recorded), under one segment over, at most the cap', () => {
    const recording = fc.array(fc.integer({ min: 1, max: 4_000 }), { minLength: 1, maxLength: 80 });
    fc.assert(
      fc.property(
        recording,
        fc.integer({ min: 1, max: 400_000 }),
        fc.integer({ min: 4_000, max: 300_000 }),
        (durations, askedMs, capMs) => {
          const all = durations.map((durationMs) => ({ durationMs }));
          const clip = clipSegments(all, askedMs / 1000, capMs / 1000);
          expect(clip.length).toBeGreaterThan(0);
          expect(clip).toEqual(all.slice(all.length - clip.length)); // the newest segments
          const covered = total(clip);
          const oldest = clip[0]!.durationMs;
          expect(covered).toBeLessThanOrEqual(capMs);
          const wanted = Math.min(askedMs, capMs);
          if (clip.length < all.length) {
            // Stopped early: either it covers the ask (with less than its oldest segment to spare),
            // or one more segment would have passed the cap.
            const covers = covered >= wanted && covered - oldest < wanted;
            const capped = covered + all[all.length - clip.length - 1]!.durationMs > capMs;
            expect(covers || capped).toBe(true);
          }
        },
      ),
      { numRuns: 2_000 },
    );
  });
});
