/** The arithmetic behind the soak's figures: histogram quantiles from bucket deltas, the RSS slope, the verdict. */

import { describe, expect, it } from 'vitest';
import { histogramDelta, histogramFromText, histogramQuantile } from '../../bench/support/process-probe.ts';
import {
  emitWindows,
  formatFigures,
  leastSquaresSlope,
  soakFigures,
  thresholdsCrossed,
  type SoakSample,
} from '../../bench/support/soak-figures.ts';

const METRICS = `# HELP arclight_video_emit_to_send_seconds x
# TYPE arclight_video_emit_to_send_seconds histogram
arclight_video_emit_to_send_seconds_bucket{le="0.01",track="main_video"} 50
arclight_video_emit_to_send_seconds_bucket{le="0.02",track="main_video"} 90
arclight_video_emit_to_send_seconds_bucket{le="0.05",track="main_video"} 100
arclight_video_emit_to_send_seconds_bucket{le="+Inf",track="main_video"} 100
arclight_video_emit_to_send_seconds_bucket{le="0.01",track="other"} 50
arclight_video_emit_to_send_seconds_bucket{le="0.02",track="other"} 50
arclight_video_emit_to_send_seconds_bucket{le="0.05",track="other"} 50
arclight_video_emit_to_send_seconds_bucket{le="+Inf",track="other"} 50
arclight_video_emit_to_send_seconds_sum{track="main_video"} 1.5
arclight_video_emit_to_send_seconds_count{track="main_video"} 100`;

describe('histogram quantiles', () => {
  it('sums label sets per bound and interpolates inside the bucket', () => {
    const histogram = histogramFromText(METRICS, 'arclight_video_emit_to_send_seconds');
    expect(histogram.bounds).toEqual([0.01, 0.02, 0.05, Infinity]);
    expect(histogram.counts).toEqual([100, 140, 150, 150]);
    // rank 75 of 150 lies in the first bucket: 0 + 0.01 × 75/100
    expect(histogramQuantile(histogram, 0.5)).toBeCloseTo(0.0075, 6);
    // rank 148.5: 0.02 + 0.03 × (148.5 − 140) / 10
    expect(histogramQuantile(histogram, 0.99)).toBeCloseTo(0.0455, 6);
  });

  it('reads a window from bucket deltas; the highest finite bound for the +Inf bucket; nothing for an empty window', () => {
    const earlier = { bounds: [0.01, 0.02, Infinity], counts: [10, 10, 10] };
    const later = { bounds: [0.01, 0.02, Infinity], counts: [10, 10, 20] };
    expect(histogramQuantile(histogramDelta(later, earlier), 0.99)).toBe(0.02);
    expect(histogramQuantile(histogramDelta(earlier, earlier), 0.99)).toBeUndefined();
  });
});

