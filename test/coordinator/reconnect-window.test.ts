/**
 * The reconnect window as the runtime receives it, on SQLite and PostgreSQL. The coordinator
 * decides it (default 30 s; `reconnectWindowSeconds` / `--reconnect-window`, 1–3600) and sends it
 * in the body of `POST /hosted/sessions` when it opens a session on a runtime, overriding the
 * runtime's own grace. The "runtime" here is a real HTTP server on 127.0.0.1 that registers like
 * one and records what the coordinator posts to it — the window is only visible on that wire.
 */

import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main as coordinatorCli } from '../../coordinator/cli.ts';
import { startCoordinator } from '../../coordinator/index.ts';
import { freePort, killProcess, startCoordinatorProcess } from '../support/coordinator-process.ts';
import { waitUntil } from '../support/video-probe.ts';
import { ENGINES, freshDatabase } from './storage-engines.ts';

const SECRET = 'runtime-secret-for-reconnect-window';
const CAPABILITIES = { protocol_version: '1.0', tracks: [{ name: 'main_video', kind: 'video', direction: 'recvonly' }], commands: [] };

/** A runtime stand-in: accepts every session the coordinator opens and keeps the bodies it was sent. */
class RecordingRuntime {
  readonly opened: Array<Record<string, unknown>> = [];
  readonly #server: Server;
  url = '';

  constructor() {
    this.#server = createServer((request, response) => {
      let text = '';
      request.on('data', (chunk: Buffer) => (text += chunk.toString()));
      request.on('end', () => {
        if (request.method === 'POST' && request.url === '/hosted/sessions') {
          // The coordinator must authenticate itself to a runtime; a stand-in that ignored the
          // secret would hide a coordinator that stopped sending it.
          if (request.headers['arclight-runtime-secret'] !== SECRET) {
            response.writeHead(401).end();
            return;
          }
          this.opened.push(JSON.parse(text) as Record<string, unknown>);
        }
        response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
  }

  async listen(): Promise<void> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.#server.address() as { port: number }).port}`;
  }

  close(): Promise<void> {
    this.#server.closeAllConnections();
    return new Promise((resolve) => this.#server.close(() => resolve()));
  }
}

/** Registers `runtime` at `coordinatorUrl`, opens one session there and returns the body the runtime got. */
async function openedBody(
  coordinatorUrl: string,
  token: string,
  runtime: RecordingRuntime,
  runtimeId: string,
): Promise<Record<string, unknown>> {
  const registered = await fetch(`${coordinatorUrl}/runtimes`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'Arclight-Runtime-Secret': SECRET },
    body: JSON.stringify({ id: runtimeId, url: runtime.url, model: 'pattern', slots: 1, capabilities: CAPABILITIES }),
  });
  expect(registered.status).toBe(200);
  const created = await fetch(`${coordinatorUrl}/sessions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: { name: 'pattern' } }),
  });
  expect(created.status).toBe(200);
  const { session_id: sessionId } = (await created.json()) as { session_id: string };
  await waitUntil(
    () => runtime.opened.some((b) => b['session_id'] === sessionId),
    10_000,
    'the coordinator to open the session on the runtime',
  );
  return runtime.opened.find((b) => b['session_id'] === sessionId)!;
}

describe.each(ENGINES)('reconnect window on %s', (engine) => {
  let runtime: RecordingRuntime;
  /** A database with the `pattern` model and an account with credits; returns a token for it. */
  const prepare = async (database: string): Promise<string> => {
    const setup = await startCoordinator({ database, port: 0, meterFlushMs: 0 });
    try {
      await setup.catalog.add('pattern', 5);
      const account = await setup.accounts.create('Acme');
      await setup.ledger.grantPromotional(account.id, 100_000);
      const { key } = await setup.apiKeys.create(account.id);
      const minted = await fetch(`${setup.url}/tokens`, { method: 'POST', headers: { 'Service-API-Key': key } });
      return ((await minted.json()) as { token: string }).token;
    } finally {
      await setup.close();
    }
  };

  beforeAll(async () => {
    runtime = new RecordingRuntime();
    await runtime.listen();
  });
  afterAll(async () => runtime?.close());

  it('sends the default, 30 s, to the runtime that opens the session', async () => {
    const database = await freshDatabase(engine);
    const token = await prepare(database);
    const coordinator = await startCoordinator({ database, port: 0, meterFlushMs: 0, runtimeSecret: SECRET });
    try {
      const body = await openedBody(coordinator.url, token, runtime, 'standin-default');
      expect(body).toMatchObject({ reconnect_window_seconds: 30, max_duration_seconds: 1200 });
    } finally {
      await coordinator.close();
    }
  });

  it('sends what `arclight coordinator --reconnect-window` was given', async () => {
    const database = await freshDatabase(engine);
    const token = await prepare(database);
    const started = await startCoordinatorProcess({
      database,
      port: await freePort(),
      runtimeSecret: SECRET,
      extraArgs: ['--reconnect-window', '45'],
    });
    try {
      const body = await openedBody(started.url, token, runtime, 'standin-cli');
      expect(body['reconnect_window_seconds']).toBe(45);
    } finally {
      await killProcess(started.child);
    }
  }, 30_000);

  it('refuses a window outside 1–3600 s, as an option and as a flag', async () => {
    const database = await freshDatabase(engine);
    for (const seconds of [0, 3601, 2.5]) {
      await expect(startCoordinator({ database, port: 0, reconnectWindowSeconds: seconds }), String(seconds)).rejects.toThrow(RangeError);
    }
    // Both ends of the range are accepted.
    for (const seconds of [1, 3600])
      await (await startCoordinator({ database, port: 0, meterFlushMs: 0, reconnectWindowSeconds: seconds })).close();
    // The CLI refuses before starting anything: a usage error, exit 2.
    const stderr = process.stderr.write;
    process.stderr.write = (() => true) as typeof process.stderr.write;
    try {
      for (const flag of ['0', '3601', '-5', 'soon']) {
        expect(await coordinatorCli(['coordinator', '--port', '0', '--database', database, '--reconnect-window', flag]), flag).toBe(2);
      }
    } finally {
      process.stderr.write = stderr;
    }
  });
});
