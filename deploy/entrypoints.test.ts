/**
 * The containers' entrypoint scripts (deploy/*\/entrypoint.sh) and the runtime's preStop drain
 * hook, run with `sh` and a stub `node` on PATH that prints its PID and argv: environment → the
 * flags the real CLIs take, clear failures for missing variables, and `exec` (the stub has the
 * shell's PID, and a signal sent to that PID reaches it).
 */

import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..');
const RUNTIME_ENTRYPOINT = join(root, 'deploy/runtime/entrypoint.sh');
const COORDINATOR_ENTRYPOINT = join(root, 'deploy/coordinator/entrypoint.sh');
const DRAIN = join(root, 'deploy/runtime/drain.sh');
const HOME = '/opt/arclight';
const CLI = `${HOME}/bin/arclight.js`;

let stubDir: string;
let trapDir: string;

beforeAll(() => {
  stubDir = mkdtempSync(join(tmpdir(), 'arclight-entrypoint-'));
  writeFileSync(join(stubDir, 'node'), '#!/bin/sh\necho "pid=$$"\nfor arg in "$@"; do echo "arg=$arg"; done\n');
  chmodSync(join(stubDir, 'node'), 0o755);
  // A `node` that waits for a signal: proves SIGTERM sent to the entrypoint's PID reaches it.
  trapDir = mkdtempSync(join(tmpdir(), 'arclight-entrypoint-trap-'));
  writeFileSync(
    join(trapDir, 'node'),
    '#!/bin/sh\ntrap \'echo "got TERM"; exit 0\' TERM\necho "ready pid=$$"\nwhile :; do sleep 0.05; done\n',
  );
  chmodSync(join(trapDir, 'node'), 0o755);
});

afterAll(() => {
  rmSync(stubDir, { recursive: true, force: true });
  rmSync(trapDir, { recursive: true, force: true });
});

interface Run {
  readonly status: number | null;
  readonly pid: number;
  /** The stub's PID, or undefined when it did not run. */
  readonly nodePid: number | undefined;
  /** The stub's arguments (undefined when it did not run). */
  readonly argv: string[] | undefined;
  readonly stderr: string;
}

/** Runs a script with only PATH (stub first), ARCLIGHT_HOME and `env` set. */
function run(script: string, env: Record<string, string>, args: readonly string[] = []): Run {
  const result = spawnSync('sh', [script, ...args], {
    env: { PATH: `${stubDir}:/usr/bin:/bin`, ARCLIGHT_HOME: HOME, ...env },
    encoding: 'utf8',
    timeout: 10_000,
  });
  const lines = result.stdout.split('\n').filter((line) => line !== '');
  const pidLine = lines.find((line) => line.startsWith('pid='));
  return {
    status: result.status,
    pid: result.pid,
    nodePid: pidLine === undefined ? undefined : Number(pidLine.slice(4)),
    argv: pidLine === undefined ? undefined : lines.filter((line) => line.startsWith('arg=')).map((line) => line.slice(4)),
    stderr: result.stderr,
  };
}

/** Every `--flag` in argv must be an option the CLI's parseArgs declares. */
function expectFlagsDeclared(argv: readonly string[], cliSource: string): void {
  const source = readFileSync(join(root, cliSource), 'utf8');
  for (const arg of argv.filter((a) => a.startsWith('--'))) {
    const name = arg.slice(2);
    const declared = new RegExp(`(?:'${name}'|\\b${name}):\\s*\\{\\s*type:`).test(source);
    expect(declared, `${arg} is not an option of ${cliSource}`).toBe(true);
  }
}

