/**
 * A soak run's readings turned into the figures it is judged by — memory slope, descriptors at
 * quiet points, emit → send p99 per window, session counts — the thresholds that judge them, and
 * the text the script prints.
 */

import { median } from './measure.ts';
import { histogramDelta, histogramQuantile, type CumulativeHistogram } from './process-probe.ts';
import type { ChurnCounters, SoakFailure } from './virtual-user.ts';

export interface ProcessReading {
  readonly rssMiB: number;
  readonly fds: number;
  /** V8 heap in use, from the process's /metrics (Node's `nodejs_heap_size_used_bytes`), when it could be read. */
  readonly heapUsedMiB?: number;
  /** V8 heap committed (`nodejs_heap_size_total_bytes`), read with `heapUsedMiB`. */
  readonly heapTotalMiB?: number;
}

/** One reading of every watched process (`coordinator`, `runtime-1`, ...) and of the runtimes' metrics. */
export interface SoakSample {
  /** Seconds since the churn started (negative: before it). */
  readonly atSeconds: number;
  readonly processes: Readonly<Record<string, ProcessReading>>;
  /** `arclight_sessions` / `arclight_connections`, summed over the runtimes. */
  readonly openSessions: number;
  readonly connections: number;
  /** `arclight_video_emit_to_send_seconds`, cumulative, summed over the runtimes. */
  readonly emitToSend: CumulativeHistogram;
}

export interface SoakReadings {
  /** Every `sampleEverySeconds` while the churn ran. */
  readonly samples: readonly SoakSample[];
  /** Taken with no session open: before the churn, at each pause, after the end. */
  readonly quietPoints: readonly SoakSample[];
  readonly counters: ChurnCounters;
  /** Readings that could not be taken (a process gone, /metrics not answering). */
  readonly samplingErrors: readonly string[];
}

export interface SoakSettings {
  readonly minutes: number;
  readonly users: number;
  readonly watchSeconds: readonly [number, number];
  readonly sampleEverySeconds: number;
  readonly windowSeconds: number;
  readonly quietEverySeconds: number;
  /** Share of the run left out of the memory slope (start-up, JIT, allocator pools filling). */
  readonly warmupFraction: number;
}

export interface ProcessFigures {
  readonly rssMiB: { readonly start: number; readonly end: number; readonly max: number; readonly slopePerHour: number | null };
  /**
   * Least-squares slope of RSS minus the V8 heap committed, after the warm-up, MiB/h: the growth
   * that V8's own sizing of its heap (its young generation doubling up to its maximum, for one)
   * does not explain. Printed, not judged. Null where the heap could not be read.
   */
  readonly outsideHeapSlopePerHour: number | null;
  readonly fds: {
    readonly start: number;
    readonly end: number;
    readonly max: number;
    readonly atQuietPoints: readonly number[];
    /**
     * Last quiet point − the first after sessions ran (the one before any session misses what is
     * opened on first use and kept: the coordinator's pooled keep-alive sockets to each runtime);
     * last − first with only two.
     */
    readonly quietGrowth: number | null;
  };
}

export interface EmitWindow {
  readonly fromSeconds: number;
  readonly toSeconds: number;
  readonly frames: number;
  /** The median beside the p99: tells a tail that drifts from a machine that got slower overall. */
  readonly p50Ms: number | null;
  readonly p99Ms: number | null;
  /** The p99 fell in the +Inf bucket: p99Ms is the top bound (1 s), the real value is above it. */
  readonly p99AboveTopBucket: boolean;
}

export interface SoakFigures {
  readonly settings: SoakSettings;
  readonly churnSeconds: number;
  readonly warmupSeconds: number;
  readonly sessions: number;
  readonly attempts: number;
  readonly reconnects: number;
  readonly commands: number;
  readonly failures: readonly SoakFailure[];
  readonly failureRate: number;
  readonly samplingErrors: readonly string[];
  readonly processes: Readonly<Record<string, ProcessFigures>>;
  readonly emitP99Ms: {
    readonly windows: readonly EmitWindow[];
    readonly first: number | null;
    readonly last: number | null;
    readonly median: number | null;
    readonly max: number | null;
  };
  readonly quietPoints: readonly ProcessesAt[];
  /** Every sample (for plotting), without the histograms. */
  readonly series: readonly (ProcessesAt & { readonly openSessions: number; readonly connections: number })[];
}

