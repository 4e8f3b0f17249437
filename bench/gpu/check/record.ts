/**
 * Where the GPU check's figures go: one JSON object per line in `gpu-check.jsonl` (written as each
 * figure is taken, so a run cut short still leaves what it measured), a progress line on stdout for
 * each (the device tool returns only the tail of stdout), and at the end `gpu-check.md`, a short
 * table per part.
 */
import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const CHECK_PARTS = ['build', 'device', 'nvenc', 'frames', 'stream', 'onnx'] as const;
export type CheckPart = (typeof CHECK_PARTS)[number];

/**
 * `ok`: measured / worked. `failed`: it should have worked and did not (the message says why).
 * `unavailable`: this machine cannot do it, and that is a finding (no NVENC engine, no CUDA
 * provider libraries). `skipped`: not asked for, or nothing to run it on.
 */
export type CheckStatus = 'ok' | 'failed' | 'unavailable' | 'skipped';

/** `fake`: the test suite's fake NVIDIA driver (--dry); nothing it reports is a GPU figure. */
export type DriverKind = 'real' | 'fake';

/** A figure's value: what JSON carries. */
export type FigureValue = string | number | boolean | null | readonly FigureValue[] | { readonly [key: string]: FigureValue };
export type Figures = Readonly<Record<string, FigureValue | undefined>>;
/** A group of figures inside one record, e.g. `{ p50, p90, min, max }`. */
export type FigureGroup = { readonly [key: string]: FigureValue };

export interface CheckRecord {
  readonly part: CheckPart | 'run';
  readonly step: string;
  readonly status: CheckStatus;
  readonly driver: DriverKind;
  /** Seconds since the run started. */
  readonly at: number;
  readonly [figure: string]: FigureValue | undefined;
}

/** Strings longer than this are cut in the markdown table (the JSON keeps them whole). */
const MD_CELL_CHARS = 240;

export class CheckReport {
  readonly dir: string;
  readonly driver: DriverKind;
  readonly jsonlPath: string;
  readonly mdPath: string;
  readonly #records: CheckRecord[] = [];
  readonly #started = performance.now();

  constructor(dir: string, driver: DriverKind) {
    this.dir = dir;
    this.driver = driver;
    mkdirSync(dir, { recursive: true });
    this.jsonlPath = join(dir, 'gpu-check.jsonl');
    this.mdPath = join(dir, 'gpu-check.md');
    writeFileSync(this.jsonlPath, '');
  }

  /** Seconds since the run started. */
  elapsed(): number {
    return (performance.now() - this.#started) / 1000;
  }

  record(part: CheckRecord['part'], step: string, status: CheckStatus, figures: Figures = {}): CheckRecord {
    const defined = Object.fromEntries(Object.entries(figures).filter(([, v]) => v !== undefined)) as Record<string, FigureValue>;
    const record: CheckRecord = { part, step, status, driver: this.driver, at: round(this.elapsed(), 1), ...defined };
    this.#records.push(record);
    appendFileSync(this.jsonlPath, `${JSON.stringify(record)}\n`);
    this.progress(`${part} / ${step}: ${status.toUpperCase()}  ${formatFigures(defined, 400)}`);
    return record;
  }

  /** A line on stdout, stamped with the run's elapsed time. */
  progress(line: string): void {
    process.stdout.write(`[gpu-check +${this.elapsed().toFixed(1)}s] ${line}\n`);
  }

  records(): readonly CheckRecord[] {
    return this.#records;
  }

  /** Writes gpu-check.md: a heading per part, one row per record. */
  writeMarkdown(title: string): string {
    const lines = [`# ${title}`, ''];
    const parts = [...new Set(this.#records.map((r) => r.part))];
    for (const part of parts) {
      lines.push(`## ${part}`, '', '| step | status | figures |', '|---|---|---|');
      for (const record of this.#records.filter((r) => r.part === part)) {
        const { part: _p, step, status, driver: _d, at: _a, ...figures } = record;
        lines.push(`| ${escapeCell(step)} | ${status} | ${escapeCell(formatFigures(figures, MD_CELL_CHARS))} |`);
      }
      lines.push('');
    }
    const text = lines.join('\n');
    writeFileSync(this.mdPath, text);
    return text;
  }
}

export function round(value: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

/** `key: value` pairs on one line; long strings cut to `maxString` characters. */
export function formatFigures(figures: Readonly<Record<string, FigureValue | undefined>>, maxString: number): string {
  return Object.entries(figures)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k}: ${formatValue(v!, maxString)}`)
    .join(', ');
}

function formatValue(value: FigureValue, maxString: number): string {
  if (typeof value === 'string') return value.length > maxString ? `${value.slice(0, maxString)}…` : value;
  if (typeof value === 'number') return Number.isInteger(value) ? String(value) : String(round(value, 3));
  const text = JSON.stringify(value);
  return text.length > maxString ? `${text.slice(0, maxString)}…` : text;
}

function escapeCell(text: string): string {
  return text.replace(/\|/g, '\\|').replace(/\n/g, ' ');
}

/** An error's message, for a record (the stack stays out: the step says where). */
export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