describe('runtime entrypoint', () => {
  it('serves the model with the container defaults, and execs node (same PID, no shell left)', () => {
    const result = run(RUNTIME_ENTRYPOINT, { ARCLIGHT_MODEL: '/app/models/examples/pattern' });
    expect(result.status).toBe(0);
    expect(result.argv).toEqual([CLI, 'serve', '/app/models/examples/pattern', '--port', '8080', '--host', '0.0.0.0']);
    expect(result.nodePid).toBe(result.pid);
  });

  it('maps every variable to its flag; the secrets stay in the environment', () => {
    const result = run(RUNTIME_ENTRYPOINT, {
      ARCLIGHT_MODEL: '/models/my model',
      ARCLIGHT_PORT: '9000',
      ARCLIGHT_HOST: '10.1.2.3',
      ARCLIGHT_COORDINATOR_URL: 'http://arclight-coordinator:8090',
      ARCLIGHT_RUNTIME_SECRET: 's3cret-value',
      ARCLIGHT_RUNTIME_ID: 'gpu-0',
      ARCLIGHT_ADVERTISE_URL: 'http://10.1.2.3:9000',
      ARCLIGHT_DRAIN_SECONDS: '1200',
      ARCLIGHT_GRACE_SECONDS: '45',
      ARCLIGHT_ICE_HOSTS: '203.0.113.7, 198.51.100.2',
      ARCLIGHT_ICE_PORT_RANGE: '40000-40999',
      ARCLIGHT_PUBLIC_IP: '203.0.113.7',
      ARCLIGHT_TURN_URLS: 'turn:turn.example.com:3478?transport=udp,turns:turn.example.com:5349',
      ARCLIGHT_TURN_SECRET: 'turn-secret',
      ARCLIGHT_TURN_TTL: '600',
      ARCLIGHT_LATENCY: 'realtime',
      ARCLIGHT_CODECS: 'h265,h264,vp8',
      ARCLIGHT_PLAYGROUND: 'false',
      ARCLIGHT_RECORDING: '0',
      ARCLIGHT_MODERATOR_URL: 'http://moderator:9090/check',
      ARCLIGHT_MODERATOR_TOKEN: 'mod-token',
    });
    expect(result.stderr).toBe('');
    expect(result.argv).toEqual([
      CLI,
      'serve',
      '/models/my model',
      '--port',
      '9000',
      '--host',
      '10.1.2.3',
      '--coordinator',
      'http://arclight-coordinator:8090',
      '--runtime-id',
      'gpu-0',
      '--advertise-url',
      'http://10.1.2.3:9000',
      '--drain-seconds',
      '1200',
      '--grace',
      '45',
      '--ice-port-range',
      '40000-40999',
      '--public-ip',
      '203.0.113.7',
      '--turn-ttl',
      '600',
      '--latency',
      'realtime',
      '--codecs',
      'h265,h264,vp8',
      '--moderator-url',
      'http://moderator:9090/check',
      '--no-playground',
      '--no-recording',
      '--ice-host',
      '203.0.113.7',
      '--ice-host',
      '198.51.100.2',
      '--turn-url',
      'turn:turn.example.com:3478?transport=udp',
      '--turn-url',
      'turns:turn.example.com:5349',
    ]);
    for (const secret of ['s3cret-value', 'mod-token', 'turn-secret']) expect(result.argv!.join(' ')).not.toContain(secret);
    expectFlagsDeclared(result.argv!, 'runtime/cli.ts');
    expect(result.nodePid).toBe(result.pid);
  });

  it('maps the upload and recording variables to their flags', () => {
    const result = run(RUNTIME_ENTRYPOINT, {
      ARCLIGHT_MODEL: '/m',
      ARCLIGHT_UPLOAD_MAX_BYTES: '50M',
      ARCLIGHT_UPLOAD_MIME_TYPES: 'image/png, image/jpeg',
      ARCLIGHT_UPLOAD_MAX_FILES: '8',
      ARCLIGHT_UPLOAD_DIR: '/data/uploads',
      ARCLIGHT_RECORDING_DIR: '/data/recordings',
      ARCLIGHT_RECORDING_TRACK: 'main_video',
      ARCLIGHT_RECORDING_SEGMENT_SECONDS: '2',
      ARCLIGHT_RECORDING_BITRATE: '3000',
      ARCLIGHT_MAX_CLIP_SECONDS: '120',
    });
    expect(result.stderr).toBe('');
    expect(result.argv).toEqual([
      CLI,
      'serve',
      '/m',
      '--port',
      '8080',
      '--host',
      '0.0.0.0',
      '--upload-max-bytes',
      '50M',
      '--upload-max-files',
      '8',
      '--upload-dir',
      '/data/uploads',
      '--recording-dir',
      '/data/recordings',
      '--recording-track',
      'main_video',
      '--recording-segment-seconds',
      '2',
      '--recording-bitrate',
      '3000',
      '--max-clip-seconds',
      '120',
      '--upload-mime-type',
      'image/png',
      '--upload-mime-type',
      'image/jpeg',
    ]);
    expectFlagsDeclared(result.argv!, 'runtime/cli.ts');
  });

  it('refuses a recording variable when recording is off, as the CLI would', () => {
    const result = run(RUNTIME_ENTRYPOINT, { ARCLIGHT_MODEL: '/m', ARCLIGHT_RECORDING: 'false', ARCLIGHT_MAX_CLIP_SECONDS: '60' });
    expect(result.status).toBe(64);
    expect(result.stderr).toContain('ARCLIGHT_MAX_CLIP_SECONDS is set but ARCLIGHT_RECORDING is false');
    expect(result.argv).toBeUndefined();
  });

  it("appends the container's arguments after the mapped flags, each kept whole", () => {
    const result = run(RUNTIME_ENTRYPOINT, { ARCLIGHT_MODEL: '/m' }, ['--latency', 'smooth', 'an argument with spaces']);
    expect(result.argv).toEqual([
      CLI,
      'serve',
      '/m',
      '--port',
      '8080',
      '--host',
      '0.0.0.0',
      '--latency',
      'smooth',
      'an argument with spaces',
    ]);
  });

  it('does not glob-expand the ICE address list', () => {
    const result = run(RUNTIME_ENTRYPOINT, { ARCLIGHT_MODEL: '/m', ARCLIGHT_ICE_HOSTS: '*' });
    expect(result.argv!.slice(-2)).toEqual(['--ice-host', '*']);
  });

  it('reads on/off variables as true/false and refuses anything else', () => {
    expect(run(RUNTIME_ENTRYPOINT, { ARCLIGHT_MODEL: '/m', ARCLIGHT_PLAYGROUND: 'yes', ARCLIGHT_RECORDING: 'true' }).argv).toEqual([
      CLI,
      'serve',
      '/m',
      '--port',
      '8080',
      '--host',
      '0.0.0.0',
    ]);
    const wrong = run(RUNTIME_ENTRYPOINT, { ARCLIGHT_MODEL: '/m', ARCLIGHT_RECORDING: 'maybe' });
    expect(wrong.status).toBe(64);
    expect(wrong.stderr).toContain('ARCLIGHT_RECORDING must be true or false (got "maybe")');
    expect(wrong.argv).toBeUndefined();
  });

  it('fails clearly without ARCLIGHT_MODEL, and runs nothing', () => {
    const result = run(RUNTIME_ENTRYPOINT, {});
    expect(result.status).toBe(64);
    expect(result.stderr).toMatch(/^arclight-runtime: ARCLIGHT_MODEL is not set: set it to the model module to serve/);
    expect(result.argv).toBeUndefined();
  });

  it('fails clearly in hosted mode without the runtime secret', () => {
    const result = run(RUNTIME_ENTRYPOINT, { ARCLIGHT_MODEL: '/m', ARCLIGHT_COORDINATOR_URL: 'http://c:8090' });
    expect(result.status).toBe(64);
    expect(result.stderr).toContain('ARCLIGHT_COORDINATOR_URL is set but ARCLIGHT_RUNTIME_SECRET is not');
    expect(result.argv).toBeUndefined();
  });

  it('fails clearly with TURN servers but no TURN secret', () => {
    const result = run(RUNTIME_ENTRYPOINT, { ARCLIGHT_MODEL: '/m', ARCLIGHT_TURN_URLS: 'turn:t:3478' });
    expect(result.status).toBe(64);
    expect(result.stderr).toContain('ARCLIGHT_TURN_URLS is set but ARCLIGHT_TURN_SECRET is not');
    expect(result.argv).toBeUndefined();
  });

  it('refuses hosted-mode settings without a coordinator (they would be ignored)', () => {
    for (const name of ['ARCLIGHT_RUNTIME_ID', 'ARCLIGHT_ADVERTISE_URL', 'ARCLIGHT_DRAIN_SECONDS']) {
      const result = run(RUNTIME_ENTRYPOINT, { ARCLIGHT_MODEL: '/m', [name]: '1' });
      expect(result.status).toBe(64);
      expect(result.stderr).toContain(`${name} is set but ARCLIGHT_COORDINATOR_URL is not`);
    }
  });
});

