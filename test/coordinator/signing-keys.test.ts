/**
 * Keys that propagate (issue 20 part 4), in process, on SQLite and PostgreSQL: two coordinators on
 * one database are two replicas (each its own keyring, pool and caches).
 *
 * - Revoking an API key on one replica refuses its tokens on the other from the next request;
 *   rotating it refuses nothing minted before.
 * - A signing-key rotation on one replica: a token signed by the new key verifies on the other at
 *   once (its `kid` is unknown there, which triggers a re-read, even with a 10-minute refresh),
 *   and the other signs with the new key within its refresh interval. A retired key's tokens are
 *   refused everywhere within that interval, even where their signature verdict was remembered.
 * - Private signing keys at rest: encrypted under the operator's secret; required on PostgreSQL;
 *   on SQLite, plain without one (one warning), encrypted at the first start with one; a wrong
 *   secret, or none for encrypted keys, is refused.
 *
 * Timing: waits poll (waitUntil) with generous deadlines; nothing asserts how fast.
 */

import { rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeProtectedHeader } from 'jose';
import { afterEach, describe, expect, it } from 'vitest';
import { startCoordinator, type Coordinator, type CoordinatorOptions } from '../../coordinator/index.ts';
import type { Logger } from '../../server-kit/log.ts';
import { waitUntil } from '../support/video-probe.ts';
import { ENGINES, freshDatabase } from './storage-engines.ts';

const SECRET_ENV = 'ARCLIGHT_SIGNING_KEY_SECRET';
const SECRET_FILE_ENV = 'ARCLIGHT_SIGNING_KEY_SECRET_FILE';
const SECRET = 'a-secret-for-these-tests-only-0123456789';

/** Runs `body` with the secret variables unset (vitest.config.ts sets one for every test). */
async function withoutSecretEnv<T>(body: () => Promise<T>): Promise<T> {
  const saved = { secret: process.env[SECRET_ENV], file: process.env[SECRET_FILE_ENV] };
  delete process.env[SECRET_ENV];
  delete process.env[SECRET_FILE_ENV];
  try {
    return await body();
  } finally {
    if (saved.secret !== undefined) process.env[SECRET_ENV] = saved.secret;
    if (saved.file !== undefined) process.env[SECRET_FILE_ENV] = saved.file;
  }
}

/** A logger that keeps its warnings. */
function recordingLogger(): Logger & { warnings: string[] } {
  const warnings: string[] = [];
  const logger = {
    warnings,
    debug() {},
    info() {},
    warn(message: string) {
      warnings.push(message);
    },
    error() {},
    child: () => logger,
  };
  return logger;
}

