/**
 * Reliability suite, part 2 (issue 8): every token attack and every scope escape in one place,
 * over real HTTP on 127.0.0.1, on SQLite and PostgreSQL. Imports nothing from other test files
 * on purpose (test/coordinator/tokens.test.ts and sessions.test.ts prove some of these too:
 * the foreign-signature and wrong-audience cases through `tokens.verify`, bind of
 * closed/foreign/unknown ids, a model outside match, the bound set, DELETE by an adopter).
 *
 * Token attacks: each forged token copies the claims of a real token (its `jti` names a live
 * token record, its `sub` the account), so the one defect under test is what must refuse it —
 * and the claim-level attacks (missing exp, nbf, aud, iss, typ, kid) are signed with the
 * coordinator's own private key, so the signature is valid and only the claim check stands.
 * Every attack must answer 401 with a stable `code` (`unauthorized`, or `token_expired` for an
 * expired token) and `WWW-Authenticate: Bearer`.
 *
 * Scope escapes: ≥ 20 ways to reach beyond what a credential allows → 403 (or 401/400 where the
 * spec and docs/coordinator.md say so), with bind of closed, foreign and unknown ids giving the
 * same body and response times of the same order of magnitude.
 */

import { createHmac, createPublicKey, randomUUID } from 'node:crypto';
import {
  SignJWT,
  base64url,
  decodeJwt,
  decodeProtectedHeader,
  exportSPKI,
  generateKeyPair,
  importJWK,
  type CryptoKey,
  type JWK,
  type JWTPayload,
} from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCoordinator, type Coordinator } from '../../coordinator/index.ts';
import { ENGINES, freshDatabase } from '../coordinator/storage-engines.ts';

interface Answer {
  status: number;
  body: Record<string, any>;
  headers: Headers;
  ms: number;
}

const LOOPBACK = '127.0.0.1';
/** Tries per bind variant for the timing comparison. */
const TIMING_TRIES = 30;

async function call(
  url: string,
  init: { method?: string; bearer?: string; apiKey?: string; headers?: Record<string, string>; body?: unknown } = {},
): Promise<Answer> {
  const started = performance.now();
  const response = await fetch(url, {
    method: init.method ?? 'GET',
    headers: {
      ...(init.bearer === undefined ? {} : { authorization: `Bearer ${init.bearer}` }),
      ...(init.apiKey === undefined ? {} : { 'Service-API-Key': init.apiKey }),
      ...(init.body === undefined ? {} : { 'content-type': 'application/json' }),
      ...init.headers,
    },
    ...(init.body === undefined ? {} : { body: typeof init.body === 'string' ? init.body : JSON.stringify(init.body) }),
  });
  const text = await response.text();
  const ms = performance.now() - started;
  let body: Record<string, any> = {};
  try {
    body = JSON.parse(text) as Record<string, any>;
  } catch {
    body = { raw: text };
  }
  return { status: response.status, body, headers: response.headers, ms };
}

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
};

const createBody = (name: string) => ({
  model: { name },
  client_info: { sdk_version: '2.9.0', sdk_type: 'js' },
  supported_transports: [{ protocol: 'webrtc', version: '1.0' }],
});

const encodeSegment = (value: unknown) => base64url.encode(JSON.stringify(value));