describe('coordinator entrypoint', () => {
  const required = {
    DATABASE_URL: 'postgres://arclight:pw@db:5432/arclight',
    ARCLIGHT_RUNTIME_SECRET: 'runtime-secret',
    ARCLIGHT_SIGNING_KEY_SECRET: 'signing-key-secret-value',
  };

  it('serves with the container defaults; the database URL and secrets stay in the environment', () => {
    const result = run(COORDINATOR_ENTRYPOINT, required);
    expect(result.status).toBe(0);
    expect(result.argv).toEqual([CLI, 'coordinator', '--port', '8090', '--host', '0.0.0.0']);
    expect(result.argv!.join(' ')).not.toContain('pw@db');
    expect(result.argv!.join(' ')).not.toContain('runtime-secret');
    expect(result.argv!.join(' ')).not.toContain('signing-key-secret-value');
    expect(result.nodePid).toBe(result.pid);
  });

  it('maps every variable to its flag, then the container arguments', () => {
    const result = run(
      COORDINATOR_ENTRYPOINT,
      {
        ...required,
        ARCLIGHT_PORT: '9090',
        ARCLIGHT_HOST: '::',
        ARCLIGHT_WORKERS: '4',
        ARCLIGHT_RECONNECT_WINDOW: '60',
        ARCLIGHT_METER_FLUSH_MS: '2000',
        ARCLIGHT_HEARTBEAT_MS: '3000',
        ARCLIGHT_SIGNING_KEY_REFRESH_MS: '2500',
        ARCLIGHT_PUBLIC_URL: 'https://api.example.com',
      },
      ['--port', '9191'],
    );
    expect(result.stderr).toBe('');
    expect(result.argv).toEqual([
      CLI,
      'coordinator',
      '--port',
      '9090',
      '--host',
      '::',
      '--workers',
      '4',
      '--reconnect-window',
      '60',
      '--meter-flush-ms',
      '2000',
      '--heartbeat-ms',
      '3000',
      '--signing-key-refresh-ms',
      '2500',
      '--public-url',
      'https://api.example.com',
      '--port',
      '9191',
    ]);
    expectFlagsDeclared(result.argv!, 'coordinator/cli.ts');
    expect(result.nodePid).toBe(result.pid);
  });

  it('passes a public URL that is an origin (a port, a trailing slash allowed) and refuses anything else', () => {
    for (const url of ['http://localhost:8090', 'https://api.example.com/', 'https://[2001:db8::1]:8443']) {
      const result = run(COORDINATOR_ENTRYPOINT, { ...required, ARCLIGHT_PUBLIC_URL: url });
      expect(result.stderr).toBe('');
      expect(result.argv!.slice(-2)).toEqual(['--public-url', url]);
    }
    // A path would be dropped by the runtimes (clip URLs take an origin), a scheme other than
    // http(s) is refused by the CLI: both stop the container here, with the variable's name.
    for (const url of [
      'https://example.com/arclight',
      'ftp://files.example.com',
      'api.example.com',
      'https://',
      'https://a b',
      'https://x?y=1',
    ]) {
      const result = run(COORDINATOR_ENTRYPOINT, { ...required, ARCLIGHT_PUBLIC_URL: url });
      expect(result.status, url).toBe(64);
      expect(result.stderr).toContain(
        `ARCLIGHT_PUBLIC_URL must be an http(s) origin with no path, e.g. https://api.example.com (got "${url}")`,
      );
      expect(result.argv).toBeUndefined();
    }
  });

  it('runs an admin verb instead when the arguments start with admin (no runtime secret needed)', () => {
    const result = run(COORDINATOR_ENTRYPOINT, { DATABASE_URL: required.DATABASE_URL }, ['admin', 'add-model', 'pattern', '--rate', '5']);
    expect(result.status).toBe(0);
    expect(result.argv).toEqual([CLI, 'admin', 'add-model', 'pattern', '--rate', '5']);
    expect(result.nodePid).toBe(result.pid);
  });

  it('fails clearly without DATABASE_URL (server and admin alike), and runs nothing', () => {
    for (const args of [[], ['admin', 'balance', 'x']]) {
      const result = run(COORDINATOR_ENTRYPOINT, { ARCLIGHT_RUNTIME_SECRET: 's' }, args);
      expect(result.status).toBe(64);
      expect(result.stderr).toMatch(/^arclight-coordinator: DATABASE_URL is not set/);
      expect(result.argv).toBeUndefined();
    }
  });

  it('fails clearly without ARCLIGHT_RUNTIME_SECRET', () => {
    const result = run(COORDINATOR_ENTRYPOINT, { DATABASE_URL: required.DATABASE_URL, ARCLIGHT_SIGNING_KEY_SECRET: 's' });
    expect(result.status).toBe(64);
    expect(result.stderr).toContain('ARCLIGHT_RUNTIME_SECRET is not set: runtimes could not register');
    expect(result.argv).toBeUndefined();
  });

  it('on PostgreSQL, fails clearly without the signing-key secret; takes it as a variable or a file; SQLite needs none', () => {
    for (const url of [required.DATABASE_URL, 'postgresql://db/arclight']) {
      const result = run(COORDINATOR_ENTRYPOINT, { DATABASE_URL: url, ARCLIGHT_RUNTIME_SECRET: 's' });
      expect(result.status).toBe(64);
      expect(result.stderr).toContain('ARCLIGHT_SIGNING_KEY_SECRET (or ARCLIGHT_SIGNING_KEY_SECRET_FILE) is not set: on PostgreSQL');
      expect(result.argv).toBeUndefined();
    }
    const fromFile = run(COORDINATOR_ENTRYPOINT, {
      DATABASE_URL: required.DATABASE_URL,
      ARCLIGHT_RUNTIME_SECRET: 's',
      ARCLIGHT_SIGNING_KEY_SECRET_FILE: '/etc/arclight/signing-key/secret',
    });
    expect(fromFile.status).toBe(0);
    expect(fromFile.argv).toEqual([CLI, 'coordinator', '--port', '8090', '--host', '0.0.0.0']); // the CLI reads the variable itself
    expect(run(COORDINATOR_ENTRYPOINT, { DATABASE_URL: '/data/coordinator.db', ARCLIGHT_RUNTIME_SECRET: 's' }).status).toBe(0);
    // Admin verbs are left to the CLI, which asks for the secret only for the signing-key verbs.
    expect(run(COORDINATOR_ENTRYPOINT, { DATABASE_URL: required.DATABASE_URL }, ['admin', 'list-keys', 'x']).status).toBe(0);
  });
});

