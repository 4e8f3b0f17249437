/**
 * Keys that propagate (issue 20 part 4) across real coordinator processes — what replicas of a
 * deployment are — on PostgreSQL and SQLite: two `arclight coordinator` processes on one database,
 * each re-reading the signing keys every 500 ms (`--signing-key-refresh-ms`), and the admin verbs
 * run as an operator runs them.
 *
 * - An API key revoked through replica A: the tokens it minted are refused on replica B
 *   (`token_revoked`); a key rotated through A leaves its tokens working on B (spec: rotating a key
 *   does not affect active sessions).
 * - `arclight admin rotate-signing-key`: each replica signs with the new key within the refresh
 *   interval, and a token signed by it verifies on the other; `retire-signing-key` makes every
 *   replica refuse the old key's tokens within the interval, and refuses the current key.
 * - The private keys in the database are encrypted; a coordinator on PostgreSQL without the secret,
 *   or with a wrong one, does not start.
 *
 * No timing is asserted: every wait polls with a deadline far above the bound (a loaded 2-core
 * machine runs this).
 */

import { spawn } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { decodeProtectedHeader } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as coordinatorCli from '../../coordinator/cli.ts';
import { startCoordinator } from '../../coordinator/index.ts';
import { openStorage } from '../../coordinator/storage/database.ts';
import { freePort, killProcess, startCoordinatorProcess, type CoordinatorProcess } from '../support/coordinator-process.ts';
import { waitUntil } from '../support/video-probe.ts';
import { ENGINES, freshDatabase } from './storage-engines.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const REFRESH_MS = 500;
/** Far above REFRESH_MS: a deadline, not a measurement. */
const DEADLINE_MS = 20_000;

/** `arclight admin …` in this process (coordinator/cli.ts's main, as bin/arclight.js runs it), its JSON output. */
async function admin(
  database: string,
  ...args: string[]
): Promise<{ code: number; json: Record<string, any> | undefined; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const write = { out: process.stdout.write.bind(process.stdout), err: process.stderr.write.bind(process.stderr) };
  process.stdout.write = ((chunk: string | Uint8Array) => ((stdout += String(chunk)), true)) as typeof process.stdout.write;
  process.stderr.write = ((chunk: string | Uint8Array) => ((stderr += String(chunk)), true)) as typeof process.stderr.write;
  try {
    const code = await coordinatorCli.main(['admin', ...args, '--database', database]);
    return { code, json: code === 0 ? (JSON.parse(stdout) as Record<string, any>) : undefined, stderr };
  } finally {
    process.stdout.write = write.out;
    process.stderr.write = write.err;
  }
}

/** `arclight coordinator` that is expected to refuse to start: its exit code and stderr. */
async function refusedStart(
  database: string,
  env: Record<string, string | undefined>,
  extraArgs: readonly string[] = [],
): Promise<{ code: number | null; stderr: string }> {
  const childEnv: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('VITEST') && k !== 'DATABASE_URL') childEnv[k] = v;
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined) delete childEnv[k];
    else childEnv[k] = v;
  }
  const args = [
    '--conditions=source',
    '--import',
    'tsx',
    'bin/arclight.js',
    'coordinator',
    '--port',
    '0',
    '--database',
    database,
    ...extraArgs,
  ];
  const child = spawn(process.execPath, args, { cwd: ROOT, env: childEnv, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000); // it should exit by itself
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
  clearTimeout(timer);
  return { code, stderr };
}

