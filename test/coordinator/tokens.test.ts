/**
 * POST /tokens, GET /pricing and the JWKS, over real HTTP on loopback, on SQLite and PostgreSQL:
 * every rule of the spec's Token section and Authentication rules 7 and 12.
 */

import { randomUUID } from 'node:crypto';
import { createLocalJWKSet, decodeJwt, decodeProtectedHeader, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCoordinator, type Coordinator } from '../../coordinator/index.ts';
import type { CatalogModel } from '../../coordinator/index.ts';
import { ENGINES, freshDatabase } from './storage-engines.ts';

const START = Date.UTC(2026, 10, 22, 12, 0, 0);

describe.each(ENGINES)('tokens on %s', (engine) => {
  let coordinator: Coordinator;
  let now = START;
  let key: string;
  let keyId: string;
  let accountId: string;
  let otherAccountId: string;
  const models: Record<string, CatalogModel> = {};

  const post = async (body: unknown, apiKey: string | null = key) => {
    const response = await fetch(`${coordinator.url}/tokens`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(apiKey === null ? {} : { 'Service-API-Key': apiKey }) },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as Record<string, any>, headers: response.headers };
  };
  const scoped = (entry: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
    post({ authorization_details: [{ type: 'session', ...entry }], ...extra });
  const match = (...names: string[]) => ({ resources: { models: { match: names } } });

  /** A session row as the session endpoints (a later step) will create them. */
  const insertSession = async (account: string, model: string, status: 'ready' | 'ended' = 'ready') => {
    const id = randomUUID();
    await coordinator.storage.db
      .insertInto('sessions')
      .values({
        id,
        account_id: account,
        model_id: models[model]!.id,
        token_id: null,
        status,
        created_at: now,
        ready_at: null,
        ended_at: null,
        end_reason: null,
        max_duration_seconds: 1200,
      })
      .execute();
    return id;
  };

  beforeAll(async () => {
    coordinator = await startCoordinator({ database: await freshDatabase(engine), port: 0, now: () => now });
    const account = await coordinator.accounts.create('Acme');
    const other = await coordinator.accounts.create('Other');
    accountId = account.id;
    otherAccountId = other.id;
    ({
      key,
      record: { id: keyId },
    } = await coordinator.apiKeys.create(account.id));
    models['pattern'] = await coordinator.catalog.add('pattern', 5);
    models['webcam-fx'] = await coordinator.catalog.add('webcam-fx', 12);
    models['secret'] = await coordinator.catalog.add('secret', 40, { public: false });
    models['granted'] = await coordinator.catalog.add('granted', 30, { public: false });
    await coordinator.catalog.grant(account.id, models['granted']!.id);
  });
  afterAll(async () => coordinator?.close());

  describe('the API key', () => {
    it('is required, in Service-API-Key: 401 with a JSON code otherwise', async () => {
      for (const apiKey of [null, 'rk_not-a-key', 'not-even-prefixed', '']) {
        const { status, body, headers } = await post({}, apiKey);
        expect(status, String(apiKey)).toBe(401);
        expect(body.code).toBe('unauthorized');
        expect(body.message).toMatch(/API key/);
        expect(headers.get('content-type')).toMatch(/application\/json/);
      }
    });

    it('stops working when rotated; tokens minted with it keep working', async () => {
      const { key: oldKey, record } = await coordinator.apiKeys.create(accountId);
      const minted = await post({}, oldKey);
      expect(minted.status).toBe(200);
      const { key: newKey } = await coordinator.apiKeys.rotate(record.id);
      expect(newKey).toMatch(/^rk_[A-Za-z0-9_-]{43}$/);
      expect((await post({}, oldKey)).status).toBe(401);
      expect((await post({}, newKey)).status).toBe(200);
      expect((await coordinator.tokens.verify(minted.body.token)).accountId).toBe(accountId);
    });

    it('revoked: the tokens it minted stop working at once (401 token_revoked), scoped and unscoped, on HTTP too', async () => {
      const { key: leaked, record } = await coordinator.apiKeys.create(accountId);
      const unscoped = (await post({}, leaked)).body.token as string;
      const sessionToken = (await post({ authorization_details: [{ type: 'session', ...match('pattern') }] }, leaked)).body.token as string;
      const session = await fetch(`${coordinator.url}/sessions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${sessionToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: { name: 'pattern' } }),
      });
      expect(session.status).toBe(200);
      const sessionId = ((await session.json()) as { session_id: string }).session_id;
      await expect(coordinator.tokens.verify(unscoped)).resolves.toMatchObject({ apiKeyId: record.id });
      await coordinator.apiKeys.revoke(record.id);
      for (const token of [unscoped, sessionToken]) {
        await expect(coordinator.tokens.verify(token)).rejects.toMatchObject({ code: 'token_revoked', status: 401 });
        const read = await fetch(`${coordinator.url}/sessions/${sessionId}`, { headers: { authorization: `Bearer ${token}` } });
        expect(read.status).toBe(401);
        expect(read.headers.get('www-authenticate')).toBe('Bearer');
        expect(await read.json()).toEqual({ code: 'token_revoked', message: expect.stringMatching(/revoked; mint a new token/) });
      }
      expect((await post({}, leaked)).status).toBe(401); // and the key itself, as before
      // The account's other keys and their tokens are untouched.
      await expect(coordinator.tokens.verify((await post({})).body.token)).resolves.toMatchObject({ apiKeyId: keyId });
      await coordinator.storage.db.updateTable('sessions').set({ status: 'ended', ended_at: now }).where('id', '=', sessionId).execute();
    });

    it('rotated then revoked: the rotation leaves its tokens alive; revoking the rotated key kills them', async () => {
      const { record } = await coordinator.apiKeys.create(accountId);
      const {
        key: before,
        record: { id: beforeId },
      } = await coordinator.apiKeys.create(accountId);
      const token = (await post({}, before)).body.token as string;
      await coordinator.apiKeys.rotate(beforeId);
      await expect(coordinator.tokens.verify(token)).resolves.toMatchObject({ apiKeyId: beforeId });
      expect((await coordinator.apiKeys.getOwned(accountId, beforeId))!.tokensRevokedAt).toBeNull();
      await coordinator.apiKeys.revoke(beforeId, now);
      await expect(coordinator.tokens.verify(token)).rejects.toMatchObject({ code: 'token_revoked' });
      expect((await coordinator.apiKeys.getOwned(accountId, beforeId))!.tokensRevokedAt).toBe(now);
      await coordinator.apiKeys.revoke(record.id);
    });

    it('is stored only as a hash', async () => {
      const rows = await coordinator.storage.db.selectFrom('api_keys').selectAll().where('id', '=', keyId).execute();
      expect(JSON.stringify(rows)).not.toContain(key);
      expect(rows[0]!.key_prefix).toBe(key.slice(0, 10));
    });
  });

  describe('an unscoped token (no authorization_details)', () => {
    it('is a signed ES256 JWT with iss, aud, sub, jti, exp, a kid from the JWKS, lasting 3600 s', async () => {
      const { status, body } = await post({});
      expect(status).toBe(200);
      expect(body.token_type).toBe('Bearer');
      expect(body.expires_at).toBe(START / 1000 + 3600);
      expect(body.authorization_details).toBeUndefined();
      const header = decodeProtectedHeader(body.token);
      expect(header.alg).toBe('ES256');
      const jwks = (await (await fetch(`${coordinator.url}/.well-known/jwks.json`)).json()) as { keys: Array<{ kid: string }> };
      expect(jwks.keys.map((k) => k.kid)).toContain(header.kid);
      const { payload } = await jwtVerify(body.token, createLocalJWKSet(jwks as never), {
        issuer: 'arclight',
        audience: 'arclight',
        currentDate: new Date(now),
      });
      expect(payload.sub).toBe(accountId);
      expect(payload.exp).toBe(body.expires_at);
      expect(payload['scp']).toBe('unscoped');
      const verified = await coordinator.tokens.verify(body.token);
      expect(verified).toMatchObject({ accountId, scoped: false, models: undefined });
    });
  });

  describe('expires_after', () => {
    it('sets the lifetime and is clamped silently at 21600 s (still 200)', async () => {
      expect((await post({ expires_after: 100 })).body.expires_at).toBe(START / 1000 + 100);
      for (const seconds of [21_599, 21_600, 21_601, 999_999]) {
        const { status, body } = await scoped(match('pattern'), { expires_after: seconds });
        expect(status).toBe(200);
        expect(body.expires_at).toBe(START / 1000 + Math.min(seconds, 21_600));
      }
    });

    it('must be a positive integer', async () => {
      for (const bad of [0, -5, 1.5, '60', null]) {
        const { status, body } = await post({ expires_after: bad });
        expect(status, JSON.stringify(bad)).toBe(400);
        expect(body).toMatchObject({ code: 'invalid_request', field: '/expires_after' });
      }
    });

    it('an expired token is refused with 401 token_expired', async () => {
      const { body } = await post({ expires_after: 60 });
      await expect(coordinator.tokens.verify(body.token)).resolves.toBeDefined();
      now += 61_000;
      try {
        await expect(coordinator.tokens.verify(body.token)).rejects.toMatchObject({ code: 'token_expired', status: 401 });
      } finally {
        now = START;
      }
    });
  });

  describe('a session-scoped token', () => {
    it('accepts one entry or an array of one, echoes an array with max_sessions resolved to 5', async () => {
      for (const details of [{ type: 'session', ...match('pattern') }, [{ type: 'session', ...match('pattern') }]]) {
        const { status, body } = await post({ authorization_details: details });
        expect(status).toBe(200);
        expect(body.authorization_details).toEqual([
          { type: 'session', resources: { models: { match: ['pattern'] } }, constraints: { max_sessions: 5 } },
        ]);
        expect(body.expires_at).toBe(START / 1000 + 3600);
        expect(decodeJwt(body.token)['scp']).toBe('session');
        expect(await coordinator.tokens.verify(body.token)).toMatchObject({ scoped: true, models: ['pattern'], maxSessions: 5 });
      }
    });

    it('checks the entry: one entry, type session, a non-empty match without wildcards', async () => {
      const cases: Array<[unknown, string]> = [
        [[], '/authorization_details'],
        [
          [
            { type: 'session', ...match('pattern') },
            { type: 'session', ...match('pattern') },
          ],
          '/authorization_details',
        ],
        [[{ type: 'account', ...match('pattern') }], '/authorization_details/0/type'],
        [[{ type: 'session' }], '/authorization_details/0/resources'],
        [[{ type: 'session', resources: { models: { match: [] } } }], '/authorization_details/0/resources/models/match'],
        [[{ type: 'session', resources: { models: { match: 'pattern' } } }], '/authorization_details/0/resources/models/match'],
        [[{ type: 'session', ...match('pattern', '*') }], '/authorization_details/0/resources/models/match/1'],
        [[{ type: 'session', ...match('pat*') }], '/authorization_details/0/resources/models/match/0'],
        [{ type: 'session', resources: { models: { match: [7] } } }, '/authorization_details/resources/models/match/0'],
      ];
      for (const [details, field] of cases) {
        const { status, body } = await post({ authorization_details: details });
        expect(status, JSON.stringify(details)).toBe(400);
        expect(body, JSON.stringify(details)).toMatchObject({ code: 'invalid_request', field });
      }
    });

    it('refuses models the key cannot see with 403, the same for unknown and private ones', async () => {
      const unknown = await scoped(match('pattern', 'no-such-model'));
      const hidden = await scoped(match('secret'));
      expect(unknown.status).toBe(403);
      expect(hidden.status).toBe(403);
      expect(hidden.body).toEqual(unknown.body);
      expect(unknown.body.code).toBe('forbidden');
      const granted = await scoped(match('granted', 'pattern'));
      expect(granted.status).toBe(200);
    });

    it('bounds max_sessions to 1–500 and max_session_duration_seconds to 1–86400, echoing them', async () => {
      for (const [constraints, field] of [
        [{ max_sessions: 0 }, 'max_sessions'],
        [{ max_sessions: 501 }, 'max_sessions'],
        [{ max_sessions: 2.5 }, 'max_sessions'],
        [{ max_session_duration_seconds: 0 }, 'max_session_duration_seconds'],
        [{ max_session_duration_seconds: 86_401 }, 'max_session_duration_seconds'],
      ] as const) {
        const { status, body } = await scoped({ ...match('pattern'), constraints });
        expect(status, JSON.stringify(constraints)).toBe(400);
        expect(body.field).toBe(`/authorization_details/0/constraints/${field}`);
      }
      const { status, body } = await scoped({
        ...match('pattern'),
        constraints: { max_sessions: 500, max_session_duration_seconds: 86_400 },
      });
      expect(status).toBe(200);
      expect(body.authorization_details[0].constraints).toEqual({ max_sessions: 500, max_session_duration_seconds: 86_400 });
      expect(await coordinator.tokens.verify(body.token)).toMatchObject({ maxSessions: 500, maxSessionDurationSeconds: 86_400 });
    });
  });

  describe('resources.sessions.bind', () => {
    it('binds open sessions of the account; max_sessions defaults to their number; ids stay out of the JWT', async () => {
      const a = await insertSession(accountId, 'pattern');
      const b = await insertSession(accountId, 'webcam-fx');
      const { status, body } = await scoped({ resources: { models: { match: ['pattern', 'webcam-fx'] }, sessions: { bind: [a, b, a] } } });
      expect(status).toBe(200);
      expect(body.authorization_details[0]).toEqual({
        type: 'session',
        resources: { models: { match: ['pattern', 'webcam-fx'] }, sessions: { bind: [a, b] } },
        constraints: { max_sessions: 2 },
      });
      const claims = JSON.stringify(decodeJwt(body.token));
      expect(claims).not.toContain(a);
      expect(claims).not.toContain(b);
      const verified = await coordinator.tokens.verify(body.token);
      const bound = await coordinator.storage.db
        .selectFrom('token_bindings')
        .select('session_id')
        .where('token_id', '=', verified.tokenId)
        .execute();
      expect(bound.map((r) => r.session_id).sort()).toEqual([a, b].sort());
      const row = await coordinator.storage.db
        .selectFrom('tokens')
        .select(['bound_sessions', 'max_sessions'])
        .where('id', '=', verified.tokenId)
        .executeTakeFirstOrThrow();
      expect(row).toEqual({ bound_sessions: 2, max_sessions: 2 }); // no room to create
    });

    it('answers closed, foreign, unknown and wrong-model ids with the same 403', async () => {
      const closed = await insertSession(accountId, 'pattern', 'ended');
      const foreign = await insertSession(otherAccountId, 'pattern');
      const wrongModel = await insertSession(accountId, 'webcam-fx');
      const open = await insertSession(accountId, 'pattern');
      const answers = [];
      for (const id of [closed, foreign, randomUUID(), wrongModel]) {
        const { status, body } = await scoped({ resources: { models: { match: ['pattern'] }, sessions: { bind: [open, id] } } });
        expect(status).toBe(403);
        answers.push(body);
      }
      for (const answer of answers) expect(answer).toEqual(answers[0]);
      expect(answers[0]).toEqual({ code: 'forbidden', message: expect.stringMatching(/not available/) });
    });

    it('refuses a max_sessions below the number of bound sessions', async () => {
      const a = await insertSession(accountId, 'pattern');
      const b = await insertSession(accountId, 'pattern');
      const { status, body } = await scoped({
        resources: { models: { match: ['pattern'] }, sessions: { bind: [a, b] } },
        constraints: { max_sessions: 1 },
      });
      expect(status).toBe(400);
      expect(body.field).toBe('/authorization_details/0/constraints/max_sessions');
      const roomy = await scoped({
        resources: { models: { match: ['pattern'] }, sessions: { bind: [a, b] } },
        constraints: { max_sessions: 3 },
      });
      expect(roomy.body.authorization_details[0].constraints.max_sessions).toBe(3);
    });
  });

  describe('bodies', () => {
    it('answers malformed JSON with 400 invalid_json and a non-object with invalid_request', async () => {
      expect((await post('{nope')).body.code).toBe('invalid_json');
      expect((await post('[1]')).body).toMatchObject({ code: 'invalid_request' });
      expect((await post('')).status).toBe(200); // an empty body is an unscoped request
    });
  });

  describe('signing keys', () => {
    it('rotate: new tokens carry the new kid; tokens signed before still verify', async () => {
      const before = (await post({})).body.token as string;
      const kid = await coordinator.keyring.rotate(now);
      const after = (await post({})).body.token as string;
      expect(decodeProtectedHeader(after).kid).toBe(kid);
      expect(decodeProtectedHeader(before).kid).not.toBe(kid);
      await expect(coordinator.tokens.verify(before)).resolves.toBeDefined();
      const jwks = (await (await fetch(`${coordinator.url}/.well-known/jwks.json`)).json()) as { keys: Array<{ kid: string; d?: string }> };
      expect(jwks.keys.map((k) => k.kid)).toEqual(expect.arrayContaining([kid, decodeProtectedHeader(before).kid]));
      expect(jwks.keys.every((k) => k.d === undefined)).toBe(true); // no private parts
    });

    it('retire: the tokens a retired key signed stop verifying (a remembered verdict too), and it leaves the JWKS', async () => {
      const old = (await post({})).body.token as string;
      const oldKid = decodeProtectedHeader(old).kid!;
      await expect(coordinator.tokens.verify(old)).resolves.toBeDefined(); // its signature verdict is now remembered
      await coordinator.keyring.rotate(now);
      await expect(coordinator.tokens.verify(old)).resolves.toBeDefined();
      const retired = await coordinator.keyring.retire(oldKid);
      expect(retired).toMatchObject({ kid: oldKid, current: false, supersededAt: now });
      await expect(coordinator.tokens.verify(old)).rejects.toMatchObject({ code: 'unauthorized', status: 401 });
      const jwks = (await (await fetch(`${coordinator.url}/.well-known/jwks.json`)).json()) as { keys: Array<{ kid: string }> };
      expect(jwks.keys.map((k) => k.kid)).not.toContain(oldKid);
      await expect(coordinator.tokens.verify((await post({})).body.token)).resolves.toBeDefined();
    });

    it('retire: refuses the current signing key and an unknown kid', async () => {
      const { kid } = await coordinator.keyring.current();
      await expect(coordinator.keyring.retire(kid)).rejects.toThrow(/is the current signing key: rotate first/);
      await expect(coordinator.keyring.retire(randomUUID())).rejects.toThrow(/no signing key/);
      expect((await coordinator.keyring.list()).find((k) => k.current)?.kid).toBe(kid);
    });

    it('are stored encrypted (v1, AES-256-GCM): no private JWK member in the database', async () => {
      const rows = await coordinator.storage.db.selectFrom('signing_keys').selectAll().execute();
      expect(rows.length).toBeGreaterThan(0);
      for (const row of rows) {
        expect(row.private_jwk).toMatch(/^v1:[\w-]{16}:[\w-]+:[\w-]{22}$/);
        expect(row.private_jwk).not.toContain('"d":');
        expect(JSON.parse(row.public_jwk)).not.toHaveProperty('d');
      }
    });

    it('refuses a token signed by anyone else, or for another audience', async () => {
      const token = (await post({})).body.token as string;
      const [h, p] = token.split('.');
      await expect(coordinator.tokens.verify(`${h}.${p}.AAAA`)).rejects.toMatchObject({ code: 'unauthorized', status: 401 });
      await expect(coordinator.tokens.verify('not.a.jwt')).rejects.toMatchObject({ code: 'unauthorized' });
    });
  });

  describe('GET /pricing', () => {
    it('is public and lists the settings and the public catalog with per-second rates', async () => {
      const response = await fetch(`${coordinator.url}/pricing`);
      expect(response.status).toBe(200);
      const body = (await response.json()) as Record<string, any>;
      expect(body.settings).toEqual({
        credits_per_dollar: 10_000,
        purchase: { min_dollars: 1, max_dollars: 1_000 },
        auto_topup: { min_dollars: 10, max_threshold_credits: 100_000_000 - 100_000 },
        max_account_credits: 100_000_000,
      });
      expect(body.models).toEqual([
        { id: models['pattern']!.id, name: 'pattern', rate: { amount_per_sec: 5, unit: 'credits', denomination: 'second' } },
        { id: models['webcam-fx']!.id, name: 'webcam-fx', rate: { amount_per_sec: 12, unit: 'credits', denomination: 'second' } },
      ]);
    });

    it('omits auto_topup.max_threshold_credits when max_account_credits is 0 (no cap), as the spec says', async () => {
      const uncapped = await startCoordinator({
        database: await freshDatabase(engine),
        port: 0,
        meterFlushMs: 0,
        pricing: { maxAccountCredits: 0 },
      });
      try {
        const body = (await (await fetch(`${uncapped.url}/pricing`)).json()) as Record<string, any>;
        expect(body.settings).toEqual({
          credits_per_dollar: 10_000,
          purchase: { min_dollars: 1, max_dollars: 1_000 },
          auto_topup: { min_dollars: 10 }, // the key is absent, not null or 0
          max_account_credits: 0,
        });
        expect(body.models).toEqual([]); // always present, even with an empty catalog
      } finally {
        await uncapped.close();
      }
    });
  });
});