/** Spawns `command`, resolving once a stdout line matches `ready`. */
function startUntil(command: string, args: readonly string[], env: NodeJS.ProcessEnv, ready: RegExp) {
  const child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const started = new Promise<string>((resolve, reject) => {
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => {
      output += chunk;
      const match = ready.exec(output);
      if (match) resolve(match[0]);
    });
    child.once('exit', () => reject(new Error(`exited before ${ready}: ${output}`)));
  });
  return { child, started, exited, output: () => output };
}

describe('signals', () => {
  for (const [name, script, env] of [
    ['runtime', RUNTIME_ENTRYPOINT, { ARCLIGHT_MODEL: '/m' }],
    [
      'coordinator',
      COORDINATOR_ENTRYPOINT,
      { DATABASE_URL: 'postgres://x', ARCLIGHT_RUNTIME_SECRET: 's', ARCLIGHT_SIGNING_KEY_SECRET: 'k' },
    ],
  ] as const) {
    it(`SIGTERM to the ${name} entrypoint's PID reaches node`, async () => {
      const run = startUntil('sh', [script], { PATH: `${trapDir}:/usr/bin:/bin`, ARCLIGHT_HOME: HOME, ...env }, /ready pid=(\d+)/);
      const line = await run.started;
      expect(Number(line.split('=')[1])).toBe(run.child.pid);
      run.child.kill('SIGTERM');
      expect(await run.exited).toBe(0);
      expect(run.output()).toContain('got TERM');
    });
  }
});

