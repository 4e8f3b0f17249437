/**
 * The hosted service as an operator runs it, every part its own process on 127.0.0.1, for runs
 * that watch those processes from outside (bench/soak.ts): `arclight coordinator` on a fresh
 * SQLite file (catalog model `pattern`, an account with credits and raised quotas, an API key),
 * and `runtimes` × `arclight serve models/examples/pattern --coordinator …`. A hosted runtime
 * offers one slot (one session at a time), so concurrent users need a runtime each.
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { startCoordinator } from '../../coordinator/index.ts';
import { openStorage } from '../../coordinator/storage/database.ts';
import { createLogger } from '../../server-kit/log.ts';
import { freePort, killProcess, startCoordinatorProcess } from '../../test/support/coordinator-process.ts';
import { waitUntil } from '../../test/support/video-probe.ts';
import { startChildRuntime, type ChildRuntime } from './child-runtime.ts';

const LOOPBACK = '127.0.0.1';
const SECRET = 'soak-runtime-secret';
export const SOAK_MODEL = 'pattern';

export interface SoakStack {
  readonly coordinatorUrl: string;
  readonly coordinatorPid: number;
  readonly runtimes: readonly ChildRuntime[];
  /** A session token for `pattern`, minted with the account's API key as an app's server would. */
  mintToken(): Promise<string>;
  /** Stops the runtimes, then the coordinator, and deletes the database. */
  stop(): Promise<void>;
}

export interface SoakStackOptions {
  runtimes: number;
  /** How often the coordinator charges running sessions (`--meter-flush-ms`): billing churns with the sessions. */
  meterFlushMs?: number;
}

export async function startSoakStack(options: SoakStackOptions): Promise<SoakStack> {
  const folder = mkdtempSync(join(tmpdir(), 'arclight-soak-'));
  const database = join(folder, 'coordinator.db');
  // Seeded in this process, as an operator's admin commands would, before the coordinator process opens it.
  // No balance ceiling on the seed: its grant is more than a soak can spend (a cap would cut it).
  const seed = await startCoordinator({
    database,
    port: 0,
    meterFlushMs: 0,
    pricing: { maxAccountCredits: 0 },
    logger: createLogger({ soak: 'seed' }, 'error'),
  });
  await seed.catalog.add(SOAK_MODEL, 5);
  // Quotas well above what the users can reach: a refusal would be the quota working, not a soak finding.
  const account = await seed.accounts.create('soak', {
    concurrentSessions: 1_000,
    sessionsPerMinute: 10_000,
    maxSessionDurationSeconds: 3_600,
  });
  await seed.ledger.grantPromotional(account.id, 1e9);
  const { key } = await seed.apiKeys.create(account.id);
  await seed.close();

  let coordinator: ChildProcess | undefined;
  const runtimes: ChildRuntime[] = [];
  const stop = async () => {
    await Promise.all(runtimes.map((runtime) => runtime.stop()));
    if (coordinator) await killProcess(coordinator);
    rmSync(folder, { recursive: true, force: true });
  };
  try {
    const port = await freePort();
    coordinator = (
      await startCoordinatorProcess({
        database,
        port,
        runtimeSecret: SECRET,
        extraArgs: ['--meter-flush-ms', String(options.meterFlushMs ?? 1_000)],
      })
    ).child;
    const coordinatorUrl = `http://${LOOPBACK}:${port}`;
    const ids = Array.from({ length: options.runtimes }, (_, i) => `soak-runtime-${i + 1}`);
    runtimes.push(
      ...(await Promise.all(
        ids.map((runtimeId) =>
          startChildRuntime(LOOPBACK, { hosted: { coordinatorUrl, secret: SECRET, runtimeId }, stderrTailChars: 4_000 }),
        ),
      )),
    );
    const reader = await openStorage(database);
    try {
      await waitUntil(
        async () => (await reader.db.selectFrom('runtimes').select('id').where('id', 'in', ids).execute()).length === ids.length,
        30_000,
        'every runtime to register',
      );
    } finally {
      await reader.close();
    }
    return {
      coordinatorUrl,
      coordinatorPid: coordinator.pid!,
      runtimes,
      async mintToken() {
        const response = await fetch(`${coordinatorUrl}/tokens`, {
          method: 'POST',
          headers: { 'Service-API-Key': key, 'content-type': 'application/json' },
          body: JSON.stringify({ authorization_details: [{ type: 'session', resources: { models: { match: [SOAK_MODEL] } } }] }),
          signal: AbortSignal.timeout(10_000),
        });
        if (!response.ok) throw new Error(`POST /tokens: ${response.status} ${await response.text()}`);
        return ((await response.json()) as { token: string }).token;
      },
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}
