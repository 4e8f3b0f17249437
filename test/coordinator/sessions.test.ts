/**
 * Session admission and the bound set over HTTP, on SQLite and PostgreSQL: max_sessions counts
 * every session ever created (closing gives nothing back), bind-only tokens cannot create, the
 * account's concurrency and per-minute quotas answer 429 with Retry-After, requests outside the
 * bound set answer one 403, and concurrent creations never over-admit — on one coordinator, and
 * on two coordinators sharing one PostgreSQL database.
 */

import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCoordinator, type Coordinator } from '../../coordinator/index.ts';
import { ENGINES, freshDatabase } from './storage-engines.ts';

const START = Date.UTC(2026, 10, 22, 12, 0, 0);

interface Answer {
  status: number;
  body: Record<string, any>;
  headers: Headers;
}

async function call(
  url: string,
  method: string,
  credential?: string,
  body?: unknown,
  extraHeaders: Record<string, string> = {},
): Promise<Answer> {
  const response = await fetch(url, {
    method,
    headers: {
      ...extraHeaders,
      ...(credential ? { authorization: `Bearer ${credential}` } : {}),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: response.status, body: (await response.json()) as Record<string, any>, headers: response.headers };
}

/** The body 2.9.0 posts. */
const createBody = (name: string) => ({
  model: { name },
  client_info: { sdk_version: '2.9.0', sdk_type: 'js' },
  supported_transports: [{ protocol: 'webrtc', version: '1.0' }],
});

describe.each(ENGINES)('sessions on %s', (engine) => {
  let database: string;
  let coordinator: Coordinator;
  let now = START;
  let key: string;
  let otherKey: string;

  const mint = async (details?: Record<string, unknown>, apiKey = key): Promise<string> => {
    const response = await fetch(`${coordinator.url}/tokens`, {
      method: 'POST',
      headers: { 'Service-API-Key': apiKey, 'content-type': 'application/json' },
      body: JSON.stringify(details ? { authorization_details: [{ type: 'session', ...details }] } : {}),
    });
    expect(response.status).toBe(200);
    return ((await response.json()) as { token: string }).token;
  };
  const create = (token: string, model = 'pattern') => call(`${coordinator.url}/sessions`, 'POST', token, createBody(model));
  const get = (id: string, credential: string) => call(`${coordinator.url}/sessions/${id}`, 'GET', credential);
  const end = (id: string, credential: string, body?: unknown) => call(`${coordinator.url}/sessions/${id}`, 'DELETE', credential, body);
  const models = (...match: string[]) => ({ resources: { models: { match } } });

  beforeAll(async () => {
    database = await freshDatabase(engine);
    coordinator = await startCoordinator({ database, port: 0, now: () => now });
    const account = await coordinator.accounts.create('Acme', { concurrentSessions: 1000, sessionsPerMinute: 1000 });
    await coordinator.ledger.grantPromotional(account.id, 1_000_000);
    ({ key } = await coordinator.apiKeys.create(account.id));
    const other = await coordinator.accounts.create('Other');
    ({ key: otherKey } = await coordinator.apiKeys.create(other.id));
    await coordinator.catalog.add('pattern', 5);
    await coordinator.catalog.add('webcam-fx', 12);
  });
  afterAll(async () => coordinator?.close());

  it('creates a session with the fields 2.9.0 requires, waiting for a GPU (GET answers 202)', async () => {
    const token = await mint(models('pattern'));
    const { status, body } = await create(token);
    expect(status).toBe(200);
    expect(body).toMatchObject({
      session_id: expect.any(String),
      state: 'WAITING',
      status: 'waiting',
      cluster: 'default',
      model: { name: 'pattern' },
      server_info: { server_version: expect.any(String) },
      max_duration_seconds: 1200,
    });
    const polled = await get(body.session_id, token);
    expect(polled.status).toBe(202);
    expect(polled.body.capabilities).toBeUndefined(); // 2.9.0 keeps polling
  });

  it('an ended session reads as CLOSED (200) and its transport answers 410 session_ended', async () => {
    const token = await mint(models('pattern'));
    const { body } = await create(token);
    const transport = (path: string) => call(`${coordinator.url}/sessions/${body.session_id}/transport/webrtc/${path}`, 'GET', token);
    expect((await transport('ice_servers')).body.code).toBe('not_ready'); // no GPU yet
    await end(body.session_id, token, { reason: 'done' });
    const closed = await get(body.session_id, token);
    expect(closed.status).toBe(200);
    expect(closed.body).toMatchObject({ state: 'CLOSED', status: 'ended', end_reason: 'done' });
    const gone = await transport('ice_servers');
    expect(gone.status).toBe(410);
    expect(gone.body).toMatchObject({ code: 'session_ended', message: expect.stringMatching(/has ended \(done\)/) });
  });

  it('max_sessions counts every session the token created; ending one gives nothing back', async () => {
    const token = await mint({ ...models('pattern'), constraints: { max_sessions: 2 } });
    const a = await create(token);
    const b = await create(token);
    expect([a.status, b.status]).toEqual([200, 200]);
    expect((await end(a.body.session_id, token)).status).toBe(200);
    const third = await create(token);
    expect(third.status).toBe(403);
    expect(third.body.code).toBe('token_exhausted');
  });

  describe('Idempotency-Key on POST /sessions', () => {
    const createWithKey = (token: string, idempotencyKey: string, model = 'pattern') =>
      call(`${coordinator.url}/sessions`, 'POST', token, createBody(model), { 'Idempotency-Key': idempotencyKey });

    it('a retry with the key gets the same session back and takes nothing more from max_sessions', async () => {
      const token = await mint({ ...models('pattern'), constraints: { max_sessions: 2 } });
      const first = await createWithKey(token, 'retry-1');
      const retry = await createWithKey(token, 'retry-1');
      expect([first.status, retry.status]).toEqual([200, 200]);
      expect(retry.body.session_id).toBe(first.body.session_id);
      const other = await createWithKey(token, 'retry-2'); // a new request: the second and last session
      expect(other.status).toBe(200);
      expect(other.body.session_id).not.toBe(first.body.session_id);
      expect((await create(token)).body.code).toBe('token_exhausted');
      // Replays still answer once the token is used up, and with the session as it is now.
      await end(first.body.session_id, token, { reason: 'finished' });
      const late = await createWithKey(token, 'retry-1');
      expect(late.status).toBe(200);
      expect(late.body).toMatchObject({ session_id: first.body.session_id, status: 'ended', end_reason: 'finished' });
      const rows = await coordinator.storage.db
        .selectFrom('sessions')
        .select('id')
        .where(
          'token_id',
          '=',
          (
            await coordinator.storage.db
              .selectFrom('sessions')
              .select('token_id')
              .where('id', '=', first.body.session_id)
              .executeTakeFirstOrThrow()
          ).token_id,
        )
        .execute();
      expect(rows).toHaveLength(2);
    });

    it('a key reused by another token or for another model is 409 idempotency_conflict', async () => {
      const token = await mint(models('pattern', 'webcam-fx'));
      expect((await createWithKey(token, 'shared-key')).status).toBe(200);
      const otherModel = await createWithKey(token, 'shared-key', 'webcam-fx');
      expect(otherModel.status).toBe(409);
      expect(otherModel.body.code).toBe('idempotency_conflict');
      const otherToken = await createWithKey(await mint(models('pattern')), 'shared-key');
      expect(otherToken.status).toBe(409);
      expect(otherToken.body.code).toBe('idempotency_conflict');
      // Another account's same key is its own.
      expect((await createWithKey(await mint(models('pattern'), otherKey), 'shared-key')).status).not.toBe(409);
    });

    it('refuses a malformed key with 400, and lets browsers send the header', async () => {
      const token = await mint(models('pattern'));
      for (const bad of ['two words', 'x'.repeat(256), 'tab\there']) {
        const answer = await createWithKey(token, bad);
        expect(answer.status, JSON.stringify(bad)).toBe(400);
        expect(answer.body).toMatchObject({ code: 'invalid_request', field: 'Idempotency-Key' });
      }
      const preflight = await fetch(`${coordinator.url}/sessions`, {
        method: 'OPTIONS',
        headers: {
          origin: 'https://app.example',
          'access-control-request-method': 'POST',
          'access-control-request-headers': 'authorization,content-type,idempotency-key',
        },
      });
      expect(preflight.headers.get('access-control-allow-headers')).toMatch(/Idempotency-Key/i);
    });

    // (1,000 at once, across replicas and 50 times over on demand: test/coordinator/replicas.test.ts.)
    it('200 concurrent retries of one request create one session', async () => {
      const token = await mint({ ...models('pattern'), constraints: { max_sessions: 3 } });
      const answers = await Promise.all(Array.from({ length: 200 }, () => createWithKey(token, 'stampede')));
      expect(answers.filter((a) => a.status !== 200).map((a) => a.body)).toEqual([]);
      expect(new Set(answers.map((a) => a.body.session_id)).size).toBe(1);
      expect((await create(token)).status).toBe(200); // two of three left: one taken by the two hundred
    }, 120_000);
  });

  it('a bind-only token cannot create, but can act on its bound session', async () => {
    const creator = await mint(models('pattern'));
    const { body: created } = await create(creator);
    const bound = await mint({ resources: { models: { match: ['pattern'] }, sessions: { bind: [created.session_id] } } });
    expect((await create(bound)).body.code).toBe('token_exhausted');
    expect((await get(created.session_id, bound)).status).toBe(202);
    const roomy = await mint({
      resources: { models: { match: ['pattern'] }, sessions: { bind: [created.session_id] } },
      constraints: { max_sessions: 2 },
    });
    expect((await create(roomy)).status).toBe(200);
    expect((await create(roomy)).status).toBe(403);
  });

  it('DELETE takes a token bound to the session (its creator, or one that binds it with bind) or the API key; no other token', async () => {
    // Spec, endpoint table: "a token bound to that session, or the API key". A creator whose page
    // re-minted its token with bind (auth rule 6) must be able to end its own session.
    const creator = await mint(models('pattern'));
    const { body: created } = await create(creator);
    const rebound = await mint({ resources: { models: { match: ['pattern'] }, sessions: { bind: [created.session_id] } } });
    const stranger = await mint(models('pattern'));
    expect((await end(created.session_id, stranger)).status).toBe(403); // same account, not bound
    expect((await get(created.session_id, rebound)).status).toBe(202);
    expect((await end(created.session_id, rebound)).body).toMatchObject({ status: 'ended' });
    expect((await end(created.session_id, creator)).body).toMatchObject({ status: 'ended' }); // repeatable
    const second = (await create(await mint(models('pattern')))).body;
    expect((await end(second.session_id, creator)).status).toBe(403); // created by another token
    expect((await end(second.session_id, key)).body).toMatchObject({ status: 'ended' }); // the account (server side) may
  });

  it('answers CORS preflights on the session API and /pricing only (browsers never hold API keys)', async () => {
    const preflight = (path: string, method: string) =>
      fetch(`${coordinator.url}${path}`, {
        method: 'OPTIONS',
        headers: {
          origin: 'https://app.example',
          'access-control-request-method': method,
          'access-control-request-headers': 'authorization,content-type',
        },
      });
    const sessionsPreflight = await preflight('/sessions', 'POST');
    expect(sessionsPreflight.status).toBe(204);
    expect(sessionsPreflight.headers.get('access-control-allow-origin')).toBe('*');
    expect(sessionsPreflight.headers.get('access-control-allow-headers')).toMatch(/Authorization/);
    expect(
      (await preflight(`/sessions/${randomUUID()}/transport/webrtc/sdp_params`, 'POST')).headers.get('access-control-allow-origin'),
    ).toBe('*');
    expect(
      (await fetch(`${coordinator.url}/pricing`, { headers: { origin: 'https://app.example' } })).headers.get(
        'access-control-allow-origin',
      ),
    ).toBe('*');
    const tokens = await preflight('/tokens', 'POST');
    expect(tokens.headers.get('access-control-allow-origin')).toBeNull();
    const answer = await fetch(`${coordinator.url}/sessions/${randomUUID()}`, { headers: { origin: 'https://app.example' } });
    expect(answer.headers.get('access-control-expose-headers')).toMatch(/Retry-After/); // 429s tell browsers when to retry
  });

  it("refuses a model outside the token's match, and unknown models, with 403", async () => {
    const token = await mint(models('pattern'));
    const outside = await create(token, 'webcam-fx');
    expect(outside.status).toBe(403);
    expect(outside.body.code).toBe('forbidden');
    expect((await create(await mint(), 'no-such-model')).status).toBe(403);
    const missing = await call(`${coordinator.url}/sessions`, 'POST', token, {});
    expect(missing.body).toMatchObject({ code: 'invalid_request', field: '/model/name' });
  });

  it('answers every request outside the bound set with the same 403, unknown ids included', async () => {
    const mine = await mint(models('pattern'));
    const { body: created } = await create(mine);
    const stranger = await mint(models('pattern'));
    const foreign = await mint(undefined, otherKey);
    const answers = [
      await get(created.session_id, stranger),
      await end(created.session_id, stranger),
      await get(created.session_id, foreign),
      await end(created.session_id, otherKey),
      await get(randomUUID(), mine),
    ];
    for (const answer of answers) {
      expect(answer.status).toBe(403);
      expect(answer.body).toEqual(answers[0]!.body);
    }
    expect((await get(created.session_id, mine)).status).toBe(202); // still open
  });

  it('an unscoped token and the API key (DELETE) act on any session of the account', async () => {
    const { body: created } = await create(await mint(models('pattern')));
    expect((await get(created.session_id, await mint())).status).toBe(202);
    const ended = await end(created.session_id, key, { reason: 'operator ended it' });
    expect(ended.status).toBe(200);
    expect(ended.body).toMatchObject({ state: 'CLOSED', status: 'ended', end_reason: 'operator ended it' });
    expect((await end(created.session_id, key)).status).toBe(200); // idempotent
    expect((await call(`${coordinator.url}/sessions`, 'POST', key, createBody('pattern'))).status).toBe(403);
  });

  it('checks Reactor-API-Version like the runtime: newer 501, older 426, current or absent served', async () => {
    const token = await mint(models('pattern'));
    const post = (version: string | undefined) =>
      fetch(`${coordinator.url}/sessions`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          ...(version ? { 'Reactor-API-Version': version } : {}),
        },
        body: JSON.stringify(createBody('pattern')),
      });
    expect((await post('2')).status).toBe(501);
    expect((await post('0')).status).toBe(426);
    expect((await post('1')).status).toBe(200);
    expect((await post(undefined)).status).toBe(200);
  });

  it('needs credentials: 401 without a bearer, 401 token_expired once expired', async () => {
    expect((await call(`${coordinator.url}/sessions`, 'POST', undefined, createBody('pattern'))).status).toBe(401);
    const token = await mint(models('pattern'));
    now += 3_601_000;
    try {
      const expired = await create(token);
      expect(expired.status).toBe(401);
      expect(expired.body.code).toBe('token_expired');
      expect(expired.headers.get('www-authenticate')).toBe('Bearer');
    } finally {
      now = START;
    }
  });

  describe('account quotas', () => {
    let limited: { key: string; id: string };

    beforeAll(async () => {
      const account = await coordinator.accounts.create('Small', { concurrentSessions: 2, sessionsPerMinute: 3 });
      await coordinator.ledger.grantPromotional(account.id, 1_000_000);
      limited = { key: (await coordinator.apiKeys.create(account.id)).key, id: account.id };
    });

    it('429 too_many_sessions at the concurrency limit (waiting sessions count); ending one frees a slot', async () => {
      const token = await mint({ ...models('pattern', 'webcam-fx'), constraints: { max_sessions: 100 } }, limited.key);
      const a = await create(token);
      await create(token, 'webcam-fx');
      const refused = await create(token);
      expect(refused.status).toBe(429);
      expect(refused.body.code).toBe('too_many_sessions');
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
      await end(a.body.session_id, token);
      expect((await create(token)).status).toBe(200);
    });

    it("the concurrency quota is the account's, shared by all its API keys", async () => {
      const account = await coordinator.accounts.create('Two keys', { concurrentSessions: 2 });
      await coordinator.ledger.grantPromotional(account.id, 1_000_000);
      const first = await mint(
        { ...models('pattern'), constraints: { max_sessions: 10 } },
        (await coordinator.apiKeys.create(account.id)).key,
      );
      const second = await mint(
        { ...models('pattern'), constraints: { max_sessions: 10 } },
        (await coordinator.apiKeys.create(account.id)).key,
      );
      const a = await create(first);
      expect(a.status).toBe(200);
      expect((await create(second)).status).toBe(200);
      for (const token of [first, second]) {
        const refused = await create(token);
        expect(refused.status).toBe(429);
        expect(refused.body.code).toBe('too_many_sessions');
      }
      await end(a.body.session_id, first);
      expect((await create(second)).status).toBe(200); // the slot freed by one key's session serves the other
    });

    it('429 session_rate_limited past the per-minute quota of a model, with Retry-After to the free slot', async () => {
      await coordinator.accounts.setQuotas(limited.id, { concurrentSessions: 100 });
      now = START + 120_000;
      try {
        const token = await mint({ ...models('pattern', 'webcam-fx'), constraints: { max_sessions: 100 } }, limited.key);
        for (let i = 0; i < 3; i++) {
          expect((await create(token)).status).toBe(200);
          now += 10_000;
        }
        const refused = await create(token);
        expect(refused.status).toBe(429);
        expect(refused.body.code).toBe('session_rate_limited');
        expect(refused.headers.get('retry-after')).toBe('30'); // the first of the three turns a minute old
        expect((await create(token, 'webcam-fx')).status).toBe(200); // per model
        now += 30_000;
        expect((await create(token)).status).toBe(200);
      } finally {
        now = START;
      }
    });
  });

  it('admits exactly max_sessions of 1,000 concurrent creations on one token', async () => {
    const token = await mint({ ...models('pattern'), constraints: { max_sessions: 37 } });
    const answers = await Promise.all(Array.from({ length: 1000 }, () => create(token).then((a) => a.status)));
    expect(answers.filter((s) => s === 200)).toHaveLength(37);
    expect(answers.filter((s) => s === 403)).toHaveLength(963);
  }, 120_000);
});

