/**
 * Statistics and machine facts shared by the benchmark scripts (bench/*.ts).
 */

import { readFileSync } from 'node:fs';
import os from 'node:os';

export interface Summary {
  n: number;
  min: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
}

/** Nearest-rank percentiles, in the unit of the input; every figure is NaN when there are no values. */
export function summarise(values: readonly number[]): Summary {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return { n: 0, min: NaN, p50: NaN, p90: NaN, p99: NaN, max: NaN, mean: NaN };
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
  return {
    n: sorted.length,
    min: sorted[0]!,
    p50: at(0.5),
    p90: at(0.9),
    p99: at(0.99),
    max: sorted[sorted.length - 1]!,
    mean: sorted.reduce((a, b) => a + b, 0) / sorted.length,
  };
}

export function median(values: readonly number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** What the figures were measured on. */
export function machine(): Record<string, unknown> {
  const cpuinfo = readFileSync('/proc/cpuinfo', 'utf8');
  return {
    nproc: os.availableParallelism(),
    cpu: /^model name\s*:\s*(.*)$/m.exec(cpuinfo)?.[1] ?? os.cpus()[0]?.model,
    memGiB: +(os.totalmem() / 2 ** 30).toFixed(1),
    node: process.version,
    kernel: os.release(),
  };
}

export function loadavg(): string {
  return readFileSync('/proc/loadavg', 'utf8').trim();
}

/** Whole-machine CPU busy time (all cores, in clock ticks), to show how much else was running. */
export function systemCpu(): { busy: number; total: number } {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const idle = fields[3]! + (fields[4] ?? 0);
  const total = fields.reduce((a, b) => a + b, 0);
  return { busy: total - idle, total };
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
