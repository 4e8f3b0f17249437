/**
 * What a long run watches of a process from outside it (Linux /proc), and of a runtime through its
 * Prometheus /metrics: memory, open descriptors, the emit → send latency histogram and the session
 * gauges. Reading from outside means the figures include everything the process holds (native
 * encoders, wrtc, SQLite), which its own `process.memoryUsage()` would not split out.
 */

import { readdirSync, readFileSync } from 'node:fs';
import { systemCpu } from './measure.ts';

const MIB = 2 ** 20;
/** /proc's CPU times are in clock ticks: USER_HZ = 100 on Linux. */
const CLOCK_TICK_MS = 10;

/** Resident memory (VmRSS) in MiB. */
export function rssMiB(pid: number): number {
  const match = /^VmRSS:\s+(\d+)\s+kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!match) throw new Error(`no VmRSS in /proc/${pid}/status`);
  return (Number(match[1]) * 1024) / MIB;
}

/** Open file descriptors (sockets, pipes, files, eventfds...). */
export function openFds(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

/** A cumulative Prometheus histogram, summed over its label sets: upper bounds (ascending, +Inf last) and counts. */
export interface CumulativeHistogram {
  readonly bounds: readonly number[];
  readonly counts: readonly number[];
}

export interface RuntimeMetrics {
  readonly sessions: number;
  readonly connections: number;
  /** `arclight_video_emit_to_send_seconds`, all tracks together. */
  readonly emitToSend: CumulativeHistogram;
  /** The V8 heap in use (`arclight_process_nodejs_heap_size_used_bytes`), MiB. */
  readonly heapUsedMiB: number;
  /** The V8 heap committed (`arclight_process_nodejs_heap_size_total_bytes`), MiB: in use, garbage and spare young-generation room. */
  readonly heapTotalMiB: number;
}

const SAMPLE_LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})?\s+(\S+)$/;

/** Sums a histogram's `_bucket` lines over every label set but `le`. */
export function histogramFromText(text: string, name: string): CumulativeHistogram {
  const byBound = new Map<number, number>();
  for (const line of text.split('\n')) {
    const match = SAMPLE_LINE.exec(line.trim());
    if (!match || match[1] !== `${name}_bucket`) continue;
    const le = /(?:^|,)le="([^"]+)"/.exec(match[2] ?? '')?.[1];
    if (le === undefined) continue;
    const bound = le === '+Inf' ? Infinity : Number(le);
    byBound.set(bound, (byBound.get(bound) ?? 0) + Number(match[3]));
  }
  const bounds = [...byBound.keys()].sort((a, b) => a - b);
  return { bounds, counts: bounds.map((b) => byBound.get(b)!) };
}

/** A gauge or counter without labels (or the sum over its label sets); 0 when absent. */
export function valueFromText(text: string, name: string): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    const match = SAMPLE_LINE.exec(line.trim());
    if (match && match[1] === name) sum += Number(match[3]);
  }
  return sum;
}

export async function fetchRuntimeMetrics(runtimeUrl: string): Promise<RuntimeMetrics> {
  const response = await fetch(`${runtimeUrl}/metrics`, { signal: AbortSignal.timeout(5_000) });
  if (!response.ok) throw new Error(`GET ${runtimeUrl}/metrics: ${response.status}`);
  const text = await response.text();
  return {
    sessions: valueFromText(text, 'arclight_sessions'),
    connections: valueFromText(text, 'arclight_connections'),
    emitToSend: histogramFromText(text, 'arclight_video_emit_to_send_seconds'),
    heapUsedMiB: valueFromText(text, 'arclight_process_nodejs_heap_size_used_bytes') / MIB,
    heapTotalMiB: valueFromText(text, 'arclight_process_nodejs_heap_size_total_bytes') / MIB,
  };
}

