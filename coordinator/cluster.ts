/**
 * `arclight coordinator --workers N`: N coordinator processes on one host sharing one port
 * (node:cluster hands connections to the workers in turn). A coordinator is stateless between
 * requests — every decision is made in the database, atomically (row locks on PostgreSQL,
 * immediate transactions on SQLite) — so its workers are replicas like any other, and a host's
 * cores all serve. The primary migrates the database and prepares the signing keys before forking,
 * so workers never race to do it; only worker 0 runs the housekeeping timer (the others would
 * find nothing left to do); a worker that dies is replaced.
 */

import cluster from 'node:cluster';
import { SigningKeyring } from './tokens/signing-keyring.ts';
import { signingKeyCipherFor, type SigningKeySecret } from './tokens/signing-key-secret.ts';
import { isPostgresUrl, openStorage } from './storage/database.ts';
import { writeStandardStream } from '../server-kit/log.ts';

const WORKER_INDEX_ENV = 'ARCLIGHT_COORDINATOR_WORKER';

interface ListeningMessage {
  readonly type: 'arclight-coordinator-listening';
  readonly url: string;
}

/** In a worker: its index (0 runs housekeeping); undefined in a process that is not a worker. */
export function coordinatorWorkerIndex(): number | undefined {
  return cluster.isWorker ? Number(process.env[WORKER_INDEX_ENV] ?? 0) : undefined;
}

/** In a worker: tells the primary it serves. */
export function reportListening(url: string): void {
  const message: ListeningMessage = { type: 'arclight-coordinator-listening', url };
  process.send?.(message);
}

/**
 * In the primary: prepares the database, forks `workers` processes (each runs this CLI again and
 * so becomes a coordinator) and resolves with the URL once all serve, plus a `close()` that stops
 * them (SIGTERM, then waits).
 */
export async function startCoordinatorWorkers(
  database: string,
  workers: number,
  signingKeySecret?: SigningKeySecret,
): Promise<{ url: string; close(): Promise<void> }> {
  // Each worker reads the secret as the primary does (the same environment and arguments).
  const cipher = await signingKeyCipherFor(isPostgresUrl(database), signingKeySecret);
  const storage = await openStorage(database, { onConnectionError: () => {} }); // migrates; closed at once
  try {
    // Encrypts plain keys (or checks the secret opens them) and makes the first key; the workers
    // warn about unencrypted keys themselves.
    await new SigningKeyring(storage.db, { cipher }).prepare();
  } finally {
    await storage.close();
  }
  let stopping = false;
  const fork = (index: number) => {
    const worker = cluster.fork({ [WORKER_INDEX_ENV]: String(index) });
    worker.once('exit', (code, signal) => {
      if (stopping) return;
      writeStandardStream(process.stderr, `arclight: coordinator worker ${index} exited (${signal ?? code}); starting another\n`);
      fork(index);
    });
    return worker;
  };
  const started = Array.from({ length: workers }, (_, i) => fork(i));
  const urls = await Promise.all(
    started.map(
      (worker) =>
        new Promise<string>((resolve, reject) => {
          worker.on('message', (message: Partial<ListeningMessage>) => {
            if (message.type === 'arclight-coordinator-listening' && typeof message.url === 'string') resolve(message.url);
          });
          worker.once('exit', (code) => reject(new Error(`a coordinator worker exited with ${code} before serving`)));
        }),
    ),
  );
  return {
    url: urls[0]!,
    async close() {
      stopping = true;
      await Promise.all(
        Object.values(cluster.workers ?? {}).map(
          (worker) =>
            new Promise<void>((resolve) => {
              if (!worker || worker.isDead()) return resolve();
              worker.once('exit', () => resolve());
              worker.process.kill('SIGTERM');
            }),
        ),
      );
    },
  };
}
