/**
 * The runtime under test as a child process: the real CLI
 * (`bin/arclight.js serve models/examples/pattern`, or another model module), so its event loop
 * and CPU are its own.
 */

import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

export interface ChildRuntime {
  /** `http://<host>:<port>`, as the runtime printed it (with `localhost` replaced by the host). */
  readonly url: string;
  readonly pid: number;
  /** SIGTERM (SIGKILL after 10 s); then writes what the runtime wrote to stderr, if anything. */
  stop(): Promise<void>;
}

export interface ChildRuntimeOptions {
  /** Model module to serve, relative to the repository root. Default `models/examples/pattern`. */
  model?: string;
  /** `--latency`; the model's / CLI's default when left out. */
  latency?: 'realtime' | 'smooth';
  /** Seconds a session outlives its last client (`--grace`); the CLI's default when left out. */
  graceSeconds?: number;
  /** Write a V8 CPU profile of the runtime into this folder when it stops (`node --cpu-prof`). */
  cpuProfileDir?: string;
  /** On stop, write only the last this many characters of the runtime's stderr (all of what was kept when left out). */
  stderrTailChars?: number;
  /** Record sessions (the CLI's default); off unless asked, so figures stay comparable with earlier runs. */
  recording?: boolean;
  /** Hosted mode: register with this coordinator (`--coordinator`, `--runtime-id`, the secret in the environment); no drain on stop. */
  hosted?: { coordinatorUrl: string; secret: string; runtimeId: string };
  /** More `serve` flags, after the others (e.g. `--recording-dir DIR`). */
  extraArgs?: readonly string[];
}

/** Starts the runtime listening (HTTP and ICE) on `host`, on a free port, and waits until it serves. */
export async function startChildRuntime(host: string, options: ChildRuntimeOptions = {}): Promise<ChildRuntime> {
  const child = spawn(
    process.execPath,
    [
      ...(options.cpuProfileDir === undefined ? [] : ['--cpu-prof', '--cpu-prof-dir', options.cpuProfileDir]),
      '--conditions=source',
      '--import',
      'tsx',
      'bin/arclight.js',
      'serve',
      options.model ?? 'models/examples/pattern',
      '--port',
      '0',
      '--host',
      host,
      '--ice-host',
      host,
      '--no-playground',
      ...(options.recording ? [] : ['--no-recording']),
      ...(options.latency === undefined ? [] : ['--latency', options.latency]),
      ...(options.graceSeconds === undefined ? [] : ['--grace', String(options.graceSeconds)]),
      // A stopping bench runtime need not let its open session run on (the CLI drains 300 s by default).
      ...(options.hosted === undefined
        ? []
        : ['--coordinator', options.hosted.coordinatorUrl, '--runtime-id', options.hosted.runtimeId, '--drain-seconds', '0']),
      ...(options.extraArgs ?? []),
    ],
    {
      cwd: ROOT,
      env: {
        ...process.env,
        ARCLIGHT_LOG: 'warn',
        ...(options.hosted === undefined ? {} : { ARCLIGHT_RUNTIME_SECRET: options.hosted.secret }),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
    if (stderr.length > 20_000) stderr = stderr.slice(-10_000);
  });
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`runtime did not start in 60 s; stderr:\n${stderr}`)), 60_000);
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const match = /serving model "[^"]+" on (http:\/\/\S+)/.exec(out);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!.replace('localhost', host));
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`runtime exited with ${code} before listening; stderr:\n${stderr}`));
    });
  });
  return {
    url,
    pid: child.pid!,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
        child.once('exit', () => {
          clearTimeout(timer);
          const text = options.stderrTailChars === undefined ? stderr.trim() : stderr.trim().slice(-options.stderrTailChars);
          if (text) process.stderr.write(`[runtime stderr]\n${text}\n`);
          resolve();
        });
        child.kill('SIGTERM');
      }),
  };
}