describe('soak figures', () => {
  it('least-squares slope', () => {
    expect(
      leastSquaresSlope([
        [0, 1],
        [1, 3],
        [2, 5],
      ]),
    ).toBeCloseTo(2);
    expect(leastSquaresSlope([[0, 1]])).toBeNull();
  });

  it('emit windows take each window from the cumulative readings at its ends', () => {
    const sample = (atSeconds: number, counts: number[]): SoakSample => ({
      atSeconds,
      processes: {},
      openSessions: 0,
      connections: 0,
      emitToSend: { bounds: [0.01, 0.1, Infinity], counts },
    });
    const windows = emitWindows(
      [sample(5, [100, 100, 100]), sample(10, [200, 200, 200]), sample(15, [200, 300, 300]), sample(20, [200, 400, 400])],
      10,
    );
    expect(windows.map((w) => w.frames)).toEqual([200, 200]);
    expect(windows[0]!.p99Ms).toBeCloseTo(9.9);
    expect(windows[1]!.p99Ms).toBeCloseTo(10 + 90 * 0.99);
    expect(windows.map((w) => w.p99AboveTopBucket)).toEqual([false, false]);
    // A tail of a few seconds after the last full window joins it; a p99 past the top bound says so.
    const saturated = emitWindows([sample(10, [0, 100, 100]), sample(12, [0, 100, 200])], 10);
    expect(saturated.map((w) => [w.fromSeconds, w.toSeconds, w.p99Ms, w.p99AboveTopBucket])).toEqual([[0, 12, 100, true]]);
  });

  it('fd growth counts from the first quiet point after sessions ran (the one before misses pooled sockets)', () => {
    const at = (atSeconds: number, fds: number): SoakSample => ({
      atSeconds,
      processes: { coordinator: { rssMiB: 100, fds } },
      openSessions: 0,
      connections: 0,
      emitToSend: { bounds: [Infinity], counts: [0] },
    });
    const settings = {
      minutes: 1,
      users: 1,
      watchSeconds: [1, 2] as const,
      sampleEverySeconds: 10,
      windowSeconds: 30,
      quietEverySeconds: 30,
      warmupFraction: 0.1,
    };
    const counters = { sessions: 1, attempts: 1, reconnects: 0, commands: 0, failures: [] };
    const figures = soakFigures(
      { samples: [at(10, 40), at(20, 41)], quietPoints: [at(-3, 30), at(30, 34), at(60, 35)], counters, samplingErrors: [] },
      settings,
    );
    expect(figures.processes['coordinator']!.fds.atQuietPoints).toEqual([30, 34, 35]);
    expect(figures.processes['coordinator']!.fds.quietGrowth).toBe(1);
  });

  it('separates RSS growth that the committed V8 heap explains from growth outside it', () => {
    // RSS +60 MiB/h, all of it the committed heap growing (V8 sizing its young generation), for
    // the coordinator; for runtime-1, +30 MiB/h with a flat heap; runtime-2's heap was never read.
    const at = (atSeconds: number): SoakSample => {
      const hours = atSeconds / 3600;
      return {
        atSeconds,
        processes: {
          coordinator: { rssMiB: 100 + 60 * hours, fds: 30, heapUsedMiB: 20, heapTotalMiB: 30 + 60 * hours },
          'runtime-1': { rssMiB: 200 + 30 * hours, fds: 30, heapUsedMiB: 20, heapTotalMiB: 40 },
          'runtime-2': { rssMiB: 200, fds: 30 },
        },
        openSessions: 0,
        connections: 0,
        emitToSend: { bounds: [Infinity], counts: [0] },
      };
    };
    const settings = {
      minutes: 60,
      users: 1,
      watchSeconds: [1, 2] as const,
      sampleEverySeconds: 60,
      windowSeconds: 300,
      quietEverySeconds: 300,
      warmupFraction: 0.1,
    };
    const counters = { sessions: 1, attempts: 1, reconnects: 0, commands: 0, failures: [] };
    const samples = Array.from({ length: 61 }, (_, i) => at(i * 60));
    const figures = soakFigures({ samples, quietPoints: [at(0), at(3600)], counters, samplingErrors: [] }, settings);
    expect(figures.processes['coordinator']!.rssMiB.slopePerHour).toBeCloseTo(60);
    expect(figures.processes['coordinator']!.outsideHeapSlopePerHour).toBeCloseTo(0);
    expect(figures.processes['runtime-1']!.outsideHeapSlopePerHour).toBeCloseTo(30);
    expect(figures.processes['runtime-2']!.outsideHeapSlopePerHour).toBeNull();
    expect(figures.quietPoints[1]!.heapTotalMiB).toEqual({ coordinator: 90, 'runtime-1': 40 });
    // Printed, and not judged: the RSS slope alone crosses the threshold.
    expect(formatFigures(figures, thresholdsCrossed(figures))).toContain(
      'RSS outside the V8 heap, slope MiB/h after 6.0 min (not judged): coordinator 0.0, runtime-1 30.0',
    );
    expect(thresholdsCrossed(figures)).toEqual(['coordinator: RSS grows 60.0 MiB/h (> 20)', 'runtime-1: RSS grows 30.0 MiB/h (> 20)']);
  });
});
