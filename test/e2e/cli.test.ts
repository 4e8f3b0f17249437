/**
 * `arclight serve`: argument errors exit 2 with usage, model module errors exit 1 with a clear
 * message, a valid model serves until SIGTERM and then exits 0 promptly.
 *
 * The CLI runs from the TypeScript sources (`node --conditions=source --import tsx`), listening
 * on 127.0.0.1 (its default) with ICE pinned to 127.0.0.1.
 */

import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const NODE_FLAGS = ['--conditions=source', '--import', 'tsx'];
/** Starting node + tsx on a busy 2-core machine can take a while. */
const START_TIMEOUT_MS = 60_000;

interface CliResult {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** The environment of a real invocation: not marked as running under vitest. */
function cliEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith('VITEST')) env[key] = value;
  env['ARCLIGHT_LOG'] = 'warn';
  return env;
}

const children = new Set<ChildProcess>();

function spawnCli(
  args: readonly string[],
  env: Readonly<Record<string, string>> = {},
): ChildProcess & { out: { stdout: string; stderr: string } } {
  const child = spawn(process.execPath, [...NODE_FLAGS, 'bin/arclight.js', ...args], {
    cwd: ROOT,
    env: { ...cliEnv(), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  const out = { stdout: '', stderr: '' };
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (out.stdout += chunk));
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (out.stderr += chunk));
  child.once('exit', () => children.delete(child));
  return Object.assign(child, { out });
}

function exited(child: ChildProcess & { out: { stdout: string; stderr: string } }, timeoutMs: number): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined;
    const done = (code: number | null, signal: NodeJS.Signals | null) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout: child.out.stdout, stderr: child.out.stderr });
    };
    if (child.exitCode !== null || child.signalCode !== null) return done(child.exitCode, child.signalCode);
    timer = setTimeout(() => {
      child.off('close', done);
      reject(new Error(`the CLI did not exit within ${timeoutMs} ms\nstdout: ${child.out.stdout}\nstderr: ${child.out.stderr}`));
    }, timeoutMs);
    // 'close' waits for stdio to end, so every byte of output is in.
    child.once('close', done);
  });
}

async function runCli(args: readonly string[], env: Readonly<Record<string, string>> = {}): Promise<CliResult> {
  return exited(spawnCli(args, env), START_TIMEOUT_MS);
}

function describeResult(result: CliResult): string {
  return `exit ${result.code} (signal ${result.signal})\n--- stdout\n${result.stdout}\n--- stderr\n${result.stderr}`;
}

