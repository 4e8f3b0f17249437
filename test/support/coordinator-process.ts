/**
 * `arclight coordinator` as an operator runs it — a real child process on 127.0.0.1 — for tests
 * that need more than one coordinator process or need to SIGKILL one.
 */

import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { waitUntil } from './video-probe.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const LOOPBACK = '127.0.0.1';

const children = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

/** A port free on 127.0.0.1 right now (so a restarted process can take the same one). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, LOOPBACK, resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

export interface CoordinatorProcess {
  readonly url: string;
  readonly child: ChildProcess;
}

/** Starts `arclight coordinator` on `database` and `port`; resolves once it serves. */
export async function startCoordinatorProcess(options: {
  database: string;
  port: number;
  runtimeSecret?: string;
  extraArgs?: readonly string[];
}): Promise<CoordinatorProcess> {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('VITEST') && k !== 'DATABASE_URL') env[k] = v;
  if (options.runtimeSecret) env['ARCLIGHT_RUNTIME_SECRET'] = options.runtimeSecret;
  env['ARCLIGHT_LOG'] = 'warn';
  const args = [
    '--conditions=source',
    '--import',
    'tsx',
    'bin/arclight.js',
    'coordinator',
    '--port',
    String(options.port),
    '--database',
    options.database,
    ...(options.extraArgs ?? []),
  ];
  const child = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ['ignore', 'ignore', 'inherit'] });
  children.add(child);
  child.once('exit', () => children.delete(child));
  const url = `http://${LOOPBACK}:${options.port}`;
  await waitUntil(
    () =>
      fetch(`${url}/pricing`).then(
        (r) => r.ok,
        () => false,
      ),
    20_000,
    'the coordinator process to serve',
  );
  return { url, child };
}

/** SIGKILL, and wait until it is gone. */
export async function killProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}
