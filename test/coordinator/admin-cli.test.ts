/**
 * `arclight admin …` and `arclight coordinator`, as operators run them: real processes on a
 * SQLite file (and one verb on PostgreSQL), JSON on stdout, exit 2 for usage errors and 1 for
 * failures; a key created by the CLI mints tokens from the served coordinator, and rotating it
 * from the CLI while that coordinator runs shuts the old key out.
 */

import { spawn, type ChildProcess } from 'node:child_process';
import * as coordinatorCli from '../../coordinator/cli.ts';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { freshDatabase } from './storage-engines.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const NODE_FLAGS = ['--conditions=source', '--import', 'tsx'];
const children = new Set<ChildProcess>();
afterAll(() => {
  for (const child of children) child.kill('SIGKILL');
});

function env(): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('VITEST') && k !== 'DATABASE_URL') out[k] = v;
  out['ARCLIGHT_LOG'] = 'warn';
  return out;
}

function start(args: readonly string[]): ChildProcess & { stdout: NodeJS.ReadableStream } {
  const child = spawn(process.execPath, [...NODE_FLAGS, 'bin/arclight.js', ...args], {
    cwd: ROOT,
    env: env(),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child as ChildProcess & { stdout: NodeJS.ReadableStream };
}

async function run(args: readonly string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = start(args);
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const code = await new Promise<number | null>((resolve) => child.once('close', (c) => resolve(c)));
  return { code, stdout, stderr };
}

/**
 * The CLI's `main` in this process, its output captured: the same code as `bin/arclight.js admin …`
 * (which only picks the module and exits with main's code) without a Node start per call — ~1 s of
 * CPU each, and this file makes dozens. `run` spawns the real binary where the process matters.
 */
async function inProcess(args: readonly string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const write = { out: process.stdout.write.bind(process.stdout), err: process.stderr.write.bind(process.stderr) };
  process.stdout.write = ((chunk: string | Uint8Array) => ((stdout += String(chunk)), true)) as typeof process.stdout.write;
  process.stderr.write = ((chunk: string | Uint8Array) => ((stderr += String(chunk)), true)) as typeof process.stderr.write;
  try {
    const code = await coordinatorCli.main(args);
    return { code, stdout, stderr };
  } finally {
    process.stdout.write = write.out;
    process.stderr.write = write.err;
  }
}

async function admin(database: string, ...args: string[]): Promise<Record<string, any>> {
  const result = await inProcess(['admin', ...args, '--database', database]);
  expect(result.code, result.stderr).toBe(0);
  return JSON.parse(result.stdout) as Record<string, any>;
}

const mintWith = (url: string, key: string) =>
  fetch(`${url}/tokens`, {
    method: 'POST',
    headers: { 'Service-API-Key': key, 'content-type': 'application/json' },
    body: JSON.stringify({ authorization_details: [{ type: 'session', resources: { models: { match: ['pattern', 'secret'] } } }] }),
  });

describe('arclight admin / arclight coordinator', () => {
  it('sets up an account, key and models that a served coordinator then honours', async () => {
    const database = await freshDatabase('sqlite');
    const account = await admin(database, 'create-account', 'Acme', '--concurrent-sessions', '7');
    expect(account).toMatchObject({
      name: 'Acme',
      quotas: { concurrentSessions: 7, sessionsPerMinute: 50, maxSessionDurationSeconds: 1200 },
    });
    // Every new account gets the signup credits (100,000 by default), before anything is granted by hand.
    expect(account.signupGrant).toMatchObject({ kind: 'promotional', credits: 100_000, withheld: 0 });
    const issued = await admin(database, 'create-key', account.id);
    expect(issued.key).toMatch(/^rk_/);
    expect(await admin(database, 'add-model', 'pattern', '--rate', '5')).toMatchObject({
      name: 'pattern',
      rateCreditsPerSecond: 5,
      public: true,
    });
    expect(await admin(database, 'add-model', 'secret', '--rate', '9', '--private')).toMatchObject({ public: false });
    expect(await admin(database, 'grant-model', account.id, 'secret')).toMatchObject({ granted: true });
    expect((await admin(database, 'set-quotas', account.id, '--sessions-per-minute', '9')).quotas.sessionsPerMinute).toBe(9);
    expect(await admin(database, 'grant-credits', account.id, '500')).toMatchObject({ kind: 'promotional', credits: 500 });
    expect(await admin(database, 'buy-credits', account.id, '3')).toMatchObject({ kind: 'purchased', credits: 30_000 });
    expect((await admin(database, 'balance', account.id)).credits).toBe(100_000 + 30_500);
    expect((await admin(database, 'set-quotas', account.id, '--monthly-credit-cap', '250000')).quotas.monthlyCreditCap).toBe(250_000);
    expect(await admin(database, 'usage', account.id, '--since', '2026-01-01')).toMatchObject({
      since: Date.parse('2026-01-01'),
      sessions: [],
      total: { billed_seconds: 0, credits: 0 },
      month: { spent_credits: 0, cap_credits: 250_000 },
    });
    expect((await run(['admin', 'usage', account.id, '--since', 'yesterday-ish', '--database', database])).code).toBe(2);

    const server = start(['coordinator', '--port', '0', '--database', database]);
    let out = '';
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no URL in 60 s: ${out}`)), 60_000);
      server.stdout.setEncoding('utf8').on('data', (chunk: string) => {
        out += chunk;
        const match = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
        if (match) {
          clearTimeout(timer);
          resolve(match[1]!);
        }
      });
    });
    expect((await mintWith(url, issued.key)).status).toBe(200);
    const rotated = await admin(database, 'rotate-key', issued.id);
    expect(rotated.replaces).toBe(issued.id);
    expect((await mintWith(url, issued.key)).status).toBe(401);
    expect((await mintWith(url, rotated.key)).status).toBe(200);
    const listed = await admin(database, 'list-keys', account.id);
    expect(listed.keys.map((k: { revokedAt: number | null }) => k.revokedAt !== null)).toEqual([true, false]);
    expect(JSON.stringify(listed)).not.toContain(rotated.key.slice(12));
    expect((await admin(database, 'list-sessions', account.id, '--open')).sessions).toEqual([]);

    server.kill('SIGTERM');
    expect(await new Promise((resolve) => server.once('exit', resolve))).toBe(0);
  }, 180_000);

  it('works on PostgreSQL too', async () => {
    const database = await freshDatabase('postgres');
    const account = await admin(database, 'create-account', 'Pg');
    expect((await admin(database, 'create-key', account.id)).key).toMatch(/^rk_/);
    expect((await admin(database, 'balance', account.id)).grants).toEqual([
      expect.objectContaining({ kind: 'promotional', credits: 100_000, remaining: 100_000 }),
    ]);
    // The ceiling (100,000,000 credits) bounds promotional grants: the rest is withheld, and said so.
    expect(await admin(database, 'grant-credits', account.id, '99950000')).toMatchObject({ credits: 99_900_000, withheld: 50_000 });
    expect((await admin(database, 'balance', account.id)).credits).toBe(100_000_000);
  }, 60_000);

  it('create-account grants --signup-credits, else $ARCLIGHT_SIGNUP_CREDITS, else 100,000; 0 turns it off; a bad value exits 2', async () => {
    const database = await freshDatabase('sqlite');
    const balance = async (id: string) => (await admin(database, 'balance', id)).credits as number;
    const off = await admin(database, 'create-account', 'Off', '--signup-credits', '0');
    expect(off.signupGrant).toBeUndefined();
    expect(await balance(off.id)).toBe(0);
    const previous = process.env['ARCLIGHT_SIGNUP_CREDITS'];
    process.env['ARCLIGHT_SIGNUP_CREDITS'] = '2500';
    try {
      expect(await balance((await admin(database, 'create-account', 'From the environment')).id)).toBe(2_500);
      expect(await balance((await admin(database, 'create-account', 'Flag first', '--signup-credits', '700')).id)).toBe(700);
      process.env['ARCLIGHT_SIGNUP_CREDITS'] = 'plenty';
      const badEnv = await inProcess(['admin', 'create-account', 'X', '--database', database]);
      expect(badEnv.code).toBe(2);
      expect(badEnv.stderr).toMatch(/ARCLIGHT_SIGNUP_CREDITS must be a whole number of credits/);
      expect(badEnv.stderr).toContain('Usage:');
      // Only create-account reads it: the other verbs still work.
      expect(await balance(off.id)).toBe(0);
    } finally {
      if (previous === undefined) delete process.env['ARCLIGHT_SIGNUP_CREDITS'];
      else process.env['ARCLIGHT_SIGNUP_CREDITS'] = previous;
    }
    for (const [command, value, message] of [
      ['admin', 'ten', /--signup-credits must be a whole number of credits/],
      ['admin', '100000001', /--signup-credits must be at most the balance ceiling, 100000000 credits/],
      ['coordinator', '1.5', /--signup-credits must be a whole number of credits/],
    ] as const) {
      const args = command === 'admin' ? ['admin', 'create-account', 'Y'] : ['coordinator', '--port', '0'];
      const result = await inProcess([...args, '--signup-credits', value, '--database', database]);
      expect(result.code, `${command} ${value}`).toBe(2);
      expect(result.stderr).toMatch(message);
      expect(result.stderr).toContain('Usage:');
    }
  }, 60_000);

  it('exits 2 with usage for usage errors and 1 for failures', async () => {
    const database = await freshDatabase('sqlite');
    // The binary's exit status is main's return value: checked once through the real binary,
    // the other cases in process.
    const usageErrors = [
      ['admin'],
      ['admin', 'frobnicate'],
      ['admin', 'create-key'],
      ['admin', 'add-model', 'x'],
      ['admin', 'retire-signing-key'],
      ['admin', 'rotate-signing-key', 'extra'],
      ['coordinator', '--port', '0', '--signing-key-refresh-ms', '50'],
    ];
    for (const [index, args] of usageErrors.entries()) {
      const result = await (index === 0 ? run : inProcess)([...args, '--database', database]);
      expect(result.code, args.join(' ')).toBe(2);
      expect(result.stderr).toContain('Usage:');
    }
    const failed = await run(['admin', 'create-key', 'no-such-account', '--database', database]);
    expect(failed.code).toBe(1);
    expect(failed.stderr).toContain('no account no-such-account');
    const account = JSON.parse((await inProcess(['admin', 'create-account', 'X', '--database', database])).stdout) as { id: string };
    const tooMuch = await inProcess(['admin', 'buy-credits', account.id, '5000', '--database', database]);
    expect(tooMuch.code).toBe(1);
    expect(tooMuch.stderr).toMatch(/1 to 1000 whole US dollars/);
    const missingFile = await inProcess([
      'admin',
      'rotate-signing-key',
      '--signing-key-secret-file',
      '/nonexistent/secret',
      '--database',
      database,
    ]);
    expect(missingFile.code).toBe(1);
    expect(missingFile.stderr).toMatch(/cannot read the signing-key secret file \/nonexistent\/secret/);
  }, 120_000);
});