describe.each(ENGINES)('keys that propagate on %s', (engine) => {
  const open: Coordinator[] = [];
  const start = async (options: CoordinatorOptions): Promise<Coordinator> => {
    const coordinator = await startCoordinator({ port: 0, meterFlushMs: 0, signingKeySecret: SECRET, ...options });
    open.push(coordinator);
    return coordinator;
  };
  afterEach(async () => {
    for (const coordinator of open.splice(0)) await coordinator.close();
  });

  const mint = async (coordinator: Coordinator, key: string, body: unknown = {}) => {
    const response = await fetch(`${coordinator.url}/tokens`, {
      method: 'POST',
      headers: { 'Service-API-Key': key, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(response.status).toBe(200);
    return ((await response.json()) as { token: string }).token;
  };
  const read = async (coordinator: Coordinator, path: string, bearer: string) => {
    const response = await fetch(`${coordinator.url}${path}`, { headers: { authorization: `Bearer ${bearer}` } });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  };
  const kidOf = (token: string) => decodeProtectedHeader(token).kid!;

  it('revoking an API key on one replica refuses its tokens on the other at once; rotating one refuses nothing', async () => {
    const database = await freshDatabase(engine);
    const a = await start({ database });
    const b = await start({ database });
    const account = await a.accounts.create('Acme');
    await a.catalog.add('pattern', 5);
    await a.ledger.grantPromotional(account.id, 100_000);
    const leaked = await a.apiKeys.create(account.id);
    const routine = await a.apiKeys.create(account.id);
    const spare = await a.apiKeys.create(account.id);
    const scopedBody = { authorization_details: [{ type: 'session', resources: { models: { match: ['pattern'] } } }] };
    const leakedTokens = [await mint(a, leaked.key), await mint(a, leaked.key, scopedBody)];
    const routineToken = await mint(a, routine.key);
    // Used on B first, so B has verified (and remembered) them.
    for (const token of [...leakedTokens, routineToken]) expect((await read(b, '/platform/models', token)).status).not.toBe(401);

    // Over the platform API on A, with the spare key: rotate one, revoke the other.
    const call = (method: string, path: string) => fetch(`${a.url}${path}`, { method, headers: { authorization: `Bearer ${spare.key}` } });
    expect((await call('POST', `/platform/keys/${routine.record.id}/rotate`)).status).toBe(201);
    expect((await call('DELETE', `/platform/keys/${leaked.record.id}`)).status).toBe(200);

    for (const token of leakedTokens) {
      const answer = await read(b, '/platform/models', token);
      expect(answer.status).toBe(401);
      expect(answer.body['code']).toBe('token_revoked');
    }
    // The rotated key's token keeps working (its platform calls, as any unscoped token's).
    expect((await read(b, '/platform/models', routineToken)).status).toBe(200);
  });

  it('a signing-key rotation on one replica: verified on the other at once, signed with there within its refresh interval', async () => {
    const database = await freshDatabase(engine);
    // B re-reads only every 10 minutes: what it learns sooner, it learns from a kid it does not know.
    const a = await start({ database, signingKeyRefreshMs: 200 });
    const b = await start({ database, signingKeyRefreshMs: 600_000 });
    const c = await start({ database, signingKeyRefreshMs: 300 });
    const account = await a.accounts.create('Acme');
    const { key } = await a.apiKeys.create(account.id);
    const before = await mint(b, key);
    const oldKid = kidOf(before);
    expect(kidOf(await mint(c, key))).toBe(oldKid);
    expect((await read(b, '/platform/models', before)).status).toBe(200);
    expect((await read(c, '/platform/models', before)).status).toBe(200);

    const newKid = await a.keyring.rotate();
    const after = await mint(a, key);
    expect(kidOf(after)).toBe(newKid); // the rotating replica signs with it at once
    expect((await read(b, '/platform/models', after)).status).toBe(200); // B: at once, by the unknown kid
    expect(kidOf(await mint(b, key))).toBe(newKid); // …having read the set again
    // C never sees a token of the new key: its refresh alone brings it.
    await waitUntil(async () => kidOf(await mint(c, key)) === newKid, 10_000, 'C to sign with the new key');
    expect((await read(c, '/platform/models', before)).status).toBe(200); // the old key still verifies

    // Retired on A: refused on C within C's refresh interval, a remembered verdict included.
    await a.keyring.retire(oldKid);
    expect((await read(a, '/platform/models', before)).status).toBe(401);
    await waitUntil(async () => (await read(c, '/platform/models', before)).status === 401, 10_000, 'C to refuse the retired key');
    expect((await read(c, '/platform/models', before)).body['code']).toBe('unauthorized');
    expect((await read(c, '/platform/models', after)).status).toBe(200);
    const jwks = (await (await fetch(`${c.url}/.well-known/jwks.json`)).json()) as { keys: Array<{ kid: string }> };
    expect(jwks.keys.map((k) => k.kid)).toEqual([newKid]);
  });

  it('stores private signing keys encrypted under the secret: no private JWK member in the database', async () => {
    const coordinator = await start({ database: await freshDatabase(engine) });
    await coordinator.keyring.rotate();
    const rows = await coordinator.storage.db.selectFrom('signing_keys').select(['kid', 'private_jwk']).execute();
    expect(rows).toHaveLength(2);
    for (const row of rows) {
      expect(row.private_jwk.startsWith('v1:')).toBe(true);
      expect(row.private_jwk).not.toContain('"d":');
      expect(row.private_jwk).not.toContain('"kty"');
    }
  });

  it('refuses a secret that does not open the stored keys, and none where they are encrypted', async () => {
    const database = await freshDatabase(engine);
    const first = await start({ database });
    const account = await first.accounts.create('Acme');
    const { key } = await first.apiKeys.create(account.id);
    const token = await mint(first, key);
    await first.close();
    open.splice(0);
    await expect(start({ database, signingKeySecret: 'not-the-secret-the-keys-have-000' })).rejects.toThrow(
      /signing-key secret from signingKeySecret does not decrypt signing key .*: it is not the secret the keys in this database were encrypted with/,
    );
    if (engine === 'sqlite') {
      await expect(withoutSecretEnv(() => startCoordinator({ database, port: 0, meterFlushMs: 0 }))).rejects.toThrow(
        /signing keys in this database are encrypted: set ARCLIGHT_SIGNING_KEY_SECRET/,
      );
    }
    // The right one still works, and the token minted before still verifies.
    const again = await start({ database });
    expect((await read(again, '/platform/models', token)).status).toBe(200);
  });

  it('takes the secret from the environment, or from the file ARCLIGHT_SIGNING_KEY_SECRET_FILE names; refuses a short one', async () => {
    const database = await freshDatabase(engine);
    const file = join(tmpdir(), `arclight-signing-secret-${process.pid}-${engine}`);
    writeFileSync(file, `${SECRET}\n`); // the trailing newline is not part of it
    await withoutSecretEnv(async () => {
      process.env[SECRET_FILE_ENV] = file;
      const fromFile = await startCoordinator({ database, port: 0, meterFlushMs: 0 });
      open.push(fromFile);
      expect(fromFile.keyring.encrypted).toBe(true);
      delete process.env[SECRET_FILE_ENV];
      process.env[SECRET_ENV] = SECRET; // the same secret, from the variable: it opens the keys
      open.push(await startCoordinator({ database, port: 0, meterFlushMs: 0 }));
    });
    rmSync(file, { force: true });
    await expect(start({ database, signingKeySecret: 'short' })).rejects.toThrow(/too short: it must be at least 16 characters/);
  });

  if (engine === 'postgres') {
    it('does not start on PostgreSQL without the secret, naming the variable', async () => {
      const database = await freshDatabase(engine);
      await expect(withoutSecretEnv(() => startCoordinator({ database, port: 0, meterFlushMs: 0 }))).rejects.toThrow(
        /ARCLIGHT_SIGNING_KEY_SECRET is not set: on PostgreSQL the coordinator keeps its private signing keys encrypted/,
      );
    });
  }

  if (engine === 'sqlite') {
    it('runs on SQLite without a secret (plain keys, one warning); the first start with one encrypts them, once', async () => {
      const database = await freshDatabase(engine);
      const logger = recordingLogger();
      const plain = await withoutSecretEnv(() => startCoordinator({ database, port: 0, meterFlushMs: 0, logger }));
      open.push(plain);
      expect(logger.warnings.filter((w) => /private signing keys are stored unencrypted/.test(w))).toHaveLength(1);
      const account = await plain.accounts.create('Acme');
      const { key } = await plain.apiKeys.create(account.id);
      const token = await mint(plain, key);
      await plain.keyring.rotate();
      const rows = (coordinator: Coordinator) =>
        coordinator.storage.db.selectFrom('signing_keys').select(['kid', 'private_jwk']).orderBy('kid').execute();
      expect((await rows(plain)).every((r) => r.private_jwk.includes('"d":'))).toBe(true);
      await plain.close();
      open.splice(0);

      const encrypted = await start({ database, logger });
      expect(logger.warnings).toHaveLength(1); // no warning with a secret
      const once = await rows(encrypted);
      expect(once).toHaveLength(2);
      expect(once.every((r) => r.private_jwk.startsWith('v1:') && !r.private_jwk.includes('"d":'))).toBe(true);
      expect((await read(encrypted, '/platform/models', token)).status).toBe(200);
      await encrypted.close();
      open.splice(0);
      // A second start with the secret finds nothing to encrypt: the rows are as they were.
      const second = await start({ database });
      expect(await rows(second)).toEqual(once);
    });
  }
});
