/**
 * A runtime whose stdout and stderr readers are gone (a closed log pipe, a parent that died):
 * found when an aborted soak left its runtimes spinning at 100 % CPU — each log write failed with
 * EPIPE, the failure became an uncaught exception, the process guard logged it to the same stderr,
 * and so on forever, with SIGTERM never handled. A real `arclight serve` process here: its output
 * pipes are closed, it is made to log, and it must still answer HTTP and exit 0 on SIGTERM.
 */

import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { freePort } from '../support/coordinator-process.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** User + system CPU seconds the process has used so far (/proc/PID/stat, clock ticks of 10 ms). */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

describe('a runtime whose log pipe is closed', () => {
  it('keeps serving without spinning, and exits 0 on SIGTERM', async () => {
    const port = await freePort();
    const env: NodeJS.ProcessEnv = { ...process.env, ARCLIGHT_LOG: 'debug' };
    for (const name of Object.keys(env)) if (name.startsWith('VITEST')) delete env[name];
    const child = spawn(
      process.execPath,
      [
        '--conditions=source',
        '--import',
        'tsx',
        'bin/arclight.js',
        'serve',
        'models/examples/pattern',
        '--host',
        '127.0.0.1',
        '--port',
        String(port),
        '--no-playground',
        '--no-recording',
      ],
      { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      await new Promise<void>((resolve, reject) => {
        let out = '';
        child.stdout!.on('data', (chunk: Buffer) => {
          out += chunk.toString();
          if (out.includes('serving model')) resolve();
        });
        child.once('exit', (code) => reject(new Error(`exited with ${code} before serving`)));
      });
      // The readers go: every later write to either stream fails with EPIPE.
      child.stdout!.destroy();
      child.stderr!.destroy();
      // Requests that log (debug level): the first writes into the broken pipe.
      for (let i = 0; i < 5; i++) expect((await fetch(`http://127.0.0.1:${port}/health`)).status).toBe(200);
      const before = cpuSeconds(child.pid!);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      // Idle: well under the full core a write-fail-log loop burns.
      expect(cpuSeconds(child.pid!) - before).toBeLessThan(0.5);
      expect((await fetch(`http://127.0.0.1:${port}/health`)).status).toBe(200);
      child.kill('SIGTERM');
      const code = await Promise.race([
        exited,
        new Promise<string>((resolve) => setTimeout(() => resolve('still running 15 s after SIGTERM'), 15_000)),
      ]);
      expect(code).toBe(0);
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  }, 90_000);
});