/** The coordinator's V8 heap in use and committed (`arclight_coordinator_nodejs_heap_size_{used,total}_bytes`), MiB. */
export async function fetchCoordinatorHeap(coordinatorUrl: string): Promise<{ readonly usedMiB: number; readonly totalMiB: number }> {
  const response = await fetch(`${coordinatorUrl}/metrics`, { signal: AbortSignal.timeout(5_000) });
  if (!response.ok) throw new Error(`GET ${coordinatorUrl}/metrics: ${response.status}`);
  const text = await response.text();
  return {
    usedMiB: valueFromText(text, 'arclight_coordinator_nodejs_heap_size_used_bytes') / MIB,
    totalMiB: valueFromText(text, 'arclight_coordinator_nodejs_heap_size_total_bytes') / MIB,
  };
}

/** Bucket-wise sum of histograms with the same bounds (several runtimes' views as one). */
export function addHistograms(histograms: readonly CumulativeHistogram[]): CumulativeHistogram {
  const first = histograms[0];
  if (!first) return { bounds: [], counts: [] };
  return { bounds: first.bounds, counts: first.bounds.map((_, i) => histograms.reduce((sum, h) => sum + (h.counts[i] ?? 0), 0)) };
}

/** What was observed between two readings of the same cumulative histogram. */
export function histogramDelta(later: CumulativeHistogram, earlier: CumulativeHistogram | undefined): CumulativeHistogram {
  if (!earlier) return later;
  return { bounds: later.bounds, counts: later.counts.map((count, i) => count - (earlier.counts[i] ?? 0)) };
}

/**
 * The q-quantile of a cumulative histogram, interpolated linearly inside its bucket (as
 * Prometheus' histogram_quantile does); the highest finite bound when it falls in +Inf;
 * undefined when the histogram holds no observation.
 */
export function histogramQuantile(histogram: CumulativeHistogram, q: number): number | undefined {
  const total = histogram.counts[histogram.counts.length - 1] ?? 0;
  if (total <= 0) return undefined;
  const rank = q * total;
  for (let i = 0; i < histogram.bounds.length; i++) {
    const count = histogram.counts[i]!;
    if (count < rank) continue;
    const upper = histogram.bounds[i]!;
    const lower = i === 0 ? 0 : histogram.bounds[i - 1]!;
    if (upper === Infinity) return lower;
    const below = i === 0 ? 0 : histogram.counts[i - 1]!;
    return count === below ? upper : lower + ((upper - lower) * (rank - below)) / (count - below);
  }
  return histogram.bounds[histogram.bounds.length - 2];
}

/** A /proc/<pid>[/task/<tid>]/stat file's thread name and CPU time (user + system), ms. */
function statTimes(path: string): { comm: string; ms: number } | undefined {
  try {
    const stat = readFileSync(path, 'utf8');
    const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { comm, ms: (Number(fields[11]) + Number(fields[12])) * CLOCK_TICK_MS };
  } catch {
    return undefined; // the thread (or process) ended between listing and reading
  }
}

/** A process's CPU time, whole and per thread, and the machine's, at one moment. */
export interface CpuSnapshot {
  readonly at: number;
  readonly processMs: number;
  /** Per thread id: name (the main thread as `main (JS)`) and CPU ms. */
  readonly threads: ReadonlyMap<string, { readonly comm: string; readonly ms: number }>;
  readonly system: { readonly busy: number; readonly total: number };
}

/** Reads `pid`'s CPU time from /proc; two snapshots make a window (the benches' `cpuBetween`). */
export function cpuSnapshot(pid: number): CpuSnapshot {
  const threads = new Map<string, { comm: string; ms: number }>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    const t = statTimes(`/proc/${pid}/task/${tid}/stat`);
    if (t) threads.set(tid, { comm: tid === String(pid) ? 'main (JS)' : t.comm, ms: t.ms });
  }
  return { at: performance.now(), processMs: statTimes(`/proc/${pid}/stat`)?.ms ?? NaN, threads, system: systemCpu() };
}