describe('runtime preStop drain hook', () => {
  it('signals the runtime and returns only once it has exited', async () => {
    // A stand-in runtime: on SIGTERM it "drains" for a second, then exits.
    const runtime = startUntil(
      'sh',
      ['-c', "trap 'sleep 1; echo drained; exit 0' TERM; echo ready; while :; do sleep 0.05; done"],
      { PATH: '/usr/bin:/bin' },
      /ready/,
    );
    await runtime.started;
    let runtimeExitedAt = 0;
    void runtime.exited.then(() => (runtimeExitedAt = performance.now()));
    const started = performance.now();
    const hook = spawn('sh', [DRAIN], { env: { PATH: '/usr/bin:/bin', ARCLIGHT_DRAIN_PID: String(runtime.child.pid) }, stdio: 'ignore' });
    expect(await new Promise((resolve) => hook.once('exit', resolve))).toBe(0);
    const hookDoneAt = performance.now();
    expect(runtime.output()).toContain('drained');
    expect(runtimeExitedAt).toBeGreaterThan(0);
    expect(runtimeExitedAt).toBeLessThanOrEqual(hookDoneAt);
    expect(hookDoneAt - started).toBeGreaterThanOrEqual(900);
  });

  it('returns at once when there is no runtime to drain', () => {
    const result = spawnSync('sh', [DRAIN], { env: { PATH: '/usr/bin:/bin', ARCLIGHT_DRAIN_PID: '999999999' }, timeout: 5000 });
    expect(result.status).toBe(0);
  });
});