export interface ProcessesAt {
  readonly atSeconds: number;
  readonly fds: Readonly<Record<string, number>>;
  readonly rssMiB: Readonly<Record<string, number>>;
  /** For the processes whose heap could be read. */
  readonly heapUsedMiB: Readonly<Record<string, number>>;
  readonly heapTotalMiB: Readonly<Record<string, number>>;
}

function processesAt(sample: SoakSample): ProcessesAt {
  return {
    atSeconds: round(sample.atSeconds, 1),
    fds: Object.fromEntries(Object.entries(sample.processes).map(([name, r]) => [name, r.fds])),
    rssMiB: Object.fromEntries(Object.entries(sample.processes).map(([name, r]) => [name, round(r.rssMiB, 1)])),
    heapUsedMiB: Object.fromEntries(
      Object.entries(sample.processes).flatMap(([name, r]) => (r.heapUsedMiB === undefined ? [] : [[name, round(r.heapUsedMiB, 1)]])),
    ),
    heapTotalMiB: Object.fromEntries(
      Object.entries(sample.processes).flatMap(([name, r]) => (r.heapTotalMiB === undefined ? [] : [[name, round(r.heapTotalMiB, 1)]])),
    ),
  };
}

/**
 * When a run fails (bench/soak.ts exits 1). Growth of memory is judged only on runs long enough
 * for a slope to mean something; the rest on every run.
 */
export const THRESHOLDS = {
  /** Failed sessions over sessions attempted. */
  maxFailureRate: 0.01,
  /** Least-squares RSS slope after the warm-up, any process, MiB per hour. */
  maxRssSlopeMiBPerHour: 20,
  /** The slope is judged only when the samples after the warm-up span this long. */
  minSlopeSpanMinutes: 30,
  /** Descriptors at the last quiet point over the first, any process. */
  maxQuietFdGrowth: 4,
  /**
   * bench/coordinator-soak.ts --heap-check: growth of the heap left after a forced GC, between
   * the quiet points after the warm-up, per session run meanwhile. Judged on runs longer than
   * the tokens' lifetime (so caches of live tokens have reached their steady size).
   */
  maxHeapBytesPerSession: 256,
  /** The last window's p99 may exceed the median window's by this factor, or by `p99SlackMs`, whichever is larger. */
  maxP99Factor: 2,
  p99SlackMs: 10,
  /** p99 drift is judged with at least this many windows that saw frames. */
  minP99Windows: 3,
} as const;

/** Least-squares slope of y over x; null with fewer than two distinct x. */
export function leastSquaresSlope(points: readonly (readonly [number, number])[]): number | null {
  if (points.length < 2) return null;
  const meanX = points.reduce((s, [x]) => s + x, 0) / points.length;
  const meanY = points.reduce((s, [, y]) => s + y, 0) / points.length;
  let sxx = 0;
  let sxy = 0;
  for (const [x, y] of points) {
    sxx += (x - meanX) ** 2;
    sxy += (x - meanX) * (y - meanY);
  }
  return sxx === 0 ? null : sxy / sxx;
}

const last = <T>(items: readonly T[]): T | undefined => items[items.length - 1];

/** A quantile in ms (null without observations), and whether it lies past the top finite bound (then `ms` is that bound). */
export function quantileMs(histogram: CumulativeHistogram, q: number): { ms: number | null; aboveTopBucket: boolean } {
  const seconds = histogramQuantile(histogram, q);
  const total = last(histogram.counts) ?? 0;
  const belowInf = histogram.counts[histogram.counts.length - 2] ?? 0;
  return { ms: seconds === undefined ? null : seconds * 1000, aboveTopBucket: total > 0 && belowInf < q * total };
}

/**
 * emit → send p50 / p99 over consecutive windows of `windowSeconds` from the churn's start. A
 * tail shorter than half a window (the samples after the deadline) joins the window before it,
 * so the "last window" is never a few seconds' worth.
 */
