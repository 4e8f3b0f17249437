/**
 * What the coordinator benchmarks share: a coordinator (or a stand-in) in a child process, its CPU
 * time from /proc, and closed-loop HTTP load with latency percentiles and server CPU per request —
 * from this process, or from several load processes (`LoadProcesses`) when one cannot keep a
 * multi-process coordinator busy.
 *
 * Child scripts run as `node --conditions=source --import tsx <script.ts>` from the repository
 * root. With `ARCLIGHT_BENCH_BUNDLE_DIR` set (a machine without node_modules, where the bench
 * itself runs from an esbuild bundle: see scripts/bundle-coordinator-bench.mjs), the script
 * `<dir>/<name>.ts` (or `.js`) runs as the bundle `$ARCLIGHT_BENCH_BUNDLE_DIR/<name>.mjs` instead,
 * from the current directory.
 */

import { fork, spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { summarise, type Summary } from './measure.ts';

const BUNDLE_DIR = process.env['ARCLIGHT_BENCH_BUNDLE_DIR'] ? resolve(process.env['ARCLIGHT_BENCH_BUNDLE_DIR']) : undefined;
const ROOT = BUNDLE_DIR ? process.cwd() : fileURLToPath(new URL('../../', import.meta.url));

/** How to run a script of this repository (a path from the root): node's options and the file. */
function nodeScript(script: string): { execArgv: string[]; file: string } {
  if (BUNDLE_DIR) return { execArgv: [], file: join(BUNDLE_DIR, basename(script).replace(/\.[cm]?[jt]s$/, '.mjs')) };
  return { execArgv: ['--conditions=source', '--import', 'tsx'], file: script };
}

/** CPU seconds (user + system) a process and its live children have used so far, from /proc (Linux). */
export function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  let seconds = (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (100/s)
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    for (const child of readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').split(' ').filter(Boolean))
      seconds += cpuSeconds(Number(child));
  }
  return seconds;
}

/** Runs `node --conditions=source --import tsx <args>` from the repository root; resolves with the URL it prints (`listening on <url>`). */
export async function startListeningProcess(
  args: readonly string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ url: string; child: ChildProcess }> {
  const { execArgv, file } = nodeScript(args[0]!);
  const child = spawn(process.execPath, [...execArgv, file, ...args.slice(1)], {
    cwd: ROOT,
    env: { ...process.env, ARCLIGHT_LOG: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`${args.join(' ')} did not start: ${out}`)), 60_000);
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk;
      const match = /listening on (http:\/\/\S+)/.exec(out);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    });
  });
  return { url, child };
}

export interface PhaseResult {
  perSecond: number;
  latencyMs: Summary;
  errors: number;
  /** The server process's CPU time per request, µs: what one server core costs per request. */
  serverCpuMicros: number;
}

/** A request the load sends over and over, as data, so load processes can send it too. */
export interface LoadRequest {
  url: string;
  method: string;
  headers: Record<string, string>;
  body?: string;
  /** A header whose value is taken in turn from `values`, starting at `offset` (e.g. one bearer token per tenant). */
  rotate?: { header: string; values: readonly string[] };
}

/** A function sending `spec` (rotated headers taken in turn from `offset`). */
export function requester(spec: LoadRequest, offset = 0): () => Promise<Response> {
  let turn = offset;
  const { rotate } = spec;
  return () =>
    fetch(spec.url, {
      method: spec.method,
      headers: rotate ? { ...spec.headers, [rotate.header]: rotate.values[turn++ % rotate.values.length]! } : spec.headers,
      ...(spec.body === undefined ? {} : { body: spec.body }),
    });
}

/** `concurrency` loops sending `request` back to back until `until` (performance.now()); latencies (ms) recorded when `record`. */
export async function loopUntil(
  request: () => Promise<Response>,
  concurrency: number,
  until: number,
  record: boolean,
  expectStatus: number,
): Promise<{ latencies: number[]; errors: number }> {
  const latencies: number[] = [];
  let errors = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < until) {
        const t0 = performance.now();
        const response = await request();
        await response.arrayBuffer();
        if (response.status !== expectStatus) errors++;
        if (record) latencies.push(performance.now() - t0);
      }
    }),
  );
  return { latencies, errors };
}