describe.each(ENGINES)('keys that propagate between coordinator processes on %s', (engine) => {
  let database: string;
  let a: CoordinatorProcess;
  let b: CoordinatorProcess;
  let accountId: string;
  const keys: Record<'leaked' | 'routine' | 'spare', { key: string; id: string }> = {} as never;
  const secretFile = join(tmpdir(), `arclight-key-propagation-${process.pid}-${engine}`);

  beforeAll(async () => {
    database = await freshDatabase(engine);
    const seed = await startCoordinator({ database, port: 0, meterFlushMs: 0 });
    await seed.catalog.add('pattern', 5);
    const account = await seed.accounts.create('Acme');
    accountId = account.id;
    await seed.ledger.grantPromotional(account.id, 1_000_000);
    for (const name of ['leaked', 'routine', 'spare'] as const) {
      const issued = await seed.apiKeys.create(account.id, { name });
      keys[name] = { key: issued.key, id: issued.record.id };
    }
    await seed.close();
    // B reads the secret from a file (--signing-key-secret-file); A from the environment (vitest.config.ts).
    writeFileSync(secretFile, `${process.env['ARCLIGHT_SIGNING_KEY_SECRET']}\n`);
    const flags = ['--signing-key-refresh-ms', String(REFRESH_MS)];
    [a, b] = await Promise.all([
      freePort().then((port) => startCoordinatorProcess({ database, port, extraArgs: flags })),
      freePort().then((port) =>
        startCoordinatorProcess({ database, port, extraArgs: [...flags, '--signing-key-secret-file', secretFile] }),
      ),
    ]);
  }, 90_000);
  afterAll(async () => {
    for (const replica of [a, b]) if (replica) await killProcess(replica.child);
    rmSync(secretFile, { force: true });
  });

  const mint = async (replica: CoordinatorProcess, key: string, scoped = false): Promise<string> => {
    const body = scoped ? { authorization_details: [{ type: 'session', resources: { models: { match: ['pattern'] } } }] } : {};
    const response = await fetch(`${replica.url}/tokens`, {
      method: 'POST',
      headers: { 'Service-API-Key': key, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(response.status).toBe(200);
    return ((await response.json()) as { token: string }).token;
  };
  const call = async (replica: CoordinatorProcess, method: string, path: string, bearer: string, body?: unknown) => {
    const response = await fetch(`${replica.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${bearer}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: response.status, body: (await response.json()) as Record<string, any> };
  };
  const kidOf = (token: string) => decodeProtectedHeader(token).kid!;

  it('an API key revoked through replica A: its tokens are refused on replica B; a key rotated through A leaves its tokens working on B', async () => {
    const leakedScoped = await mint(a, keys.leaked.key, true);
    const leakedUnscoped = await mint(a, keys.leaked.key);
    const routine = await mint(a, keys.routine.key);
    const created = await call(b, 'POST', '/sessions', leakedScoped, { model: { name: 'pattern' } });
    expect(created.status).toBe(200);
    const sessionId = created.body['session_id'] as string;
    expect((await call(b, 'GET', `/sessions/${sessionId}`, leakedScoped)).status).toBe(202);
    expect((await call(b, 'GET', '/platform/models', leakedUnscoped)).status).toBe(200);
    expect((await call(b, 'GET', '/platform/models', routine)).status).toBe(200);

    expect((await call(a, 'POST', `/platform/keys/${keys.routine.id}/rotate`, keys.spare.key)).status).toBe(201);
    expect((await call(a, 'DELETE', `/platform/keys/${keys.leaked.id}`, keys.spare.key)).body).toMatchObject({
      id: keys.leaked.id,
      status: 'revoked',
    });

    await waitUntil(
      async () => (await call(b, 'GET', `/sessions/${sessionId}`, leakedScoped)).status === 401,
      DEADLINE_MS,
      'B to refuse the revoked key’s session token',
    );
    for (const token of [leakedScoped, leakedUnscoped]) {
      for (const replica of [a, b]) {
        const answer = await call(replica, 'GET', token === leakedScoped ? `/sessions/${sessionId}` : '/platform/models', token);
        expect(answer.status).toBe(401);
        expect(answer.body['code']).toBe('token_revoked');
      }
    }
    // The rotated key's token works on B as before: it reads, and ends the session.
    expect((await call(b, 'GET', '/platform/models', routine)).status).toBe(200);
    expect((await call(b, 'DELETE', `/sessions/${sessionId}`, routine)).body['state']).toBe('CLOSED');
  }, 60_000);

  it('admin rotate-signing-key: every replica signs with the new key within the interval and verifies it; retire-signing-key: the old key is refused everywhere', async () => {
    const before = await mint(a, keys.spare.key);
    const oldKid = kidOf(before);
    for (const replica of [a, b]) expect((await call(replica, 'GET', '/platform/models', before)).status).toBe(200);

    const rotated = await admin(database, 'rotate-signing-key');
    expect(rotated.code, rotated.stderr).toBe(0);
    const newKid = rotated.json!['kid'] as string;
    expect(rotated.json!['verifying']).toEqual([newKid, oldKid]);
    let fromA = '';
    await waitUntil(async () => kidOf((fromA = await mint(a, keys.spare.key))) === newKid, DEADLINE_MS, 'A to sign with the new key');
    expect((await call(b, 'GET', '/platform/models', fromA)).status).toBe(200); // B verifies it, whether or not it has re-read yet
    await waitUntil(async () => kidOf(await mint(b, keys.spare.key)) === newKid, DEADLINE_MS, 'B to sign with the new key');
    for (const replica of [a, b]) expect((await call(replica, 'GET', '/platform/models', before)).status).toBe(200); // the old key still verifies

    const current = await admin(database, 'retire-signing-key', newKid);
    expect(current.code).toBe(1);
    expect(current.stderr).toMatch(/is the current signing key: rotate first/);
    const retired = await admin(database, 'retire-signing-key', oldKid);
    expect(retired.code, retired.stderr).toBe(0);
    expect(retired.json).toMatchObject({ kid: oldKid, retired: true });
    for (const replica of [a, b]) {
      await waitUntil(
        async () => (await call(replica, 'GET', '/platform/models', before)).status === 401,
        DEADLINE_MS,
        'the replica to refuse the retired key',
      );
      expect((await call(replica, 'GET', '/platform/models', fromA)).status).toBe(200);
      const jwks = (await (await fetch(`${replica.url}/.well-known/jwks.json`)).json()) as { keys: Array<{ kid: string }> };
      expect(jwks.keys.map((k) => k.kid)).toEqual([newKid]);
    }
    expect((await admin(database, 'list-signing-keys')).json).toEqual({
      keys: [expect.objectContaining({ kid: newKid, current: true, superseded_at: null })],
      encrypted: true,
    });
  }, 90_000);

  it('keeps the private signing keys encrypted in the database: no private JWK member', async () => {
    const storage = await openStorage(database);
    try {
      const rows = await storage.db.selectFrom('signing_keys').select(['kid', 'private_jwk']).execute();
      expect(rows.length).toBeGreaterThan(0);
      for (const row of rows) {
        expect(row.private_jwk).toMatch(/^v1:/);
        expect(row.private_jwk).not.toContain('"d":');
      }
    } finally {
      await storage.close();
    }
  });

  it('does not start with a wrong secret (a file given on the command line overrides the environment)', async () => {
    const wrong = join(tmpdir(), `arclight-key-propagation-wrong-${process.pid}-${engine}`);
    writeFileSync(wrong, 'this-is-not-the-secret-the-keys-have\n');
    const refused = await refusedStart(database, {}, ['--signing-key-secret-file', wrong]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/signing-key secret from --signing-key-secret-file \(.*\) does not decrypt signing key/);
    expect((await admin(database, 'rotate-signing-key', '--signing-key-secret-file', wrong)).code).toBe(1);
    rmSync(wrong, { force: true });
  }, 90_000);

  if (engine === 'postgres') {
    it('does not start on PostgreSQL without the secret: exit 1, naming the variable', async () => {
      const refused = await refusedStart(database, { ARCLIGHT_SIGNING_KEY_SECRET: undefined, ARCLIGHT_SIGNING_KEY_SECRET_FILE: undefined });
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(/^arclight: ARCLIGHT_SIGNING_KEY_SECRET is not set: on PostgreSQL/m);
      // The other admin verbs do not touch the signing keys and need no secret.
      const saved = process.env['ARCLIGHT_SIGNING_KEY_SECRET'];
      delete process.env['ARCLIGHT_SIGNING_KEY_SECRET'];
      try {
        expect((await admin(database, 'list-keys', accountId)).code).toBe(0);
        const rotate = await admin(database, 'rotate-signing-key');
        expect(rotate.code).toBe(1);
        expect(rotate.stderr).toMatch(/ARCLIGHT_SIGNING_KEY_SECRET is not set/);
      } finally {
        process.env['ARCLIGHT_SIGNING_KEY_SECRET'] = saved;
      }
    }, 90_000);
  }
});