/** Two replicas: two coordinators, each with its own connection pool, on one PostgreSQL database. */
describe('two coordinators on one PostgreSQL', () => {
  let database: string;
  let coordinator: Coordinator;
  const now = () => START;
  beforeAll(async () => {
    database = await freshDatabase('postgres');
    coordinator = await startCoordinator({ database, port: 0, now });
    await coordinator.catalog.add('pattern', 5);
  });
  afterAll(async () => coordinator?.close());

  const models = (...match: string[]) => ({ resources: { models: { match } } });
  const mint = async (details: Record<string, unknown>, apiKey: string): Promise<string> => {
    const response = await fetch(`${coordinator.url}/tokens`, {
      method: 'POST',
      headers: { 'Service-API-Key': apiKey, 'content-type': 'application/json' },
      body: JSON.stringify({ authorization_details: [{ type: 'session', ...details }] }),
    });
    return ((await response.json()) as { token: string }).token;
  };

  it("never over-admit past the account's concurrency quota, whichever replica admits", async () => {
    const second = await startCoordinator({ database, port: 0, now });
    try {
      const account = await coordinator.accounts.create('Raced', { concurrentSessions: 25, sessionsPerMinute: 1000 });
      await coordinator.ledger.grantPromotional(account.id, 1_000_000);
      const raced = (await coordinator.apiKeys.create(account.id)).key;
      // Twenty tokens, so no single token row serializes the requests: only the account lock can.
      const tokens = await Promise.all(
        Array.from({ length: 20 }, () => mint({ ...models('pattern'), constraints: { max_sessions: 40 } }, raced)),
      );
      const urls = [coordinator.url, second.url];
      const answers = await Promise.all(
        Array.from({ length: 400 }, (_, i) =>
          call(`${urls[i % 2]}/sessions`, 'POST', tokens[i % 20], createBody('pattern')).then((a) => a.status),
        ),
      );
      // 25 open at most (the account's concurrency quota), whichever replica admitted them.
      expect(answers.filter((s) => s === 200)).toHaveLength(25);
      const open = await coordinator.storage.db
        .selectFrom('sessions')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('account_id', '=', account.id)
        .executeTakeFirstOrThrow();
      expect(Number(open.n)).toBe(25);
    } finally {
      await second.close();
    }
  }, 120_000);
});
