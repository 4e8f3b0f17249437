/**
 * The soak (bench/soak.ts) in miniature, so CI keeps its machinery working: 18 s of two users
 * churning sessions with reconnects against a hosted stack of real processes, a quiet point
 * halfway and one at the end. Memory slopes mean nothing over 18 s and are not judged here;
 * what is: sessions ran, reconnects happened, nothing failed, descriptors came back to their
 * quiet level, and every figure the script prints is there.
 */

import { describe, expect, it } from 'vitest';
import { THRESHOLDS } from '../../bench/support/soak-figures.ts';
import { runSoak } from '../../bench/support/soak-run.ts';

describe('soak, 18 s in CI', () => {
  it('churns sessions with reconnects without failures, and descriptors return to their quiet level', async () => {
    const figures = await runSoak({
      minutes: 18 / 60,
      users: 2,
      watchSeconds: [2, 4],
      sampleEverySeconds: 2,
      windowSeconds: 10,
      quietEverySeconds: 10,
      warmupFraction: 0.1,
    });

    expect(figures.failures, JSON.stringify(figures.failures, null, 2)).toEqual([]);
    expect(figures.samplingErrors).toEqual([]);
    expect(figures.sessions).toBeGreaterThan(0);
    expect(figures.reconnects).toBeGreaterThan(0);
    expect(figures.commands).toBeGreaterThan(0);

    expect(Object.keys(figures.processes)).toEqual(['coordinator', 'runtime-1', 'runtime-2']);
    for (const [name, p] of Object.entries(figures.processes)) {
      expect(p.rssMiB.max, name).toBeGreaterThan(0);
      expect(p.rssMiB.slopePerHour, name).not.toBeNull();
      expect(p.outsideHeapSlopePerHour, name).not.toBeNull();
      expect(p.fds.max, name).toBeGreaterThan(0);
      // Before the churn, halfway, after it.
      expect(p.fds.atQuietPoints.length, name).toBeGreaterThanOrEqual(3);
      expect(p.fds.quietGrowth!, `${name}: fds at quiet points ${p.fds.atQuietPoints.join(' ')}`).toBeLessThanOrEqual(
        THRESHOLDS.maxQuietFdGrowth,
      );
    }
    expect(figures.emitP99Ms.windows.length).toBeGreaterThanOrEqual(2);
    expect(figures.emitP99Ms.first).toBeGreaterThan(0);
    expect(figures.emitP99Ms.last).toBeGreaterThan(0);
    expect(figures.emitP99Ms.median).toBeGreaterThan(0);
  }, 60_000);
});
