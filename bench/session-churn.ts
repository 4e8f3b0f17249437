/**
 * One runtime, many sessions one after another — what a GPU host's runtime sees all day: does a
 * session cost the same CPU and leave memory behind after the tenth session as after the first?
 *
 *   node --expose-gc --conditions=source --import tsx bench/session-churn.ts [--sessions 8] [--seconds 5] [--json out.json]
 *
 * The runtime (`pattern`, 720p30) runs in this process; each session is one Node client (wrtc,
 * VP8, `tone` paused) that connects, streams for `--seconds`, then disconnects (ending the
 * session). Per session: this process's CPU over the window (runtime + the client's JavaScript;
 * wrtc decodes on its own threads, counted too), the number of GC pauses and their total, and —
 * after a forced full GC when `--expose-gc` is given — heap in use, external and ArrayBuffer
 * memory and RSS. A per-session leak shows as ArrayBuffers or heap growing session over session.
 */

import { PerformanceObserver } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { ArclightClient } from '../client/node.ts';
import pattern from '../models/examples/pattern/index.ts';
import { startRuntime } from '../runtime/index.ts';
import { createLogger } from '../server-kit/log.ts';
import { loadavg, sleep } from './support/measure.ts';
import { finishReport, runBench, runInfo } from './support/report.ts';

const { values: args } = parseArgs({
  options: {
    sessions: { type: 'string', default: '8' },
    seconds: { type: 'string', default: '5' },
    json: { type: 'string' },
  },
});
const SESSIONS = Number(args.sessions);
const SECONDS = Number(args.seconds);
const MIB = 2 ** 20;

interface SessionFigures {
  session: number;
  cpuPercent: number;
  gcPauses: number;
  gcMs: number;
  heapMiB: number;
  externalMiB: number;
  arrayBuffersMiB: number;
  rssMiB: number;
}

await runBench('session-churn', async () => {
  const info = runInfo();
  let gcPauses = 0;
  let gcMs = 0;
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      gcPauses++;
      gcMs += entry.duration;
    }
  }).observe({ entryTypes: ['gc'] });
  const forceGc = (globalThis as { gc?: () => void }).gc;
  if (!forceGc) process.stdout.write('(no --expose-gc: memory figures include garbage not yet collected)\n');

  const runtime = await startRuntime({
    model: pattern as never,
    port: 0,
    host: '127.0.0.1',
    ice: { hostAddresses: ['127.0.0.1'] },
    playground: false,
    logger: createLogger({ bench: 'session-churn' }, 'error'),
  });
  const results: SessionFigures[] = [];
  try {
    for (let session = 1; session <= SESSIONS; session++) {
      const client = new ArclightClient({ modelName: 'pattern', local: true, localRuntimeUrl: runtime.url });
      await client.connect();
      client.pauseTrack('tone');
      await sleep(1_000); // the first keyframe and the encoder's start-up
      const cpuBefore = process.cpuUsage();
      const started = performance.now();
      gcPauses = 0;
      gcMs = 0;
      await sleep(SECONDS * 1000);
      const cpu = process.cpuUsage(cpuBefore);
      const wall = performance.now() - started;
      const pauses = gcPauses;
      const pausedMs = gcMs;
      await client.disconnect();
      await sleep(500);
      forceGc?.();
      const memory = process.memoryUsage();
      const figures: SessionFigures = {
        session,
        cpuPercent: ((cpu.user + cpu.system) / 1000 / wall) * 100,
        gcPauses: pauses,
        gcMs: pausedMs,
        heapMiB: memory.heapUsed / MIB,
        externalMiB: memory.external / MIB,
        arrayBuffersMiB: memory.arrayBuffers / MIB,
        rssMiB: memory.rss / MIB,
      };
      results.push(figures);
      process.stdout.write(
        `session ${session}: CPU ${figures.cpuPercent.toFixed(1)}% of a core, GC ${pauses} pauses (${pausedMs.toFixed(0)} ms); ` +
          `after: heap ${figures.heapMiB.toFixed(1)} MiB, external ${figures.externalMiB.toFixed(1)}, ArrayBuffers ${figures.arrayBuffersMiB.toFixed(1)}, RSS ${figures.rssMiB.toFixed(0)}\n`,
      );
    }
  } finally {
    await runtime.close();
  }
  finishReport(info, loadavg(), args.json, { sessions: results });
});
