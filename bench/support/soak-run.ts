/**
 * The soak's core, shared by bench/soak.ts (an hour on demand) and test/soak/soak.test.ts (half a
 * minute in CI): start the hosted stack as processes, let `users` virtual users churn sessions
 * against it, read the processes every `sampleEverySeconds`, pause the churn every
 * `quietEverySeconds` for a quiet reading (no session open), and hand back the readings.
 */

import { ChurnGate } from './churn-gate.ts';
import {
  addHistograms,
  fetchCoordinatorHeap,
  fetchRuntimeMetrics,
  histogramDelta,
  openFds,
  rssMiB,
  type CumulativeHistogram,
} from './process-probe.ts';
import {
  progressLine,
  quantileMs,
  soakFigures,
  type ProcessReading,
  type SoakFigures,
  type SoakSample,
  type SoakSettings,
} from './soak-figures.ts';
import { SOAK_MODEL, startSoakStack, type SoakStack } from './soak-stack.ts';
import { runVirtualUser, type ChurnCounters } from './virtual-user.ts';

/** How long a quiet point waits for every runtime to report no session and no connection. */
const QUIET_TIMEOUT_MS = 20_000;
/** Then this long more, for sockets and encoder threads closed after the gauges dropped. */
const QUIET_SETTLE_MS = 2_000;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export interface SoakRunOptions extends SoakSettings {
  /** Each progress line (one per window) as it is due. */
  readonly onProgress?: (line: string) => void;
}

export async function runSoak(options: SoakRunOptions): Promise<SoakFigures> {
  const stack = await startSoakStack({ runtimes: options.users });
  // Stopped by hand (Ctrl-C, kill): the coordinator and runtimes are this run's children and
  // would otherwise outlive it, streaming to nobody and loading the machine's next run.
  const interrupted = (signal: NodeJS.Signals) => {
    process.stderr.write(`soak: ${signal}; stopping the coordinator and runtimes\n`);
    void stack.stop().finally(() => process.exit(130));
  };
  process.once('SIGINT', interrupted);
  process.once('SIGTERM', interrupted);
  try {
    return await churn(stack, options);
  } finally {
    process.off('SIGINT', interrupted);
    process.off('SIGTERM', interrupted);
    await stack.stop();
  }
}

async function churn(stack: SoakStack, options: SoakRunOptions): Promise<SoakFigures> {
  const pids: Record<string, number> = { coordinator: stack.coordinatorPid };
  stack.runtimes.forEach((runtime, i) => (pids[`runtime-${i + 1}`] = runtime.pid));
  const samplingErrors: string[] = [];
  const counters: ChurnCounters = { sessions: 0, attempts: 0, reconnects: 0, commands: 0, failures: [] };
  let churnStartedAt = Date.now();

  const read = async (): Promise<SoakSample> => {
    const [metrics, coordinatorHeap] = await Promise.all([
      Promise.all(stack.runtimes.map((runtime) => fetchRuntimeMetrics(runtime.url))),
      fetchCoordinatorHeap(stack.coordinatorUrl),
    ]);
    // The V8 heap beside RSS: a live heap that keeps growing is a leak; a committed heap that grows
    // is V8 sizing its generations; RSS growing outside both is native memory or the allocator.
    const heaps: Record<string, { usedMiB: number; totalMiB: number }> = { coordinator: coordinatorHeap };
    metrics.forEach((m, i) => (heaps[`runtime-${i + 1}`] = { usedMiB: m.heapUsedMiB, totalMiB: m.heapTotalMiB }));
    const processes: Record<string, ProcessReading> = {};
    for (const [name, pid] of Object.entries(pids)) {
      const heap = heaps[name];
      processes[name] = {
        rssMiB: rssMiB(pid),
        fds: openFds(pid),
        ...(heap && heap.totalMiB > 0 ? { heapUsedMiB: heap.usedMiB, heapTotalMiB: heap.totalMiB } : {}),
      };
    }
    return {
      atSeconds: (Date.now() - churnStartedAt) / 1000,
      processes,
      openSessions: metrics.reduce((sum, m) => sum + m.sessions, 0),
      connections: metrics.reduce((sum, m) => sum + m.connections, 0),
      emitToSend: addHistograms(metrics.map((m) => m.emitToSend)),
    };
  };
  const quietReading = async (): Promise<SoakSample> => {
    const deadline = Date.now() + QUIET_TIMEOUT_MS;
    for (;;) {
      const sample = await read();
      if (sample.openSessions === 0 && sample.connections === 0) break;
      if (Date.now() > deadline)
        throw new Error(
          `runtimes still report ${sample.openSessions} sessions, ${sample.connections} connections ${QUIET_TIMEOUT_MS / 1000} s after the last user left`,
        );
      await sleep(250);
    }
    await sleep(QUIET_SETTLE_MS);
    return read();
  };

  const beforeChurn = await quietReading();
  const readAt = churnStartedAt;
  churnStartedAt = Date.now();
  const quietPoints: SoakSample[] = [{ ...beforeChurn, atSeconds: beforeChurn.atSeconds - (churnStartedAt - readAt) / 1000 }];
  const gate = new ChurnGate(churnStartedAt + options.minutes * 60_000);
  const users = Array.from({ length: options.users }, (_, i) =>
    runVirtualUser({
      user: i + 1,
      apiUrl: stack.coordinatorUrl,
      modelName: SOAK_MODEL,
      mintToken: () => stack.mintToken(),
      watchSeconds: options.watchSeconds,
      gate,
      counters,
      churnStartedAt,
    }),
  );

  const samples: SoakSample[] = [];
  let windowStart: CumulativeHistogram | undefined;
  let nextWindow = options.windowSeconds;
  const sampling = (async () => {
    for (let next = options.sampleEverySeconds; !gate.stopped; next += options.sampleEverySeconds) {
      await sleep(Math.max(0, churnStartedAt + next * 1000 - Date.now()));
      try {
        const sample = await read();
        samples.push(sample);
        if (sample.atSeconds >= nextWindow - 1e-3) {
          options.onProgress?.(progressLine(sample, counters, quantileMs(histogramDelta(sample.emitToSend, windowStart), 0.99)));
          windowStart = sample.emitToSend;
          nextWindow += options.windowSeconds;
        }
      } catch (error) {
        samplingErrors.push(`+${((Date.now() - churnStartedAt) / 1000).toFixed(0)} s: ${(error as Error).message}`);
      }
    }
  })();
  // Quiet points between the start and the end; the end is one too.
  const pauses = (async () => {
    for (let next = options.quietEverySeconds; ; next += options.quietEverySeconds) {
      const wait = churnStartedAt + next * 1000 - Date.now();
      if (wait >= gate.remainingMs()) return;
      await sleep(wait);
      await gate.drain();
      try {
        quietPoints.push(await quietReading());
      } catch (error) {
        samplingErrors.push(`quiet point at +${next} s: ${(error as Error).message}`);
      } finally {
        gate.resume();
      }
    }
  })();

  await pauses;
  await sleep(gate.remainingMs());
  await sampling;
  await gate.drain();
  try {
    quietPoints.push(await quietReading());
  } catch (error) {
    samplingErrors.push(`final quiet point: ${(error as Error).message}`);
  }
  gate.resume(); // past the deadline: users waiting at the gate leave
  await Promise.all(users);
  return soakFigures({ samples, quietPoints, counters, samplingErrors }, options);
}
