/**
 * `arclight stack` as a real process (bin/arclight.js from the TypeScript sources), on free
 * ports of 127.0.0.1 with a temporary SQLite file: usage errors exit 2; a start prints the
 * playground and coordinator URLs and a demo key that mints tokens, and SIGTERM closes
 * everything and exits 0.
 */

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** Starting node + tsx, two runtimes and a coordinator on a busy 2-core machine takes a while. */
const TIMEOUT_MS = 60_000;
const folder = mkdtempSync(join(tmpdir(), 'arclight-stack-cli-'));
const children = new Set<ChildProcess>();

interface Cli {
  readonly child: ChildProcess;
  readonly out: { stdout: string; stderr: string };
  readonly exited: Promise<number | null>;
}

function spawnCli(args: readonly string[]): Cli {
  // A real invocation: not marked as running under vitest (the model loader registers tsx then).
  const env: NodeJS.ProcessEnv = { ARCLIGHT_LOG: 'warn' };
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith('VITEST') && key !== 'ARCLIGHT_LOG') env[key] = value;
  const child = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', 'bin/arclight.js', ...args], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  const out = { stdout: '', stderr: '' };
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (out.stdout += chunk));
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (out.stderr += chunk));
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  void exited.then(() => children.delete(child));
  return { child, out, exited };
}

async function waitForOutput(cli: Cli, pattern: RegExp): Promise<RegExpExecArray> {
  const deadline = Date.now() + TIMEOUT_MS;
  for (;;) {
    const match = pattern.exec(cli.out.stdout);
    if (match) return match;
    if (cli.child.exitCode !== null || Date.now() > deadline)
      throw new Error(`no ${pattern} on stdout\nstdout: ${cli.out.stdout}\nstderr: ${cli.out.stderr}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

afterAll(() => {
  // Nothing may outlive the file: kill a CLI a failed test left running (by its own pid).
  for (const child of children) child.kill('SIGKILL');
  rmSync(folder, { recursive: true, force: true });
});

describe('arclight stack', () => {
  it('a bad port → exit 2 with usage', { timeout: TIMEOUT_MS }, async () => {
    const cli = spawnCli(['stack', '--port', 'abc']);
    expect(await cli.exited).toBe(2);
    expect(cli.out.stderr).toContain('--port must be an integer');
    expect(cli.out.stderr).toContain('Usage: arclight stack');
  });

  it('prints where everything is and a working demo key; SIGTERM closes it all', { timeout: TIMEOUT_MS * 2 }, async () => {
    const cli = spawnCli(['stack', '--port', '0', '--coordinator-port', '0', '--database', join(folder, 'coordinator.db')]);
    await waitForOutput(cli, /Ctrl-C stops everything/);
    const playground = /Playground\s+(http:\/\/localhost:\d+)/.exec(cli.out.stdout)?.[1];
    const coordinator = /Coordinator\s+(http:\/\/127\.0\.0\.1:\d+)/.exec(cli.out.stdout)?.[1];
    const key = /Demo API key\s+(rk_\S+)/.exec(cli.out.stdout)?.[1];
    expect(playground && coordinator && key, cli.out.stdout).toBeTruthy();
    expect(cli.out.stdout).toContain(`curl -s -X POST ${coordinator}/tokens`);

    // What the printed curl does.
    const minted = await fetch(`${coordinator}/tokens`, {
      method: 'POST',
      headers: { 'Service-API-Key': key!, 'Content-Type': 'application/json' },
      body: JSON.stringify({ authorization_details: [{ type: 'session', resources: { models: { match: ['pattern'] } } }] }),
    });
    expect(minted.status).toBe(200);
    const config = await (await fetch(`${playground!.replace('localhost', '127.0.0.1')}/playground/config`)).json();
    expect(config).toEqual({ hosted: { coordinator_url: coordinator } });

    cli.child.kill('SIGTERM');
    expect(await cli.exited).toBe(0);
    expect(cli.out.stdout).toContain('shutting down');
    await expect(fetch(`${coordinator}/pricing`)).rejects.toThrow(); // closed
  });
});
