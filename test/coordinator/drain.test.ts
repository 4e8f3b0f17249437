/**
 * Draining a hosted runtime, without network namespaces (everything on 127.0.0.1): `drain(ms)`
 * gives the open session until the deadline and no longer, and `arclight serve --coordinator`
 * drains on SIGTERM — it heartbeats `draining` at once, the coordinator places nothing new on it,
 * the live session runs on (commands still answered), and at `--drain-seconds` the process ends
 * that session (the coordinator and the client hear it) and exits 0. The session here never ends
 * by itself: its client stays connected throughout.
 *
 * Which engine runs what (issue 20 part 7; docs/testing.md "Which engine runs what"): both cases
 * on SQLite and on PostgreSQL. Both write through the coordinator while a session is live — the
 * draining heartbeat, a placement pass that must pass the draining runtime over, the runtime's
 * end report and its charge — and the file is short (~9 s per engine).
 */

import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ArclightClient } from '../../client/node.ts';
import { freePort } from '../support/coordinator-process.ts';
import { ENGINES } from './storage-engines.ts';
import { startHostedStack, type HostedStack } from '../support/hosted-stack.ts';
import { waitUntil } from '../support/video-probe.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const DRAIN_SECONDS = 4;

describe.each(ENGINES)('draining a hosted runtime on %s', (engine) => {
  let stack: HostedStack;
  let serve: ChildProcess | undefined;

  beforeAll(async () => {
    stack = await startHostedStack({ runtimeId: 'gpu-drain', engine });
  }, 60_000);
  afterAll(async () => {
    if (serve && serve.exitCode === null && serve.signalCode === null) serve.kill('SIGKILL');
    await stack?.close();
  });

  const connectedClient = async () => {
    const client = new ArclightClient({ modelName: 'pattern', apiUrl: stack.coordinator.url });
    const ended = new Promise<string>((resolve) => client.on('sessionEnded', resolve));
    await client.connect(await stack.mintToken());
    const sessionId = client.getSessionId()!;
    await waitUntil(async () => (await stack.coordinator.sessions.get(sessionId))?.status === 'ready', 10_000, 'the session to be ready');
    return { client, sessionId, ended };
  };

  it('drain(ms) waits for the open session only until the deadline; closing then ends it at the coordinator', async () => {
    const { client, sessionId, ended } = await connectedClient();
    const started = performance.now();
    await stack.runtime.drain(1_500);
    const waited = performance.now() - started;
    expect(waited).toBeGreaterThanOrEqual(1_400); // it did wait for the session…
    expect(waited).toBeLessThan(4_000); // …and not past the deadline
    expect(stack.runtime.sessions.current?.id).toBe(sessionId); // drain itself ends nothing: the caller closes
    await stack.runtime.close(); // what `arclight serve` does after the drain
    expect((await stack.coordinator.sessions.get(sessionId))?.status).toBe('ended');
    expect(await ended).toEqual(expect.any(String));
    await client.disconnect().catch(() => undefined);
  }, 60_000);

  // After the test above: the in-process runtime is gone, so sessions can only go to this process.
  it('arclight serve drains on SIGTERM: draining heartbeat, nothing new placed, the live session runs on until --drain-seconds', async () => {
    const port = await freePort();
    const env: NodeJS.ProcessEnv = { ...process.env, ARCLIGHT_RUNTIME_SECRET: 'secret-gpu-drain', ARCLIGHT_LOG: 'warn' };
    for (const name of Object.keys(env)) if (name.startsWith('VITEST')) delete env[name];
    serve = spawn(
      process.execPath,
      [
        ...['--conditions=source', '--import', 'tsx', 'bin/arclight.js', 'serve', 'models/examples/pattern'],
        ...['--host', '127.0.0.1', '--port', String(port), '--ice-host', '127.0.0.1'],
        ...['--coordinator', stack.coordinator.url, '--runtime-id', 'gpu-proc', '--drain-seconds', String(DRAIN_SECONDS)],
        '--no-playground',
        '--no-recording',
      ],
      { cwd: ROOT, env, stdio: ['ignore', 'ignore', 'inherit'] },
    );
    const exited = new Promise<number | null>((resolve) => serve!.once('exit', (code) => resolve(code)));
    const registry = stack.coordinator.registry;
    await waitUntil(async () => (await registry.get('gpu-proc'))?.draining === 0, 60_000, 'arclight serve to register');

    const { client, sessionId, ended } = await connectedClient();
    expect((await stack.coordinator.sessions.get(sessionId))?.runtime_id).toBe('gpu-proc');
    const signalledAt = Date.now();
    serve.kill('SIGTERM');
    await waitUntil(async () => (await registry.get('gpu-proc'))?.draining === 1, 3_000, 'the draining heartbeat');

    // Nothing new is placed on it (it is the only runtime of the model: the session waits).
    const created = await fetch(`${stack.coordinator.url}/sessions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${await stack.mintToken()}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: { name: 'pattern' } }),
    });
    const waiting = (await created.json()) as { session_id: string; capabilities?: unknown };
    expect(waiting.capabilities).toBeUndefined();
    await stack.coordinator.housekeeping(); // a placement pass, too
    expect((await stack.coordinator.sessions.get(waiting.session_id))?.runtime_id).toBeNull();

    // The live session runs on through the drain.
    expect((await client.sendCommand('set_color', { color: '#00ff00' }))?.type).toBe('color_changed');
    expect((await stack.coordinator.sessions.get(sessionId))?.status).toBe('ready');

    // At the deadline the process ends it, tells the client and the coordinator, and exits cleanly.
    expect(await exited).toBe(0);
    const elapsed = Date.now() - signalledAt;
    expect(elapsed).toBeGreaterThanOrEqual(DRAIN_SECONDS * 1000 - 500);
    expect(elapsed).toBeLessThan(DRAIN_SECONDS * 1000 + 10_000);
    expect(await ended).toEqual(expect.any(String));
    const session = (await stack.coordinator.sessions.get(sessionId))!;
    expect(session.status).toBe('ended');
    expect(session.ended_at! - signalledAt).toBeGreaterThanOrEqual(DRAIN_SECONDS * 1000 - 500);
    await client.disconnect().catch(() => undefined);
    await fetch(`${stack.coordinator.url}/sessions/${waiting.session_id}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${stack.key}` },
    });
  }, 120_000);
});