async function waitForOutput(child: ReturnType<typeof spawnCli>, pattern: RegExp, timeoutMs: number): Promise<RegExpExecArray> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const match = pattern.exec(child.out.stdout);
    if (match) return match;
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(
        `the CLI exited (${child.exitCode ?? child.signalCode}) before printing ${pattern}\nstdout: ${child.out.stdout}\nstderr: ${child.out.stderr}`,
      );
    }
    if (Date.now() > deadline)
      throw new Error(`no ${pattern} on stdout within ${timeoutMs} ms\nstdout: ${child.out.stdout}\nstderr: ${child.out.stderr}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

afterAll(() => {
  // Nothing may outlive the file: kill any CLI a failed test left running (by its own pid).
  for (const child of children) child.kill('SIGKILL');
});

describe('arclight serve: argument errors → exit 2', () => {
  it('missing module path → exit 2 with usage', { timeout: START_TIMEOUT_MS }, async () => {
    const result = await runCli(['serve']);
    expect(result.code, describeResult(result)).toBe(2);
    expect(result.stderr).toContain('missing model module');
    expect(result.stderr).toContain('Usage: arclight serve <model-module>');
  });

  it('no command at all → exit 2 with usage', { timeout: START_TIMEOUT_MS }, async () => {
    const result = await runCli([]);
    expect(result.code, describeResult(result)).toBe(2);
    expect(result.stderr).toContain('Usage: arclight serve');
  });

  it('unknown command → exit 2 naming it', { timeout: START_TIMEOUT_MS }, async () => {
    const result = await runCli(['deploy', 'models/examples/pattern']);
    expect(result.code, describeResult(result)).toBe(2);
    expect(result.stderr).toContain('unknown command "deploy"');
  });

  it('unknown option → exit 2 with usage', { timeout: START_TIMEOUT_MS }, async () => {
    const result = await runCli(['serve', 'models/examples/pattern', '--turbo']);
    expect(result.code, describeResult(result)).toBe(2);
    expect(result.stderr).toContain('--turbo');
    expect(result.stderr).toContain('Usage: arclight serve');
  });

  it('--coordinator without $ARCLIGHT_RUNTIME_SECRET, or not a URL → exit 2', { timeout: START_TIMEOUT_MS }, async () => {
    const noSecret = await runCli(['serve', 'models/examples/pattern', '--coordinator', 'http://127.0.0.1:9']);
    expect(noSecret.code, describeResult(noSecret)).toBe(2);
    expect(noSecret.stderr).toContain('ARCLIGHT_RUNTIME_SECRET');
    const notUrl = await runCli(['serve', 'models/examples/pattern', '--coordinator', 'coordinator.local']);
    expect(notUrl.code, describeResult(notUrl)).toBe(2);
    expect(notUrl.stderr).toContain('--coordinator must be an http(s) URL');
  });

  it(
    '--turn-url without $ARCLIGHT_TURN_SECRET, or a --public-ip that is not an address → exit 2',
    { timeout: START_TIMEOUT_MS },
    async () => {
      const noSecret = await runCli(['serve', 'models/examples/pattern', '--turn-url', 'turn:127.0.0.1:3478']);
      expect(noSecret.code, describeResult(noSecret)).toBe(2);
      expect(noSecret.stderr).toContain('ARCLIGHT_TURN_SECRET');
      const badIp = await runCli(['serve', 'models/examples/pattern', '--public-ip', 'gpu.example.com']);
      expect(badIp.code, describeResult(badIp)).toBe(2);
      expect(badIp.stderr).toContain('--public-ip must be an IPv4 or IPv6 address');
    },
  );

  it('--moderator-url that is not an http(s) URL → exit 2', { timeout: START_TIMEOUT_MS }, async () => {
    const result = await runCli(['serve', 'models/examples/pattern', '--moderator-url', 'ftp://moderation.local/check']);
    expect(result.code, describeResult(result)).toBe(2);
    expect(result.stderr).toContain('--moderator-url must be an http(s) URL');
  });

  it(
    'upload and recording flags out of range, or recording flags with --no-recording → exit 2',
    { timeout: 2 * START_TIMEOUT_MS },
    async () => {
      const zero = await runCli(['serve', 'models/examples/pattern', '--upload-max-bytes', '10M', '--max-clip-seconds', '0']);
      expect(zero.code, describeResult(zero)).toBe(2);
      expect(zero.stderr).toContain('--max-clip-seconds must be a positive number of seconds');
      const both = await runCli(['serve', 'models/examples/pattern', '--no-recording', '--recording-segment-seconds', '2']);
      expect(both.code, describeResult(both)).toBe(2);
      expect(both.stderr).toContain('--recording-segment-seconds configures the recording; it cannot be combined with --no-recording');
    },
  );

  it('--port abc → exit 2', { timeout: START_TIMEOUT_MS }, async () => {
    const result = await runCli(['serve', 'models/examples/pattern', '--port', 'abc']);
    expect(result.code, describeResult(result)).toBe(2);
    expect(result.stderr).toContain('--port');
    expect(result.stderr).toContain('abc');
    expect(result.stdout).not.toContain('serving');
  });

  it('--port 70000 and --port -1 → exit 2', { timeout: 2 * START_TIMEOUT_MS }, async () => {
    for (const port of ['70000', '-1']) {
      const result = await runCli(['serve', 'models/examples/pattern', `--port=${port}`]);
      expect(result.code, describeResult(result)).toBe(2);
      expect(result.stderr).toContain('--port');
    }
  });

  it('--port "" (empty) → exit 2, not a random port', { timeout: START_TIMEOUT_MS + 15_000 }, async () => {
    const child = spawnCli(['serve', 'models/examples/pattern', '--port=', '--ice-host', '127.0.0.1', '--no-playground']);
    try {
      // Either it exits (right) or it starts serving (wrong: "" is not a port number).
      const deadline = Date.now() + START_TIMEOUT_MS;
      while (child.exitCode === null && child.signalCode === null && !child.out.stdout.includes('serving model') && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(child.out.stdout, `stdout: ${child.out.stdout}\nstderr: ${child.out.stderr}`).not.toContain('serving model');
      const result = await exited(child, 10_000);
      expect(result.code, describeResult(result)).toBe(2);
      expect(result.stderr).toContain('--port');
    } finally {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        await exited(child, 10_000).catch(() => child.kill('SIGKILL'));
      }
    }
  });

  it('--help → exit 0 with usage on stdout', { timeout: START_TIMEOUT_MS }, async () => {
    const result = await runCli(['--help']);
    expect(result.code, describeResult(result)).toBe(0);
    expect(result.stdout).toContain('Usage: arclight serve');
  });
});

describe('arclight serve: model module errors → exit 1', () => {
  it('nonexistent file → exit 1 with "not found"', { timeout: START_TIMEOUT_MS }, async () => {
    const result = await runCli(['serve', 'test/fixtures/does-not-exist.ts', '--port', '0']);
    expect(result.code, describeResult(result)).toBe(1);
    expect(result.stderr).toMatch(/not found/i);
    expect(result.stderr).toContain('does-not-exist.ts');
    expect(result.stdout).not.toContain('serving');
  });

  it('a module without a default export → exit 1 with a clear message', { timeout: START_TIMEOUT_MS }, async () => {
    const result = await runCli(['serve', 'test/fixtures/no-default.ts', '--port', '0']);
    expect(result.code, describeResult(result)).toBe(1);
    expect(result.stderr).toContain('no-default.ts');
    expect(result.stderr).toMatch(/no default export/);
    expect(result.stderr).toContain('export default defineModel');
    expect(result.stdout).not.toContain('serving');
  });

  it('an invalid definition → exit 1 listing each problem', { timeout: START_TIMEOUT_MS }, async () => {
    const result = await runCli(['serve', 'test/fixtures/invalid-model.ts', '--port', '0']);
    expect(result.code, describeResult(result)).toBe(1);
    expect(result.stderr).toContain('invalid-model.ts is not a valid Arclight model');
    expect(result.stderr).toMatch(/- fps must be a number/);
    expect(result.stderr).toMatch(/- tracks\[1\]\.kind must be "video" or "audio"/);
    expect(result.stderr).toMatch(/- commands\.set_color\.handler must be a function/);
    // Only the three mistakes: the valid track is not reported.
    expect(result.stderr).not.toMatch(/tracks\[0\]/);
    expect(result.stdout).not.toContain('serving');
  });

  it('a port already in use → exit 1 saying so', { timeout: START_TIMEOUT_MS }, async () => {
    const blocker: Server = createServer();
    const port = await new Promise<number>((resolve, reject) => {
      blocker.once('error', reject);
      blocker.listen(0, '127.0.0.1', () => resolve((blocker.address() as { port: number }).port));
    });
    try {
      const result = await runCli(['serve', 'models/examples/pattern', '--port', String(port), '--ice-host', '127.0.0.1']);
      expect(result.code, describeResult(result)).toBe(1);
      expect(result.stderr).toContain(`port ${port} is in use`);
    } finally {
      await new Promise<void>((resolve) => blocker.close(() => resolve()));
    }
  });
});

describe('arclight serve: a valid model', () => {
  it('serves on --port 0, answers /health, and exits 0 within 5 s of SIGTERM', { timeout: START_TIMEOUT_MS + 30_000 }, async () => {
    const child = spawnCli(['serve', 'models/examples/pattern', '--port', '0', '--ice-host', '127.0.0.1', '--no-playground']);
    const match = await waitForOutput(child, /serving model "pattern" on http:\/\/localhost:(\d+)\b/, START_TIMEOUT_MS);
    const port = Number(match[1]);
    expect(port).toBeGreaterThan(0);
    expect(port).toBeLessThan(65536);

    // The CLI binds 127.0.0.1 by default; talk to it there.
    let health: Response | undefined;
    const deadline = Date.now() + 15_000;
    while (!health || health.status !== 200) {
      health = await fetch(`http://127.0.0.1:${port}/health`).catch(() => undefined);
      if (health?.status === 200 || Date.now() > deadline) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(health?.status).toBe(200);
    expect(await health!.json()).toMatchObject({ status: 'healthy', state: 'available' });
    const capabilities = (await (await fetch(`http://127.0.0.1:${port}/capabilities`)).json()) as { tracks: { name: string }[] };
    expect(capabilities.tracks.map((t) => t.name)).toEqual(['main_video', 'tone']);

    const signalledAt = Date.now();
    child.kill('SIGTERM');
    const result = await exited(child, 15_000);
    const took = Date.now() - signalledAt;
    expect(result.code, describeResult(result)).toBe(0);
    expect(result.signal).toBeNull();
    expect(took, `exited ${took} ms after SIGTERM`).toBeLessThan(5_000);
    expect(result.stdout).toContain('shutting down');
    // The port is released.
    await expect(fetch(`http://127.0.0.1:${port}/health`)).rejects.toThrow();
  });

  it(
    '--turn-url/--turn-ttl with $ARCLIGHT_TURN_SECRET: ice_servers carries a TURN credential, never the secret',
    { timeout: START_TIMEOUT_MS + 30_000 },
    async () => {
      const secret = 'cli-turn-secret-never-served';
      const child = spawnCli(
        [
          'serve',
          'models/examples/pattern',
          '--port',
          '0',
          '--ice-host',
          '127.0.0.1',
          '--ice-port-range',
          '41990-41999',
          '--public-ip',
          '203.0.113.7',
          '--turn-url',
          'turn:127.0.0.1:3478?transport=udp',
          '--turn-ttl',
          '120',
          '--no-playground',
          '--no-recording',
        ],
        { ARCLIGHT_TURN_SECRET: secret },
      );
      const match = await waitForOutput(child, /serving model "pattern" on http:\/\/localhost:(\d+)\b/, START_TIMEOUT_MS);
      const url = `http://127.0.0.1:${match[1]}`;
      const session = (await (await fetch(`${url}/start_session`, { method: 'POST', body: '{}' })).json()) as { session_id: string };
      const text = await (await fetch(`${url}/sessions/${session.session_id}/transport/webrtc/ice_servers`)).text();
      expect(text).not.toContain(secret);
      const body = JSON.parse(text) as { ice_servers: { uris: string[]; credentials?: { username: string; password: string } }[] };
      expect(body.ice_servers).toHaveLength(1);
      expect(body.ice_servers[0]!.uris).toEqual(['turn:127.0.0.1:3478?transport=udp']);
      const [expiry, id] = body.ice_servers[0]!.credentials!.username.split(':');
      expect(id).toBe(session.session_id);
      expect(Number(expiry) - Date.now() / 1000).toBeGreaterThan(110);
      expect(Number(expiry) - Date.now() / 1000).toBeLessThanOrEqual(120);
      child.kill('SIGTERM');
      expect((await exited(child, 15_000)).code).toBe(0);
    },
  );
});