export function emitWindows(samples: readonly SoakSample[], windowSeconds: number): EmitWindow[] {
  const windows: EmitWindow[] = [];
  const end = last(samples)?.atSeconds ?? 0;
  let before: CumulativeHistogram | undefined;
  for (let from = 0; from < end; from += windowSeconds) {
    const short = end - (from + windowSeconds) < windowSeconds / 2;
    const to = short ? end : from + windowSeconds;
    const atEnd = last(samples.filter((s) => s.atSeconds <= to + 1e-9));
    if (!atEnd) continue;
    const delta = histogramDelta(atEnd.emitToSend, before);
    windows.push({
      fromSeconds: from,
      toSeconds: to,
      frames: last(delta.counts) ?? 0,
      p50Ms: quantileMs(delta, 0.5).ms,
      p99Ms: quantileMs(delta, 0.99).ms,
      p99AboveTopBucket: quantileMs(delta, 0.99).aboveTopBucket,
    });
    before = atEnd.emitToSend;
    if (short) break;
  }
  return windows;
}

function quietGrowth(atQuiet: readonly number[]): number | null {
  if (atQuiet.length < 2) return null;
  return last(atQuiet)! - atQuiet[atQuiet.length >= 3 ? 1 : 0]!;
}

export function soakFigures(readings: SoakReadings, settings: SoakSettings): SoakFigures {
  const { samples, quietPoints, counters } = readings;
  const churnSeconds = last(samples)?.atSeconds ?? 0;
  const warmupSeconds = churnSeconds * settings.warmupFraction;
  const names = Object.keys(samples[0]?.processes ?? quietPoints[0]?.processes ?? {});
  const processes: Record<string, ProcessFigures> = {};
  for (const name of names) {
    const readingsOf = samples.flatMap((s) => (s.processes[name] ? [{ at: s.atSeconds, ...s.processes[name] }] : []));
    const rss = readingsOf.map((r) => r.rssMiB);
    const fds = readingsOf.map((r) => r.fds);
    const afterWarmup = readingsOf.filter((r) => r.at >= warmupSeconds);
    const slopePerSecond = leastSquaresSlope(afterWarmup.map((r) => [r.at, r.rssMiB] as const));
    const withHeap = afterWarmup.flatMap((r) => (r.heapTotalMiB === undefined ? [] : [[r.at, r.rssMiB - r.heapTotalMiB] as const]));
    const outsideSlopePerSecond = withHeap.length === afterWarmup.length ? leastSquaresSlope(withHeap) : null;
    const atQuiet = quietPoints.flatMap((q) => (q.processes[name] ? [q.processes[name].fds] : []));
    processes[name] = {
      rssMiB: {
        start: rss[0] ?? NaN,
        end: last(rss) ?? NaN,
        max: Math.max(...rss),
        slopePerHour: slopePerSecond === null ? null : slopePerSecond * 3600,
      },
      outsideHeapSlopePerHour: outsideSlopePerSecond === null ? null : outsideSlopePerSecond * 3600,
      fds: {
        start: fds[0] ?? NaN,
        end: last(fds) ?? NaN,
        max: Math.max(...fds),
        atQuietPoints: atQuiet,
        quietGrowth: quietGrowth(atQuiet),
      },
    };
  }
  const windows = emitWindows(samples, settings.windowSeconds);
  const p99s = windows.flatMap((w) => (w.p99Ms === null ? [] : [w.p99Ms]));
  return {
    settings,
    churnSeconds,
    warmupSeconds,
    sessions: counters.sessions,
    attempts: counters.attempts,
    reconnects: counters.reconnects,
    commands: counters.commands,
    failures: counters.failures,
    failureRate: counters.attempts === 0 ? 0 : counters.failures.length / counters.attempts,
    samplingErrors: readings.samplingErrors,
    processes,
    emitP99Ms: {
      windows,
      first: p99s[0] ?? null,
      last: last(p99s) ?? null,
      median: p99s.length > 0 ? median(p99s) : null,
      max: p99s.length > 0 ? Math.max(...p99s) : null,
    },
    quietPoints: quietPoints.map(processesAt),
    series: samples.map((s) => ({ ...processesAt(s), openSessions: s.openSessions, connections: s.connections })),
  };
}