/** `concurrency` loops sending `request` back to back for `seconds` (after a 1 s warm-up). */
export async function closedLoopLoad(
  server: ChildProcess,
  request: () => Promise<Response>,
  options: { seconds: number; concurrency: number; expectStatus?: number },
): Promise<PhaseResult> {
  const expectStatus = options.expectStatus ?? 200;
  await loopUntil(request, options.concurrency, performance.now() + 1000, false, expectStatus);
  const cpuBefore = cpuSeconds(server.pid!);
  const { latencies, errors } = await loopUntil(
    request,
    options.concurrency,
    performance.now() + options.seconds * 1000,
    true,
    expectStatus,
  );
  const serverCpuMicros = ((cpuSeconds(server.pid!) - cpuBefore) / latencies.length) * 1e6;
  return { perSecond: latencies.length / options.seconds, latencyMs: summarise(latencies), errors, serverCpuMicros };
}

/** What the parent sends a load process (bench/support/coordinator-load-child.ts) for one phase. */
export interface LoadJob {
  spec: LoadRequest;
  offset: number;
  concurrency: number;
  expectStatus: number;
  /** Epoch ms (Date.now()) the measured window starts (warm-up before it) and ends. */
  startAt: number;
  endAt: number;
}

/** A load process's answer: its latencies (ms) in the window, and its errors. */
export interface LoadAnswer {
  latencies: Float64Array;
  errors: number;
}

/**
 * `count` load processes that run a phase together: the in-flight requests split between them,
 * one shared measured window (epoch clock), latencies merged, so percentiles are exact.
 */
export class LoadProcesses {
  private constructor(private readonly children: ChildProcess[]) {}

  static async start(count: number): Promise<LoadProcesses> {
    const { execArgv, file } = nodeScript('bench/support/coordinator-load-child.ts');
    const children = await Promise.all(
      Array.from({ length: count }, async () => {
        const child = fork(file, [], { cwd: ROOT, execArgv, serialization: 'advanced', stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
        await new Promise<void>((resolve, reject) => {
          child.once('message', () => resolve());
          child.once('exit', (code) => reject(new Error(`a load process exited with ${code} before it was ready`)));
        });
        return child;
      }),
    );
    return new LoadProcesses(children);
  }

  /** Like closedLoopLoad, from every load process: `options.concurrency` in flight in all. */
  async run(
    server: ChildProcess,
    spec: LoadRequest,
    options: { seconds: number; concurrency: number; expectStatus?: number },
  ): Promise<PhaseResult> {
    const k = this.children.length;
    const startAt = Date.now() + 1000 + 200; // 1 s warm-up, and time for the job to arrive
    const endAt = startAt + options.seconds * 1000;
    const rotations = spec.rotate?.values.length ?? 1;
    const answers = this.children.map((child, i) => {
      const job: LoadJob = {
        spec,
        offset: Math.floor((i * rotations) / k),
        concurrency: Math.floor(options.concurrency / k) + (i < options.concurrency % k ? 1 : 0),
        expectStatus: options.expectStatus ?? 200,
        startAt,
        endAt,
      };
      return new Promise<LoadAnswer>((resolve, reject) => {
        const onExit = (code: number | null) => reject(new Error(`a load process exited with ${code} during a phase`));
        child.once('exit', onExit);
        child.once('message', (answer: LoadAnswer) => {
          child.off('exit', onExit);
          resolve(answer);
        });
        child.send(job);
      });
    });
    const at = (t: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, t - Date.now())));
    await at(startAt);
    const cpuBefore = cpuSeconds(server.pid!);
    await at(endAt);
    const cpuAfter = cpuSeconds(server.pid!);
    const results = await Promise.all(answers);
    const latencies = results.flatMap((r) => Array.from(r.latencies));
    const errors = results.reduce((sum, r) => sum + r.errors, 0);
    return {
      perSecond: latencies.length / options.seconds,
      latencyMs: summarise(latencies),
      errors,
      serverCpuMicros: ((cpuAfter - cpuBefore) / latencies.length) * 1e6,
    };
  }

  close(): void {
    for (const child of this.children) child.kill('SIGKILL');
  }
}
