/**
 * What the coordinator benchmarks share: a coordinator (or a stand-in) in a child process, its CPU
 * time from /proc, and closed-loop HTTP load with latency percentiles and server CPU per request.
 */

import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { summarise, type Summary } from './measure.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** CPU seconds (user + system) a process and its live children have used so far, from /proc (Linux). */
export function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  let seconds = (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (100/s)
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    for (const child of readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').split(' ').filter(Boolean)) seconds += cpuSeconds(Number(child));
  }
  return seconds;
}

/** Runs `node --conditions=source --import tsx <args>` from the repository root; resolves with the URL it prints (`listening on <url>`). */
export async function startListeningProcess(args: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', ...args], {
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

/** `concurrency` loops sending `request` back to back for `seconds` (after a 1 s warm-up). */
export async function closedLoopLoad(
  server: ChildProcess,
  request: () => Promise<Response>,
  options: { seconds: number; concurrency: number; expectStatus?: number },
): Promise<PhaseResult> {
  const expectStatus = options.expectStatus ?? 200;
  const run = async (ms: number, record: boolean) => {
    const latencies: number[] = [];
    let errors = 0;
    const end = performance.now() + ms;
    await Promise.all(
      Array.from({ length: options.concurrency }, async () => {
        while (performance.now() < end) {
          const t0 = performance.now();
          const response = await request();
          await response.arrayBuffer();
          if (response.status !== expectStatus) errors++;
          if (record) latencies.push(performance.now() - t0);
        }
      }),
    );
    return { latencies, errors };
  };
  await run(1000, false);
  const cpuBefore = cpuSeconds(server.pid!);
  const { latencies, errors } = await run(options.seconds * 1000, true);
  const serverCpuMicros = ((cpuSeconds(server.pid!) - cpuBefore) / latencies.length) * 1e6;
  return { perSecond: latencies.length / options.seconds, latencyMs: summarise(latencies), errors, serverCpuMicros };
}