/** Why the run fails; empty when it passes. */
export function thresholdsCrossed(figures: SoakFigures): string[] {
  const reasons: string[] = [];
  if (figures.attempts === 0) reasons.push('no session was attempted');
  if (figures.failureRate > THRESHOLDS.maxFailureRate) {
    reasons.push(
      `${figures.failures.length} of ${figures.attempts} sessions failed (${pct(figures.failureRate)} > ${pct(THRESHOLDS.maxFailureRate)})`,
    );
  }
  if (figures.samplingErrors.length > 0)
    reasons.push(`${figures.samplingErrors.length} readings failed (a process gone?): ${figures.samplingErrors[0]}`);
  const slopeJudged = figures.churnSeconds - figures.warmupSeconds >= THRESHOLDS.minSlopeSpanMinutes * 60;
  for (const [name, p] of Object.entries(figures.processes)) {
    if (slopeJudged && p.rssMiB.slopePerHour !== null && p.rssMiB.slopePerHour > THRESHOLDS.maxRssSlopeMiBPerHour) {
      reasons.push(`${name}: RSS grows ${p.rssMiB.slopePerHour.toFixed(1)} MiB/h (> ${THRESHOLDS.maxRssSlopeMiBPerHour})`);
    }
    if (p.fds.quietGrowth !== null && p.fds.quietGrowth > THRESHOLDS.maxQuietFdGrowth) {
      reasons.push(
        `${name}: ${p.fds.quietGrowth} more descriptors at the last quiet point than at the first (> ${THRESHOLDS.maxQuietFdGrowth})`,
      );
    }
  }
  const { windows, last: lastP99, median: medianP99 } = figures.emitP99Ms;
  if (windows.filter((w) => w.p99Ms !== null).length >= THRESHOLDS.minP99Windows && lastP99 !== null && medianP99 !== null) {
    const limit = Math.max(medianP99 * THRESHOLDS.maxP99Factor, medianP99 + THRESHOLDS.p99SlackMs);
    if (lastP99 > limit)
      reasons.push(
        `emit → send p99 of the last window ${lastP99.toFixed(1)} ms > ${limit.toFixed(1)} ms (median window ${medianP99.toFixed(1)} ms)`,
      );
  }
  return reasons;
}

const round = (value: number, digits: number): number => Number(value.toFixed(digits));
const pct = (share: number): string => `${(share * 100).toFixed(2)} %`;
const ms = (value: number | null): string => (value === null ? '–' : value.toFixed(1));
const minutes = (seconds: number): string => `${(seconds / 60).toFixed(1)} min`;

/** The compact line printed every window while the run goes on. */
export function progressLine(
  sample: SoakSample,
  counters: ChurnCounters,
  windowP99: { ms: number | null; aboveTopBucket: boolean },
): string {
  const rss = Object.entries(sample.processes)
    .map(([name, r]) => `${name} ${r.rssMiB.toFixed(0)}`)
    .join(' ');
  const fds = Object.entries(sample.processes)
    .map(([name, r]) => `${name} ${r.fds}`)
    .join(' ');
  return (
    `[${minutes(sample.atSeconds).padStart(8)}] sessions ${counters.sessions}, reconnects ${counters.reconnects}, failures ${counters.failures.length}, open ${sample.openSessions}` +
    ` | RSS MiB: ${rss} | fds: ${fds} | emit→send p99 ${windowP99.aboveTopBucket ? '>' : ''}${ms(windowP99.ms)} ms`
  );
}

