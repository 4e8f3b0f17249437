/**
 * One soak user, looping as an app's user would: a fresh token from the app's server, a session
 * with the Node client, video for a while with a few commands, in every other session a dropped
 * connection taken up again with `reconnect()` inside the reconnect window, then the session
 * ended. Every failure is recorded with its error and the loop goes on: a soak reports failures,
 * it does not stop at the first.
 */

import { ArclightClient } from '../../client/node.ts';
import type { ChurnGate } from './churn-gate.ts';

export interface SoakFailure {
  readonly user: number;
  /** Seconds since the churn started. */
  readonly atSeconds: number;
  /** What the user was doing: `mint token`, `connect`, `watch`, `command`, `disconnect(true)`, `reconnect`, `end`. */
  readonly phase: string;
  readonly error: string;
}

export interface ChurnCounters {
  /** Sessions that ran to their end without a failure. */
  sessions: number;
  /** Sessions attempted (a token was asked for). */
  attempts: number;
  reconnects: number;
  commands: number;
  readonly failures: SoakFailure[];
}

export interface VirtualUserOptions {
  readonly user: number;
  readonly apiUrl: string;
  readonly modelName: string;
  readonly mintToken: () => Promise<string>;
  /** Video time per session, drawn uniformly from [min, max] seconds. */
  readonly watchSeconds: readonly [number, number];
  readonly gate: ChurnGate;
  readonly counters: ChurnCounters;
  readonly churnStartedAt: number;
}

/** How long a part of a session may go without its first decoded frame before it counts as a failure. */
const FIRST_FRAME_TIMEOUT_MS = 10_000;

const between = (min: number, max: number): number => min + Math.random() * (max - min);

class SessionStep extends Error {
  constructor(
    readonly phase: string,
    cause: unknown,
  ) {
    super(cause instanceof Error ? `${cause.name}: ${cause.message}${'code' in cause ? ` (${String(cause.code)})` : ''}` : String(cause));
  }
}

async function step<T>(phase: string, action: () => Promise<T>): Promise<T> {
  try {
    return await action();
  } catch (error) {
    throw new SessionStep(phase, error);
  }
}

export async function runVirtualUser(options: VirtualUserOptions): Promise<void> {
  const { gate, counters } = options;
  for (let loop = 0; await gate.enter(); loop++) {
    counters.attempts++;
    // Exactly every other session drops and reconnects, so a short run sees reconnects for certain.
    const reconnects = (loop + options.user) % 2 === 0;
    const client = new ArclightClient({ modelName: options.modelName, apiUrl: options.apiUrl });
    try {
      const token = await step('mint token', options.mintToken);
      await step('connect', () => client.connect(token));
      client.pauseTrack('tone'); // video is what the soak watches; audio would only add encode time
      const watchMs = between(options.watchSeconds[0], options.watchSeconds[1]) * 1000;
      if (reconnects) {
        await watch(client, options, watchMs / 2);
        await step('disconnect(true)', () => client.disconnect(true));
        await gate.sleep(between(500, 3_000)); // well inside the coordinator's reconnect window (30 s)
        await step('reconnect', () => client.reconnect());
        counters.reconnects++;
        await watch(client, options, watchMs / 2);
      } else {
        await watch(client, options, watchMs);
      }
      await step('end', () => client.disconnect());
      counters.sessions++;
    } catch (error) {
      const failure = error instanceof SessionStep ? error : new SessionStep('unknown', error);
      counters.failures.push({
        user: options.user,
        atSeconds: (Date.now() - options.churnStartedAt) / 1000,
        phase: failure.phase,
        error: failure.message,
      });
      await gate.sleep(1_000);
    } finally {
      await client.disconnect().catch(() => undefined);
      gate.leave();
    }
  }
}

/** Receives video for `ms` (less when the gate drains), sending two commands on the way; fails when no frame is decoded. */
async function watch(client: ArclightClient, options: VirtualUserOptions, ms: number): Promise<void> {
  let framesDecoded = 0;
  const onStats = (stats: { framesDecoded?: number }) => {
    framesDecoded = Math.max(framesDecoded, stats.framesDecoded ?? 0);
  };
  client.on('statsUpdate', onStats);
  try {
    for (let i = 0; i < 2; i++) {
      await options.gate.sleep(ms / 2);
      await step('command', () =>
        i === 0
          ? client.sendCommand('set_color', {
              color: `#${Math.floor(Math.random() * 0xffffff)
                .toString(16)
                .padStart(6, '0')}`,
            })
          : client.sendCommand('set_speed', { speed: Math.round(between(0, 16)) }),
      );
      options.counters.commands++;
    }
    const deadline = Date.now() + FIRST_FRAME_TIMEOUT_MS;
    while (framesDecoded === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 200));
    if (framesDecoded === 0)
      throw new SessionStep('watch', new Error(`no video frame decoded in ${((ms + FIRST_FRAME_TIMEOUT_MS) / 1000).toFixed(0)} s`));
  } finally {
    client.off('statsUpdate', onStats);
  }
}