describe.each(ENGINES)('token attacks and scope escapes on %s', (engine) => {
  let coordinator: Coordinator;
  let key: string;
  let otherKey: string;
  let accountId: string;
  let otherAccountId: string;
  /** The coordinator's own signing key (from its keyring: stored encrypted): claim attacks carry valid signatures. */
  let signingKey: CryptoKey;
  let kid: string;
  let publicJwk: JWK;
  /** A real unscoped token and its claims: the template every forgery copies. */
  let realToken: string;
  let realClaims: JWTPayload;
  /** A session of the account the real token may read (GET → 202): the target of every attack. */
  let target: string;

  const mint = async (details?: Record<string, unknown>, apiKey = key): Promise<string> => {
    const answer = await call(`${coordinator.url}/tokens`, {
      method: 'POST',
      apiKey,
      body: details ? { authorization_details: [{ type: 'session', ...details }] } : {},
    });
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    return answer.body['token'] as string;
  };
  const mintRaw = (body: unknown, apiKey = key) => call(`${coordinator.url}/tokens`, { method: 'POST', apiKey, body });
  const models = (...match: string[]) => ({ resources: { models: { match } } });
  const binding = (bind: string[], match = ['pattern'], constraints?: Record<string, unknown>) => ({
    resources: { models: { match }, sessions: { bind } },
    ...(constraints ? { constraints } : {}),
  });
  const create = (token: string, model = 'pattern') =>
    call(`${coordinator.url}/sessions`, { method: 'POST', bearer: token, body: createBody(model) });
  const get = (id: string, credential: string) => call(`${coordinator.url}/sessions/${id}`, { bearer: credential });
  const end = (id: string, credential: string) => call(`${coordinator.url}/sessions/${id}`, { method: 'DELETE', bearer: credential });
  /** A session row, for states the HTTP API reaches only slowly (ended, another account's). */
  const insertSession = async (account: string, model: string, status: 'ready' | 'ended' = 'ready') => {
    const id = randomUUID();
    const modelId = (await coordinator.catalog.byName(model))!.id;
    await coordinator.storage.db
      .insertInto('sessions')
      .values({
        id,
        account_id: account,
        model_id: modelId,
        token_id: null,
        status,
        created_at: Date.now(),
        ready_at: null,
        ended_at: null,
        end_reason: null,
        max_duration_seconds: 1200,
      })
      .execute();
    return id;
  };

  /** A JWT signed with the coordinator's own key: the real claims, changed by `edit`, and `header` merged in. */
  const signedByUs = async (edit: (claims: JWTPayload) => JWTPayload, header: Record<string, unknown> = {}) =>
    new SignJWT(edit({ ...realClaims })).setProtectedHeader({ alg: 'ES256', kid, typ: 'JWT', ...header }).sign(signingKey);

  beforeAll(async () => {
    coordinator = await startCoordinator({ database: await freshDatabase(engine), port: 0, host: LOOPBACK, meterFlushMs: 0 });
    const account = await coordinator.accounts.create('Acme', { concurrentSessions: 1000, sessionsPerMinute: 1000 });
    const other = await coordinator.accounts.create('Other', { concurrentSessions: 1000, sessionsPerMinute: 1000 });
    accountId = account.id;
    otherAccountId = other.id;
    await coordinator.ledger.grantPromotional(account.id, 1_000_000);
    await coordinator.ledger.grantPromotional(other.id, 1_000_000);
    ({ key } = await coordinator.apiKeys.create(account.id));
    ({ key: otherKey } = await coordinator.apiKeys.create(other.id));
    await coordinator.catalog.add('pattern', 5);
    await coordinator.catalog.add('webcam-fx', 12);
    await coordinator.catalog.add('secret', 40, { public: false });

    realToken = await mint();
    realClaims = decodeJwt(realToken);
    kid = decodeProtectedHeader(realToken).kid!;
    const current = await coordinator.keyring.current();
    expect(current.kid).toBe(kid);
    signingKey = current.privateKey;
    const row = await coordinator.storage.db
      .selectFrom('signing_keys')
      .select('public_jwk')
      .where('kid', '=', kid)
      .executeTakeFirstOrThrow();
    publicJwk = JSON.parse(row.public_jwk) as JWK;
    target = (await create(realToken)).body['session_id'] as string;
  });
  afterAll(async () => coordinator?.close());

  describe('token attacks → 401', () => {
    const refused = (answer: Answer, code = 'unauthorized') => {
      expect(answer.status, JSON.stringify(answer.body)).toBe(401);
      expect(answer.body).toMatchObject({ code });
      expect(answer.headers.get('www-authenticate')).toBe('Bearer');
    };

    it('the control: the real token, and the same claims re-signed with our key, are accepted', async () => {
      expect((await get(target, realToken)).status).toBe(202);
      expect((await get(target, await signedByUs((c) => c))).status).toBe(202);
    });

    it('alg none (unsigned, with and without a trailing dot)', async () => {
      const unsigned = `${encodeSegment({ alg: 'none', typ: 'JWT' })}.${encodeSegment(realClaims)}`;
      refused(await get(target, `${unsigned}.`));
      refused(await get(target, `${encodeSegment({ alg: 'none', kid, typ: 'JWT' })}.${encodeSegment(realClaims)}.`));
      refused(
        await get(target, `${encodeSegment({ alg: 'NONE', kid, typ: 'JWT' })}.${encodeSegment(realClaims)}.${realToken.split('.')[2]}`),
      );
      refused(await get(target, unsigned)); // two parts
    });

    it('HS256 signed with our public key as the HMAC secret (algorithm confusion), in every form the key is published', async () => {
      const spki = await exportSPKI((await importJWK(publicJwk, 'ES256')) as CryptoKey);
      const secrets = [
        spki,
        JSON.stringify(publicJwk),
        createPublicKey({ key: publicJwk as never, format: 'jwk' })
          .export({ type: 'spki', format: 'der' })
          .toString('base64'),
      ];
      for (const secret of secrets) {
        for (const alg of ['HS256', 'HS384', 'HS512']) {
          const token = await new SignJWT({ ...realClaims })
            .setProtectedHeader({ alg, kid, typ: 'JWT' })
            .sign(new TextEncoder().encode(secret));
          refused(await get(target, token));
        }
      }
      // Hand-built too (jose refuses nothing here, but be independent of it).
      const input = `${encodeSegment({ alg: 'HS256', kid, typ: 'JWT' })}.${encodeSegment(realClaims)}`;
      refused(await get(target, `${input}.${createHmac('sha256', spki).update(input).digest('base64url')}`));
    });

    it('a token signed by a different ES256 key (with our kid, and with its own)', async () => {
      const { privateKey } = await generateKeyPair('ES256');
      for (const header of [{ kid }, { kid: randomUUID() }]) {
        const token = await new SignJWT({ ...realClaims }).setProtectedHeader({ alg: 'ES256', typ: 'JWT', ...header }).sign(privateKey);
        refused(await get(target, token));
      }
      // Other algorithms entirely.
      const rsa = await generateKeyPair('RS256');
      refused(
        await get(target, await new SignJWT({ ...realClaims }).setProtectedHeader({ alg: 'RS256', kid, typ: 'JWT' }).sign(rsa.privateKey)),
      );
    });

    it('a flipped signature byte (first, middle, last), a truncated and an empty signature', async () => {
      const [h, p, s] = realToken.split('.') as [string, string, string];
      const bytes = base64url.decode(s);
      for (const index of [0, bytes.length >> 1, bytes.length - 1]) {
        const flipped = Uint8Array.from(bytes);
        flipped[index]! ^= 0x01;
        refused(await get(target, `${h}.${p}.${base64url.encode(flipped)}`));
      }
      refused(await get(target, `${h}.${p}.${base64url.encode(bytes.slice(0, 32))}`));
      refused(await get(target, `${h}.${p}.`));
      // A flipped payload byte under the real signature.
      refused(await get(target, `${h}.${encodeSegment({ ...realClaims, sub: otherAccountId })}.${s}`));
    });

    it('missing exp (and missing jti, sub, iat), signed with our key', async () => {
      for (const claim of ['exp', 'jti', 'sub', 'iat'] as const) {
        refused(
          await get(
            target,
            await signedByUs((c) => {
              const { [claim]: _dropped, ...rest } = c;
              return rest;
            }),
          ),
        );
      }
    });

    it('expired: beyond any tolerance → token_expired; one second past → token_expired (no tolerance)', async () => {
      const nowSeconds = Math.floor(Date.now() / 1000);
      refused(await get(target, await signedByUs((c) => ({ ...c, iat: nowSeconds - 7200, exp: nowSeconds - 3600 }))), 'token_expired');
      refused(await get(target, await signedByUs((c) => ({ ...c, exp: nowSeconds - 1 }))), 'token_expired');
      refused(await get(target, await signedByUs((c) => ({ ...c, exp: 'never' as never }))));
    });

    it('nbf in the future (an hour, and a minute)', async () => {
      const nowSeconds = Math.floor(Date.now() / 1000);
      refused(await get(target, await signedByUs((c) => ({ ...c, nbf: nowSeconds + 3600 }))));
      refused(await get(target, await signedByUs((c) => ({ ...c, nbf: nowSeconds + 60 }))));
    });

    it('wrong aud (another value, absent, an array without ours)', async () => {
      refused(await get(target, await signedByUs((c) => ({ ...c, aud: 'https://elsewhere.example' }))));
      refused(await get(target, await signedByUs(({ aud: _aud, ...rest }) => rest)));
      refused(await get(target, await signedByUs((c) => ({ ...c, aud: ['a', 'b'] }))));
    });

    it('wrong iss (another value, absent)', async () => {
      refused(await get(target, await signedByUs((c) => ({ ...c, iss: 'https://evil.example' }))));
      refused(await get(target, await signedByUs(({ iss: _iss, ...rest }) => rest)));
    });

    it('wrong typ header (at+jwt, JWE, dpop+jwt, secevent+jwt): only JWT is issued', async () => {
      for (const typ of ['at+jwt', 'JWE', 'dpop+jwt', 'secevent+jwt']) refused(await get(target, await signedByUs((c) => c, { typ })));
    });

    it('a foreign kid, and no kid at all', async () => {
      refused(await get(target, await signedByUs((c) => c, { kid: randomUUID() })));
      refused(await get(target, await signedByUs((c) => c, { kid: '../../etc/passwd' })));
      const noKid = await new SignJWT({ ...realClaims }).setProtectedHeader({ alg: 'ES256', typ: 'JWT' }).sign(signingKey);
      refused(await get(target, noKid));
    });

    it('a token for a jti that is not ours, or for another account (valid signature, unknown record)', async () => {
      refused(await get(target, await signedByUs((c) => ({ ...c, jti: randomUUID() }))));
      refused(await get(target, await signedByUs((c) => ({ ...c, sub: otherAccountId }))));
    });

    it('an oversized token: 8 KB → 401 unparsed; 100 KB → refused by the HTTP server before the app (431), never 2xx', async () => {
      const pad = 'A'.repeat(8 * 1024);
      refused(await get(target, await signedByUs((c) => ({ ...c, pad }))));
      refused(await get(target, `${realToken.split('.')[0]}.${pad}.${realToken.split('.')[2]}`));
      const huge = `${encodeSegment({ alg: 'ES256', kid, typ: 'JWT' })}.${'A'.repeat(100 * 1024)}.AAAA`;
      const answer = await get(target, huge).catch((error: Error) => ({ status: 0, error }) as unknown as Answer);
      // Node's 16 KB header limit answers 431 Request Header Fields Too Large (or drops the connection).
      expect([401, 431, 0]).toContain(answer.status);
      expect(answer.status).not.toBe(200);
    });

    it('garbage: not a JWT, empty bearer, wrong scheme, a token in the API-key header', async () => {
      refused(await get(target, 'not.a.jwt'));
      refused(await get(target, '....'));
      refused(await call(`${coordinator.url}/sessions/${target}`, { headers: { authorization: 'Bearer' } }));
      refused(await call(`${coordinator.url}/sessions/${target}`, { headers: { authorization: `Basic ${realToken}` } }));
      refused(await call(`${coordinator.url}/sessions/${target}`, { headers: { authorization: `Bearer ${realToken} extra` } }));
      refused(await mintRaw({}, realToken)); // a token cannot mint tokens
    });
  });

  describe('scope escapes → denied', () => {
    const forbidden = (answer: Answer, code = 'forbidden') => {
      expect(answer.status, JSON.stringify(answer.body)).toBe(403);
      expect(answer.body).toMatchObject({ code });
    };
    const invalidRequest = (answer: Answer, field: string) => {
      expect(answer.status, JSON.stringify(answer.body)).toBe(400);
      expect(answer.body).toMatchObject({ code: 'invalid_request', field });
      expect(answer.body['token']).toBeUndefined();
    };

    it('1–3: another model (in match elsewhere, private, unknown) on POST /sessions', async () => {
      const token = await mint(models('pattern'));
      forbidden(await create(token, 'webcam-fx'));
      forbidden(await create(token, 'secret'));
      forbidden(await create(token, 'no-such-model'));
      forbidden(await create(realToken, 'secret')); // unscoped: still only visible models
    });

    it("4–7: another account's session, by its scoped token, unscoped token and API key (GET, DELETE, transport)", async () => {
      const theirs = (await create(await mint(models('pattern'), otherKey))).body['session_id'] as string;
      const mine = await mint(models('pattern'));
      const answers = [
        await get(theirs, mine),
        await end(theirs, mine),
        await get(theirs, realToken),
        await end(theirs, key),
        await call(`${coordinator.url}/sessions/${theirs}/transport/webrtc/sdp_params`, {
          method: 'POST',
          bearer: realToken,
          body: { sdp: 'v=0' },
        }),
      ];
      for (const answer of answers) {
        forbidden(answer);
        expect(answer.body).toEqual(answers[0]!.body);
      }
      expect((await get(theirs, await mint(undefined, otherKey))).status).toBe(202); // untouched
    });

    it('8–10: an unbound session of the same account (GET, DELETE, transport) by a scoped token', async () => {
      const stranger = await mint(models('pattern'));
      forbidden(await get(target, stranger));
      forbidden(await end(target, stranger));
      forbidden(await call(`${coordinator.url}/sessions/${target}/transport/webrtc/ice_servers`, { bearer: stranger }));
      forbidden(
        await call(`${coordinator.url}/sessions/${target}/uploads`, {
          method: 'POST',
          bearer: stranger,
          body: { name: 'a', size: 1, mime_type: 'image/png' },
        }),
      );
    });

    it('11–14: bind of closed, foreign, unknown and wrong-model ids: one 403 body, timings within 10× of each other', async () => {
      const open = await insertSession(accountId, 'pattern');
      const variants: Record<string, () => Promise<string>> = {
        closed: () => insertSession(accountId, 'pattern', 'ended'),
        foreign: () => insertSession(otherAccountId, 'pattern'),
        unknown: async () => randomUUID(),
        wrongModel: () => insertSession(accountId, 'webcam-fx'),
      };
      const bodies: Array<Record<string, any>> = [];
      const times: Record<string, number[]> = Object.fromEntries(Object.keys(variants).map((name) => [name, []]));
      // Round-robin, so a load spike on a shared CI machine lands on every variant alike.
      for (let i = 0; i < TIMING_TRIES; i++) {
        for (const [name, id] of Object.entries(variants)) {
          const answer = await mintRaw({ authorization_details: [{ type: 'session', ...binding([open, await id()]) }] });
          forbidden(answer);
          bodies.push(answer.body);
          times[name]!.push(answer.ms);
        }
      }
      const medians = Object.fromEntries(Object.entries(times).map(([name, list]) => [name, median(list)]));
      for (const body of bodies) expect(body).toEqual(bodies[0]);
      const values = Object.values(medians);
      expect(Math.max(...values) / Math.min(...values), JSON.stringify(medians)).toBeLessThan(10);
      console.log(
        `[token-attacks ${engine}] bind refusal medians (ms, ${TIMING_TRIES} tries each): ${JSON.stringify(Object.fromEntries(Object.entries(medians).map(([k, v]) => [k, Number(v.toFixed(2))])))}`,
      );
    });

    it('15–18: authorization_details as a non-array non-object, or with an unknown or missing type → 400, no token', async () => {
      for (const details of ['session', 42, true, null])
        invalidRequest(await mintRaw({ authorization_details: details }), '/authorization_details');
      invalidRequest(await mintRaw({ authorization_details: [{ type: 'admin', ...models('pattern') }] }), '/authorization_details/0/type');
      invalidRequest(
        await mintRaw({ authorization_details: [{ type: 'account', ...models('pattern') }] }),
        '/authorization_details/0/type',
      );
      invalidRequest(await mintRaw({ authorization_details: [models('pattern')] }), '/authorization_details/0/type');
      invalidRequest(await mintRaw({ authorization_details: { type: 'admin' } }), '/authorization_details/type');
      invalidRequest(await mintRaw({ authorization_details: [] }), '/authorization_details');
      invalidRequest(
        await mintRaw({
          authorization_details: [
            { type: 'session', ...models('pattern') },
            { type: 'session', ...models('secret') },
          ],
        }),
        '/authorization_details',
      );
      invalidRequest(
        await mintRaw({ authorization_details: [{ type: 'session', ...models('*') }] }),
        '/authorization_details/0/resources/models/match/0',
      );
      invalidRequest(
        await mintRaw({ authorization_details: [{ type: 'session', ...models('pat*') }] }),
        '/authorization_details/0/resources/models/match/0',
      );
    });

    it("19: minting for a private model the key cannot see, or naming another account's session", async () => {
      forbidden(await mintRaw({ authorization_details: [{ type: 'session', ...models('secret') }] }));
      const theirs = await insertSession(otherAccountId, 'pattern');
      forbidden(await mintRaw({ authorization_details: [{ type: 'session', ...binding([theirs]) }] }));
    });

    it('20–22: a session token on the platform API (models, balance, usage, keys) → 403', async () => {
      const scoped = await mint(models('pattern'));
      for (const path of ['/platform/models', '/platform/balance', '/platform/usage', '/platform/keys']) {
        forbidden(await call(`${coordinator.url}${path}`, { bearer: scoped }));
        expect((await call(`${coordinator.url}${path}`, { bearer: key })).status).toBe(200); // the key itself may
      }
    });

    it('23: DELETE by a token of the same account that does not bind the session → 403, the session stays open', async () => {
      // A token that binds it (bind) may end it: the spec's endpoint table (sessions.test.ts).
      const creator = await mint(models('pattern'));
      const id = (await create(creator)).body['session_id'] as string;
      const unbound = await mint(binding([(await create(await mint(models('pattern')))).body['session_id'] as string]));
      forbidden(await end(id, unbound));
      expect((await get(id, creator)).status).toBe(202);
    });

    it('24–25: a bind-only token cannot create; a token past max_sessions cannot create', async () => {
      const id = (await create(await mint(models('pattern')))).body['session_id'] as string;
      forbidden(await create(await mint(binding([id]))), 'token_exhausted');
      const one = await mint({ ...models('pattern'), constraints: { max_sessions: 1 } });
      expect((await create(one)).status).toBe(200);
      forbidden(await create(one), 'token_exhausted');
    });

    it('26–27: the API key as bearer where only tokens belong (POST /sessions, the transport relay)', async () => {
      forbidden(await create(key));
      forbidden(await call(`${coordinator.url}/sessions/${target}/transport/webrtc/ice_servers`, { bearer: key }));
      expect((await get(target, key)).status).toBe(202); // docs/coordinator.md: GET and DELETE take the key, from a server
    });

    it('28–29: the runtime API with a token or an API key → refused (no runtime secret configured: 403)', async () => {
      for (const credential of [realToken, key]) {
        const answer = await call(`${coordinator.url}/runtimes`, {
          method: 'POST',
          bearer: credential,
          body: { id: 'x', url: 'http://127.0.0.1:1', model: 'pattern' },
        });
        expect([401, 403]).toContain(answer.status);
      }
    });

    it('30: a scoped token after it expired, on its own session → 401 token_expired', async () => {
      const short = await mint({ ...models('pattern') });
      const id = (await create(short)).body['session_id'] as string;
      const expired = await new SignJWT({ ...decodeJwt(short), exp: Math.floor(Date.now() / 1000) - 10 })
        .setProtectedHeader({ alg: 'ES256', kid, typ: 'JWT' })
        .sign(signingKey);
      const answer = await get(id, expired);
      expect(answer.status).toBe(401);
      expect(answer.body.code).toBe('token_expired');
    });

    it('31: a revoked (rotated) API key cannot mint or act', async () => {
      const { key: oldKey, record } = await coordinator.apiKeys.create(accountId);
      await coordinator.apiKeys.rotate(record.id);
      const minting = await mintRaw({}, oldKey);
      expect(minting.status).toBe(401);
      expect((await end(target, oldKey)).status).toBe(401);
    });

    it("32: a token of a revoked API key, on its own session → 401 token_revoked (a rotated key's token still acts)", async () => {
      const leaked = await coordinator.apiKeys.create(accountId);
      const routine = await coordinator.apiKeys.create(accountId);
      const stolen = await mint(models('pattern'), leaked.key);
      const kept = await mint(models('pattern'), routine.key);
      const stolenSession = (await create(stolen)).body['session_id'] as string;
      const keptSession = (await create(kept)).body['session_id'] as string;
      await coordinator.apiKeys.rotate(routine.record.id);
      await coordinator.apiKeys.revoke(leaked.record.id);
      for (const answer of [await get(stolenSession, stolen), await end(stolenSession, stolen), await create(stolen)]) {
        expect(answer.status).toBe(401);
        expect(answer.body).toMatchObject({ code: 'token_revoked' });
        expect(answer.headers.get('www-authenticate')).toBe('Bearer');
      }
      expect((await get(keptSession, kept)).status).toBe(202);
      expect((await end(keptSession, kept)).status).toBe(200);
      expect((await end(stolenSession, key)).status).toBe(200); // the account's active key still ends it
    });
  });
});