/** The summary printed at the end. */
export function formatFigures(figures: SoakFigures, reasons: readonly string[]): string {
  const s = figures.settings;
  const lines = [
    `soak: ${minutes(figures.churnSeconds)} of churn (planned ${s.minutes} min), ${s.users} users on ${s.users} hosted runtimes (one slot each) + 1 coordinator (SQLite)`,
    `sessions ${figures.sessions} ended cleanly of ${figures.attempts} attempted, reconnects ${figures.reconnects}, commands ${figures.commands}, failures ${figures.failures.length} (${pct(figures.failureRate)})`,
    '',
    `${'process'.padEnd(12)} ${'RSS MiB start / end / max'.padEnd(27)} ${`slope MiB/h (after ${minutes(figures.warmupSeconds)})`.padEnd(30)} ${'fds start / end / max'.padEnd(22)} fds at quiet points (growth)`,
  ];
  for (const [name, p] of Object.entries(figures.processes)) {
    lines.push(
      `${name.padEnd(12)} ${`${p.rssMiB.start.toFixed(1)} / ${p.rssMiB.end.toFixed(1)} / ${p.rssMiB.max.toFixed(1)}`.padEnd(27)} ` +
        `${(p.rssMiB.slopePerHour === null ? '–' : p.rssMiB.slopePerHour.toFixed(1)).padEnd(30)} ` +
        `${`${p.fds.start} / ${p.fds.end} / ${p.fds.max}`.padEnd(22)} ${p.fds.atQuietPoints.join(' ')} (${p.fds.quietGrowth === null ? '–' : (p.fds.quietGrowth >= 0 ? '+' : '') + p.fds.quietGrowth})`,
    );
  }
  // Heap in use at the quiet points: a live heap that keeps growing is a leak; RSS alone may be
  // memory the allocator has not returned.
  const heaps = Object.keys(figures.processes)
    .map((name) => {
      const values = figures.quietPoints.map((q) => q.heapUsedMiB[name]).filter((v): v is number => v !== undefined);
      return values.length === 0 ? undefined : `${name} ${values.map((v) => v.toFixed(1)).join(' ')}`;
    })
    .filter((line): line is string => line !== undefined);
  if (heaps.length > 0) lines.push('', 'heap used MiB at quiet points:', ...heaps.map((line) => `  ${line}`));
  const committed = Object.keys(figures.processes)
    .map((name) => {
      const values = figures.quietPoints.map((q) => q.heapTotalMiB[name]).filter((v): v is number => v !== undefined);
      return values.length === 0 ? undefined : `${name} ${values.map((v) => v.toFixed(1)).join(' ')}`;
    })
    .filter((line): line is string => line !== undefined);
  if (committed.length > 0) lines.push('heap committed MiB at quiet points:', ...committed.map((line) => `  ${line}`));
  const outside = Object.entries(figures.processes).flatMap(([name, p]) =>
    p.outsideHeapSlopePerHour === null ? [] : [`${name} ${p.outsideHeapSlopePerHour.toFixed(1)}`],
  );
  if (outside.length > 0)
    lines.push(`RSS outside the V8 heap, slope MiB/h after ${minutes(figures.warmupSeconds)} (not judged): ${outside.join(', ')}`);
  const e = figures.emitP99Ms;
  lines.push(
    '',
    `emit → send p99 per ${minutes(s.windowSeconds)} window, ms: first ${ms(e.first)}, last ${ms(e.last)}, median ${ms(e.median)}, max ${ms(e.max)}` +
      `  (${e.windows.map((w) => (w.p99AboveTopBucket ? '>' : '') + ms(w.p99Ms)).join(' ')}${e.windows.some((w) => w.p99AboveTopBucket) ? "; > : above the histogram's top bucket" : ''})`,
    `emit → send p50 per window, ms: ${e.windows.map((w) => ms(w.p50Ms)).join(' ')}`,
  );
  if (figures.failures.length > 0) {
    lines.push('', 'failures:');
    for (const f of figures.failures.slice(0, 20)) lines.push(`  +${f.atSeconds.toFixed(0)} s user ${f.user} ${f.phase}: ${f.error}`);
    if (figures.failures.length > 20) lines.push(`  ... ${figures.failures.length - 20} more (all in --json)`);
  }
  if (figures.samplingErrors.length > 0) lines.push('', `readings that failed: ${figures.samplingErrors.slice(0, 5).join('; ')}`);
  const slopeJudged = figures.churnSeconds - figures.warmupSeconds >= THRESHOLDS.minSlopeSpanMinutes * 60;
  lines.push(
    '',
    reasons.length === 0
      ? `PASS${slopeJudged ? '' : ` (RSS slope not judged: under ${THRESHOLDS.minSlopeSpanMinutes} min after the warm-up)`}`
      : `FAIL:\n  ${reasons.join('\n  ')}`,
  );
  return lines.join('\n');
}
