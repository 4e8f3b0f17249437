/**
 * The platform API's key management (`/platform/keys`) and usage, over real HTTP, on SQLite and
 * PostgreSQL: an account lists, creates, rotates and revokes its own keys with its API key or an
 * unscoped token (spec, Authentication 3: "key management"); session-scoped tokens are refused as
 * on the rest of the platform API; other accounts' key ids answer like unknown ones; the last
 * active key cannot be revoked; rotating leaves sessions alone; and usage tells keys apart.
 */

import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main as coordinatorCli } from '../../coordinator/cli.ts';
import { startCoordinator, type Coordinator } from '../../coordinator/index.ts';
import { MAX_ACTIVE_API_KEYS } from '../../coordinator/accounts/api-keys.ts';
import { MAX_USAGE_ROWS } from '../../coordinator/billing/usage-report.ts';
import { ENGINES, freshDatabase } from './storage-engines.ts';

const START = Date.UTC(2026, 10, 22, 12, 0, 0);

interface Answer {
  readonly status: number;
  readonly body: Record<string, any>;
  readonly headers: Headers;
}

describe.each(ENGINES)('platform keys and usage on %s', (engine) => {
  let coordinator: Coordinator;
  let database: string;
  let now = START;

  const call = async (method: string, path: string, credential?: string, body?: unknown): Promise<Answer> => {
    const response = await fetch(`${coordinator.url}${path}`, {
      method,
      headers: {
        ...(credential ? { authorization: `Bearer ${credential}` } : {}),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
    });
    return { status: response.status, body: (await response.json()) as Record<string, any>, headers: response.headers };
  };
  const list = (credential: string) => call('GET', '/platform/keys', credential);
  const create = (credential: string, body?: unknown) => call('POST', '/platform/keys', credential, body);
  const rotate = (credential: string, id: string, body?: unknown) =>
    call('POST', `/platform/keys/${encodeURIComponent(id)}/rotate`, credential, body);
  const revoke = (credential: string, id: string) => call('DELETE', `/platform/keys/${encodeURIComponent(id)}`, credential);

  /** POST /tokens with `key`: unscoped without `models`, else scoped to them. */
  const mintRaw = (key: string, models?: readonly string[]) =>
    fetch(`${coordinator.url}/tokens`, {
      method: 'POST',
      headers: { 'Service-API-Key': key, 'content-type': 'application/json' },
      body: JSON.stringify(
        models
          ? { authorization_details: [{ type: 'session', resources: { models: { match: models } }, constraints: { max_sessions: 50 } }] }
          : {},
      ),
    });
  const mint = async (key: string, models?: readonly string[]) => {
    const response = await mintRaw(key, models);
    expect(response.status).toBe(200);
    return ((await response.json()) as { token: string }).token;
  };
  /** A fresh account with credits and one API key. */
  const customer = async (name: string) => {
    const account = await coordinator.accounts.create(name);
    await coordinator.ledger.grantPromotional(account.id, 100_000);
    const { key, record } = await coordinator.apiKeys.create(account.id, { now });
    return { id: account.id, key, keyId: record.id };
  };
  const createSession = async (token: string) => {
    const response = await fetch(`${coordinator.url}/sessions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: { name: 'pattern' } }),
    });
    expect(response.status).toBe(200);
    return ((await response.json()) as { session_id: string }).session_id;
  };
  const activeKeys = async (accountId: string) =>
    (await coordinator.apiKeys.list(accountId)).filter((k) => k.revokedAt === null).map((k) => k.id);

  beforeAll(async () => {
    database = await freshDatabase(engine);
    coordinator = await startCoordinator({ database, port: 0, now: () => now, meterFlushMs: 0, signupCredits: 0 });
    await coordinator.catalog.add('pattern', 5);
  });
  afterAll(async () => coordinator?.close());

  it('lists, creates, rotates and revokes keys with the API key; secrets are shown once and never listed', async () => {
    const acme = await customer('Acme');
    const listed = await list(acme.key);
    expect(listed.status).toBe(200);
    expect(listed.body).toEqual({
      keys: [
        {
          id: acme.keyId,
          name: null,
          prefix: acme.key.slice(0, 10),
          status: 'active',
          created_at: START,
          revoked_at: null,
          tokens_revoked_at: null,
          current: true,
        },
      ],
    });

    now = START + 1_000;
    const created = await create(acme.key, { name: '  staging  ' });
    expect(created.status).toBe(201);
    expect(created.headers.get('cache-control')).toBe('no-store');
    expect(created.body).toEqual({
      key: expect.stringMatching(/^rk_[A-Za-z0-9_-]{43}$/),
      id: expect.any(String),
      name: 'staging',
      prefix: created.body.key.slice(0, 10),
      status: 'active',
      created_at: START + 1_000,
      revoked_at: null,
      tokens_revoked_at: null,
      current: false,
    });
    const staging = created.body as { key: string; id: string };
    expect((await mintRaw(staging.key)).status).toBe(200);
    // Without a body: no name.
    now = START + 1_500;
    expect((await create(acme.key)).body.name).toBeNull();

    now = START + 2_000;
    const rotated = await rotate(acme.key, staging.id);
    expect(rotated.status).toBe(201);
    expect(rotated.headers.get('cache-control')).toBe('no-store');
    // The CLI's rotation: a new key (new id and secret) for the same account — and name — and the old one revoked at once.
    expect(rotated.body).toMatchObject({
      name: 'staging',
      status: 'active',
      created_at: START + 2_000,
      replaces: staging.id,
      current: false,
    });
    expect(rotated.body.id).not.toBe(staging.id);
    expect((await mintRaw(staging.key)).status).toBe(401);
    expect((await mintRaw(rotated.body.key)).status).toBe(200);

    const afterRotation = await list(acme.key);
    expect(afterRotation.body.keys.map((k: { id: string; status: string }) => [k.id, k.status])).toEqual([
      [acme.keyId, 'active'],
      [staging.id, 'revoked'],
      [expect.any(String), 'active'],
      [rotated.body.id, 'active'],
    ]);
    expect(afterRotation.body.keys[1].revoked_at).toBe(START + 2_000);
    // Rotated, not revoked: the tokens it minted live on until they expire.
    expect(afterRotation.body.keys[1].tokens_revoked_at).toBeNull();
    const text = JSON.stringify(afterRotation.body);
    for (const secret of [acme.key, staging.key, rotated.body.key as string]) expect(text).not.toContain(secret.slice(10));
    expect(text).not.toMatch(/hash/);

    now = START + 3_000;
    const revoked = await revoke(acme.key, rotated.body.id);
    expect(revoked.status).toBe(200);
    expect(revoked.body).toEqual({
      id: rotated.body.id,
      name: 'staging',
      prefix: rotated.body.prefix,
      status: 'revoked',
      created_at: START + 2_000,
      revoked_at: START + 3_000,
      tokens_revoked_at: START + 3_000,
      current: false,
    });
    // A revoked key's POST /tokens fails 401, as does every use of it.
    expect((await mintRaw(rotated.body.key)).status).toBe(401);
    expect((await list(rotated.body.key)).status).toBe(401);
    // Revoking again answers the same record (idempotent); rotating a revoked key is a 409.
    now = START + 4_000;
    expect(await revoke(acme.key, rotated.body.id)).toMatchObject({ status: 200, body: { status: 'revoked', revoked_at: START + 3_000 } });
    const again = await rotate(acme.key, rotated.body.id);
    expect(again.status).toBe(409);
    expect(again.body.code).toBe('api_key_revoked');
    now = START;
  });

  it('does the same with an unscoped token, which the key that minted it backs', async () => {
    const beta = await customer('Beta');
    const token = await mint(beta.key);
    const listed = await list(token);
    expect(listed.status).toBe(200);
    expect(listed.body.keys).toEqual([expect.objectContaining({ id: beta.keyId, current: true })]);
    const created = await create(token, { name: 'ci' });
    expect(created.status).toBe(201);
    const rotated = await rotate(token, created.body.id);
    expect(rotated.status).toBe(201);
    expect((await mintRaw(created.body.key)).status).toBe(401);
    const revoked = await revoke(token, rotated.body.id);
    expect(revoked.status).toBe(200);
    expect((await mintRaw(rotated.body.key)).status).toBe(401);
    expect(await activeKeys(beta.id)).toEqual([beta.keyId]);
  });

  it('refuses a session-scoped token with 403 on every key route — the body the rest of the platform API gives — and no credentials with 401', async () => {
    const gamma = await customer('Gamma');
    const scoped = await mint(gamma.key, ['pattern']);
    const refusal = await call('GET', '/platform/models', scoped);
    expect(refusal.status).toBe(403);
    const attempts = [
      () => list(scoped),
      () => create(scoped, { name: 'x' }),
      () => create(scoped, 'not json'), // refused before the body is read
      () => rotate(scoped, gamma.keyId),
      () => revoke(scoped, gamma.keyId),
      () => call('GET', `/platform/usage?key_id=${gamma.keyId}`, scoped),
    ];
    for (const attempt of attempts) {
      const answer = await attempt();
      expect(answer.status).toBe(403);
      expect(answer.body).toEqual(refusal.body);
    }
    for (const answer of [await list(''), await create(''), await rotate('', gamma.keyId), await revoke('', gamma.keyId)]) {
      expect(answer.status).toBe(401);
      expect(answer.body.code).toBe('unauthorized');
    }
    expect(await activeKeys(gamma.id)).toEqual([gamma.keyId]);
    expect(await coordinator.apiKeys.list(gamma.id)).toHaveLength(1);
  });

  it("answers another account's key id exactly like an unknown id (404 api_key_not_found), and changes nothing", async () => {
    const mine = await customer('Mine');
    const theirs = await customer('Theirs');
    const { key: theirSecond, record: theirSecondRecord } = await coordinator.apiKeys.create(theirs.id);
    const unknown = randomUUID();
    const answers = async (id: string) => ({
      rotate: await rotate(mine.key, id),
      revoke: await revoke(mine.key, id),
      usage: await call('GET', `/platform/usage?key_id=${encodeURIComponent(id)}`, mine.key),
    });
    const foreign = await answers(theirSecondRecord.id);
    const missing = await answers(unknown);
    for (const [what, answer] of Object.entries(foreign)) {
      const twin = missing[what as keyof typeof missing];
      expect(answer.status, what).toBe(404);
      expect(answer.body.code, what).toBe('api_key_not_found');
      // The same body but for the id itself.
      expect(JSON.stringify(answer.body).replaceAll(theirSecondRecord.id, '<id>'), what).toBe(
        JSON.stringify(twin.body).replaceAll(unknown, '<id>'),
      );
    }
    expect((await revoke(mine.key, 'x'.repeat(500))).body.code).toBe('api_key_not_found');
    expect((await rotate(mine.key, "1' or '1'='1")).body.code).toBe('api_key_not_found');
    // Their keys still work, and mine did not list theirs.
    expect((await mintRaw(theirSecond)).status).toBe(200);
    expect((await mintRaw(theirs.key)).status).toBe(200);
    expect((await list(mine.key)).body.keys.map((k: { id: string }) => k.id)).toEqual([mine.keyId]);
  });

  it('refuses to revoke the last active key (409 last_api_key); a key may revoke itself while another remains, or rotate itself', async () => {
    const solo = await customer('Solo');
    const last = await revoke(solo.key, solo.keyId);
    expect(last.status).toBe(409);
    expect(last.body).toEqual({ code: 'last_api_key', message: expect.stringMatching(/only active API key.*Rotate it instead/) });
    expect((await mintRaw(solo.key)).status).toBe(200);

    // Rotating the only key is fine: the account keeps exactly one, and the caller gets it.
    const rotated = await rotate(solo.key, solo.keyId);
    expect(rotated.status).toBe(201);
    expect(rotated.body.replaces).toBe(solo.keyId);
    expect((await list(solo.key)).status).toBe(401);
    const successor = rotated.body.key as string;
    expect(await activeKeys(solo.id)).toEqual([rotated.body.id]);

    // With another key, the key making the request may revoke itself; that request is its last.
    const second = await create(successor, { name: 'second' });
    const self = await revoke(successor, rotated.body.id);
    expect(self.status).toBe(200);
    expect(self.body).toMatchObject({ id: rotated.body.id, status: 'revoked', current: true });
    expect((await list(successor)).status).toBe(401);
    expect(
      (await list(second.body.key)).body.keys.filter((k: { status: string }) => k.status === 'active').map((k: { id: string }) => k.id),
    ).toEqual([second.body.id]);
    expect((await revoke(second.body.key, second.body.id)).body.code).toBe('last_api_key');
  });

  it('two keys revoking each other at once: one wins, the account keeps an active key', async () => {
    for (let round = 0; round < 6; round++) {
      const pair = await customer(`Pair ${round}`);
      const { key: other, record } = await coordinator.apiKeys.create(pair.id);
      const answers = await Promise.all([revoke(pair.key, record.id), revoke(other, pair.keyId)]);
      const statuses = answers.map((a) => a.status).sort();
      // One revocation lands; the other is the last key (409) or was made with the key just revoked (401).
      expect(statuses[0], JSON.stringify(answers.map((a) => a.body))).toBe(200);
      expect([401, 409]).toContain(statuses[1]);
      expect(await activeKeys(pair.id)).toHaveLength(1);
    }
  });

  it('an unscoped token stops managing keys once the key that minted it is rotated or revoked; its other calls and sessions go on', async () => {
    const delta = await customer('Delta');
    const token = await mint(delta.key);
    const sessionToken = await mint(delta.key, ['pattern']);
    const sessionId = await createSession(sessionToken);
    const rotated = await rotate(token, delta.keyId);
    expect(rotated.status).toBe(201);
    for (const answer of [await list(token), await create(token, { name: 'persistence' }), await revoke(token, rotated.body.id)]) {
      expect(answer.status).toBe(401);
      expect(answer.body).toEqual({ code: 'unauthorized', message: expect.stringMatching(/minted with has been revoked or rotated/) });
    }
    expect(await activeKeys(delta.id)).toEqual([rotated.body.id]);
    // Tokens minted before keep what they had until they expire (as after any rotation).
    expect((await call('GET', '/platform/balance', token)).status).toBe(200);
    expect((await call('GET', `/sessions/${sessionId}`, token)).status).toBe(202);
    expect((await call('GET', `/sessions/${sessionId}`, sessionToken)).status).toBe(202);
    // A token of the new key manages keys.
    expect((await list(await mint(rotated.body.key))).status).toBe(200);
  });

  it('revoking a key kills the tokens it minted at once (401 token_revoked); revoking a rotated key kills those the rotation left alive', async () => {
    const iota = await customer('Iota');
    const spare = await create(iota.key, { name: 'spare' });
    const token = await mint(iota.key);
    const sessionToken = await mint(iota.key, ['pattern']);
    const sessionId = await createSession(sessionToken);
    const revoked = await revoke(spare.body.key, iota.keyId);
    expect(revoked.body).toMatchObject({ id: iota.keyId, status: 'revoked' });
    for (const answer of [
      await call('GET', '/platform/balance', token),
      await call('GET', `/sessions/${sessionId}`, sessionToken),
      await call('GET', `/sessions/${sessionId}`, token),
    ]) {
      expect(answer.status).toBe(401);
      expect(answer.body).toEqual({
        code: 'token_revoked',
        message: expect.stringMatching(/has been revoked; mint a new token with an active key/),
      });
    }
    // The session itself goes on: only the tokens are dead (the account's other key reaches it).
    expect((await call('GET', `/sessions/${sessionId}`, spare.body.key)).status).toBe(202);

    // Rotated: its tokens live on; DELETE on the rotated key (answered as it is) then kills them.
    const survivor = await mint(spare.body.key);
    const rotated = await rotate(spare.body.key, spare.body.id);
    expect((await call('GET', '/platform/balance', survivor)).status).toBe(200);
    const again = await revoke(rotated.body.key, spare.body.id);
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ id: spare.body.id, status: 'revoked', revoked_at: rotated.body.created_at });
    expect((await call('GET', '/platform/balance', survivor)).body.code).toBe('token_revoked');
    expect((await call('GET', '/platform/balance', await mint(rotated.body.key))).status).toBe(200);
    expect((await call('DELETE', `/sessions/${sessionId}`, rotated.body.key)).status).toBe(200);
  });

  it('rotating the key (over the platform API) leaves a running session alone: it stays ready, bills on, and its token reads and ends it', async () => {
    const epsilon = await customer('Epsilon');
    const token = await mint(epsilon.key, ['pattern']);
    const sessionId = await createSession(token);
    await coordinator.sessions.markReady(sessionId);
    now += 4_000;
    await coordinator.meter.flush();
    const rotated = await rotate(epsilon.key, epsilon.keyId);
    expect(rotated.status).toBe(201);

    const read = await call('GET', `/sessions/${sessionId}`, token);
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({ session_id: sessionId, status: 'ready' });
    expect((await call('GET', `/sessions/${sessionId}`, epsilon.key)).status).toBe(401); // the old key is out
    expect((await call('GET', `/sessions/${sessionId}`, rotated.body.key)).status).toBe(200); // the new one reads it
    now += 3_000;
    await coordinator.meter.flush();
    expect(Number((await coordinator.sessions.get(sessionId))!.billed_seconds)).toBe(7);
    const ended = await call('DELETE', `/sessions/${sessionId}`, token);
    expect(ended.status).toBe(200);
    expect(ended.body.state).toBe('CLOSED');
    now = START;
  });

  it('bad input: 400 with a stable code, a message and the field', async () => {
    const zeta = await customer('Zeta');
    const invalid = async (answer: Promise<Answer>, field: string, code = 'invalid_request') => {
      const { status, body } = await answer;
      expect(status, JSON.stringify(body)).toBe(400);
      expect(body.code).toBe(code);
      expect(typeof body.message).toBe('string');
      if (code === 'invalid_request') expect(body.field).toBe(field);
    };
    await invalid(create(zeta.key, '{"name": '), '', 'invalid_json');
    await invalid(create(zeta.key, []), '');
    await invalid(create(zeta.key, 'null'), '');
    await invalid(create(zeta.key, { name: 5 }), '/name');
    await invalid(create(zeta.key, { name: '' }), '/name');
    await invalid(create(zeta.key, { name: '   ' }), '/name');
    await invalid(create(zeta.key, { name: 'x'.repeat(65) }), '/name');
    await invalid(create(zeta.key, { name: 'two\nlines' }), '/name');
    await invalid(create(zeta.key, { label: 'prod' }), '/label');
    await invalid(rotate(zeta.key, zeta.keyId, { name: 'renamed' }), '/name');
    await invalid(rotate(zeta.key, zeta.keyId, 'false'), '');
    await invalid(call('GET', '/platform/usage?until=tomorrow', zeta.key), 'until');
    await invalid(call('GET', `/platform/usage?since=${START}&until=${START}`, zeta.key), 'until');
    await invalid(call('GET', '/platform/usage?since=-5', zeta.key), 'since');
    // None of it created or changed a key; a name of 64 characters (any script) and null are fine.
    expect(await activeKeys(zeta.id)).toEqual([zeta.keyId]);
    expect((await create(zeta.key, { name: 'é'.repeat(64) })).status).toBe(201);
    expect((await create(zeta.key, { name: null })).body.name).toBeNull();
  });

  it(`holds at most ${MAX_ACTIVE_API_KEYS} active keys per account (409 too_many_api_keys); revoked keys do not count`, async () => {
    const eta = await customer('Eta');
    const created: string[] = [];
    for (let i = 1; i < MAX_ACTIVE_API_KEYS; i++) {
      const answer = await create(eta.key, { name: `k${i}` });
      expect(answer.status).toBe(201);
      created.push(answer.body.id as string);
    }
    const over = await create(eta.key, { name: 'one too many' });
    expect(over.status).toBe(409);
    expect(over.body.code).toBe('too_many_api_keys');
    expect(await activeKeys(eta.id)).toHaveLength(MAX_ACTIVE_API_KEYS);
    expect((await rotate(eta.key, created[0]!)).status).toBe(201); // a rotation replaces, it does not add
    expect((await revoke(eta.key, created[1]!)).status).toBe(200);
    expect((await create(eta.key, { name: 'room again' })).status).toBe(201);
    expect((await create(eta.key)).status).toBe(409);
  });

  it('usage: the key behind each session, a key_id filter, an until bound, the month against the cap, and totals over the whole window when the list is cut', async () => {
    const theta = await customer('Theta');
    await coordinator.accounts.setQuotas(theta.id, { monthlyCreditCap: 9_000, concurrentSessions: 10 });
    const second = await create(theta.key, { name: 'second' });
    const first = await createSession(await mint(theta.key, ['pattern']));
    now += 1_000;
    const other = await createSession(await mint(second.body.key, ['pattern']));
    await coordinator.sessions.markReady(other);
    now += 2_000;
    await coordinator.meter.flush(); // 2 s of `other`, 10 credits

    const all = await call('GET', `/platform/usage?since=${START}`, theta.key);
    expect(all.status).toBe(200);
    expect(all.body).toMatchObject({ since: START, until: null, truncated: false, total: { billed_seconds: 2, credits: 10 } });
    expect(all.body.sessions.map((s: { session_id: string; key_id: string }) => [s.session_id, s.key_id])).toEqual([
      [other, second.body.id],
      [first, theta.keyId],
    ]);
    expect(all.body.month).toEqual({ spent_credits: 10, cap_credits: 9_000 });
    const bySecond = await call('GET', `/platform/usage?since=${START}&key_id=${second.body.id}`, theta.key);
    expect(bySecond.body.sessions.map((s: { session_id: string }) => s.session_id)).toEqual([other]);
    expect(bySecond.body.total).toEqual({ billed_seconds: 2, credits: 10 });
    const early = await call('GET', `/platform/usage?since=${START}&until=${START + 1_000}`, theta.key);
    expect(early.body).toMatchObject({ until: START + 1_000, total: { billed_seconds: 0, credits: 0 } });
    expect(early.body.sessions.map((s: { session_id: string }) => s.session_id)).toEqual([first]);
    // The same for an unscoped token, and a rotated key's sessions keep their key id.
    const unscoped = await mint(theta.key);
    expect((await call('GET', `/platform/usage?since=${START}`, unscoped)).body).toEqual(all.body);
    await rotate(theta.key, second.body.id);
    expect((await call('GET', `/platform/usage?since=${START}&key_id=${second.body.id}`, theta.key)).body.sessions).toHaveLength(1);

    // More sessions than a report lists: the newest are listed, the totals still count the oldest.
    const model = (await coordinator.catalog.byName('pattern'))!;
    const rows = Array.from({ length: MAX_USAGE_ROWS }, (_, i) => ({
      id: randomUUID(),
      account_id: theta.id,
      model_id: model.id,
      token_id: null,
      status: 'ended' as const,
      created_at: START + 10_000 + i,
      ready_at: null,
      ended_at: START + 10_000 + i,
      end_reason: 'bulk',
      max_duration_seconds: 1200,
    }));
    for (let i = 0; i < rows.length; i += 100)
      await coordinator.storage.db
        .insertInto('sessions')
        .values(rows.slice(i, i + 100))
        .execute();
    const cut = await call('GET', `/platform/usage?since=${START}`, theta.key);
    expect(cut.body.sessions).toHaveLength(MAX_USAGE_ROWS);
    expect(cut.body.truncated).toBe(true);
    expect(cut.body.sessions.some((s: { session_id: string }) => s.session_id === other)).toBe(false);
    expect(cut.body.total).toEqual({ billed_seconds: 2, credits: 10 });
    expect(cut.body.sessions[0].key_id).toBeNull();
    now = START;
  });

  it('labels the key routes by pattern in the metrics, never by id', async () => {
    const iota = await customer('Iota');
    const created = await create(iota.key, { name: 'metrics' });
    await rotate(iota.key, created.body.id);
    await revoke(iota.key, randomUUID());
    const text = await (await fetch(`${coordinator.url}/metrics`)).text();
    expect(text).toMatch(/arclight_coordinator_http_requests_total\{method="POST",route="\/platform\/keys",status="201"\} \d+/);
    expect(text).toMatch(
      /arclight_coordinator_http_requests_total\{method="POST",route="\/platform\/keys\/:id\/rotate",status="201"\} \d+/,
    );
    expect(text).toMatch(/arclight_coordinator_http_requests_total\{method="DELETE",route="\/platform\/keys\/:id",status="404"\} \d+/);
    expect(text).not.toContain(created.body.id);
  });

  it('arclight admin keeps its key verbs for operators: create-key --name, and revoking even the last key', async () => {
    const kappa = await customer('Kappa');
    const cli = async (...args: string[]) => {
      let stdout = '';
      const write = process.stdout.write;
      const writeErr = process.stderr.write;
      process.stdout.write = ((chunk: string | Uint8Array) => ((stdout += String(chunk)), true)) as typeof process.stdout.write;
      process.stderr.write = (() => true) as typeof process.stderr.write;
      try {
        const code = await coordinatorCli(['admin', ...args, '--database', database]);
        return { code, out: code === 0 ? (JSON.parse(stdout) as Record<string, any>) : {} };
      } finally {
        process.stdout.write = write;
        process.stderr.write = writeErr;
      }
    };
    const named = await cli('create-key', kappa.id, '--name', 'ops');
    expect(named).toMatchObject({ code: 0, out: { name: 'ops', key: expect.stringMatching(/^rk_/) } });
    expect((await list(kappa.key)).body.keys.map((k: { name: string | null }) => k.name)).toEqual([null, 'ops']);
    expect((await cli('rotate-key', named.out.id as string)).out).toMatchObject({ name: 'ops', replaces: named.out.id });
    expect((await cli('create-key', kappa.id, '--name', '')).code).toBe(2);
    for (const id of await activeKeys(kappa.id)) expect((await cli('revoke-key', id)).code).toBe(0);
    expect(await activeKeys(kappa.id)).toEqual([]);
    expect((await mintRaw(kappa.key)).status).toBe(401);
  });
});
