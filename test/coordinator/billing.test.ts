/**
 * Credits and the per-second meter, on SQLite and PostgreSQL: grants expire (promotional 90 days,
 * purchased 365), purchases are bounded, seconds are spent earliest-expiry first, billing runs from
 * `ready` to termination (not while waiting), a second is never charged twice (retried and
 * concurrent flushes), an account without credits gets 402, and one that runs dry is reported.
 */

import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { main as coordinatorCli } from '../../coordinator/cli.ts';
import { startCoordinator, type Coordinator } from '../../coordinator/index.ts';
import { ENGINES, freshDatabase } from './storage-engines.ts';

const START = Date.UTC(2026, 10, 22, 12, 0, 0);
const DAY = 86_400_000;

describe.each(ENGINES)('billing on %s', (engine) => {
  let coordinator: Coordinator;
  let database: string;
  let now = START;

  /** A fresh account with an API key and a scoped token for `pattern` (5 credits/s). */
  const customer = async (name: string) => {
    const account = await coordinator.accounts.create(name);
    const { key } = await coordinator.apiKeys.create(account.id);
    const response = await fetch(`${coordinator.url}/tokens`, {
      method: 'POST',
      headers: { 'Service-API-Key': key, 'content-type': 'application/json' },
      body: JSON.stringify({
        authorization_details: [{ type: 'session', resources: { models: { match: ['pattern'] } }, constraints: { max_sessions: 50 } }],
      }),
    });
    const { token } = (await response.json()) as { token: string };
    return { id: account.id, key, token };
  };
  const createSession = async (token: string) => {
    const response = await fetch(`${coordinator.url}/sessions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: { name: 'pattern' } }),
    });
    return { status: response.status, body: (await response.json()) as Record<string, any> };
  };
  const ticks = (sessionId: string) =>
    coordinator.storage.db
      .selectFrom('meter_ticks')
      .select(['seq', 'seconds', 'credits'])
      .where('session_id', '=', sessionId)
      .orderBy('seq')
      .execute();

  beforeAll(async () => {
    database = await freshDatabase(engine);
    // No signup credits: every test here counts an account's credits from zero (signup credits
    // are tested below).
    coordinator = await startCoordinator({ database, port: 0, now: () => now, meterFlushMs: 0, signupCredits: 0 });
    await coordinator.catalog.add('pattern', 5);
  });
  afterAll(async () => coordinator?.close());

  it('grants expire after 90 days (promotional) and 365 days (purchased)', async () => {
    const { id } = await customer('Expiry');
    const promo = await coordinator.ledger.grantPromotional(id, 1_000);
    const bought = await coordinator.ledger.purchase(id, 2);
    expect(promo.expiresAt - now).toBe(90 * DAY);
    expect(bought).toMatchObject({ kind: 'purchased', credits: 20_000 });
    expect(bought.expiresAt - now).toBe(365 * DAY);
    expect((await coordinator.ledger.balance(id)).credits).toBe(21_000);
    now = START + 90 * DAY;
    try {
      expect((await coordinator.ledger.balance(id)).credits).toBe(20_000); // the promotion is gone
      now = START + 365 * DAY;
      expect((await coordinator.ledger.balance(id)).credits).toBe(0);
    } finally {
      now = START;
    }
  });

  it('bounds purchases to 1–1,000 whole dollars and the balance to 10,000 dollars of credits', async () => {
    const { id } = await customer('Purchases');
    for (const dollars of [0, 1001, 2.5, -1])
      await expect(coordinator.ledger.purchase(id, dollars)).rejects.toMatchObject({ code: 'invalid_request' });
    for (let i = 0; i < 10; i++) await coordinator.ledger.purchase(id, 1_000);
    expect((await coordinator.ledger.balance(id)).credits).toBe(100_000_000);
    await expect(coordinator.ledger.purchase(id, 1)).rejects.toThrow(/ceiling/);
  });

  it('refuses a session with 402 insufficient_credits when the account has none', async () => {
    const { id, token } = await customer('Broke');
    const refused = await createSession(token);
    expect(refused.status).toBe(402);
    expect(refused.body.code).toBe('insufficient_credits');
    await coordinator.ledger.purchase(id, 1);
    expect((await createSession(token)).status).toBe(200);
  });

  it('bills whole seconds from ready to termination, nothing while waiting, at the rate of creation', async () => {
    const { id, token } = await customer('Meter');
    await coordinator.ledger.grantPromotional(id, 10_000);
    const { body } = await createSession(token);
    const sessionId = body.session_id as string;
    now += 30_000; // waiting for a GPU: not billed
    await coordinator.meter.flush();
    expect(await ticks(sessionId)).toEqual([]);
    await coordinator.sessions.markReady(sessionId);
    const readyAt = now;
    now = readyAt + 10_500;
    await coordinator.meter.flush();
    now = readyAt + 12_900;
    await coordinator.meter.flush();
    expect(await ticks(sessionId)).toEqual([
      { seq: 0, seconds: 10, credits: 50 },
      { seq: 10, seconds: 2, credits: 10 },
    ]);
    now = readyAt + 15_200;
    const ended = await fetch(`${coordinator.url}/sessions/${sessionId}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${token}` },
    });
    expect(ended.status).toBe(200);
    expect((await ticks(sessionId)).at(-1)).toEqual({ seq: 12, seconds: 3, credits: 15 }); // charged at termination
    now = readyAt + 60_000;
    await coordinator.meter.flush();
    expect((await ticks(sessionId)).reduce((sum, t) => sum + Number(t.seconds), 0)).toBe(15);
    expect((await coordinator.ledger.balance(id)).credits).toBe(10_000 - 75);
    now = START;
  });

  it('spends the earliest-expiring credits first', async () => {
    const { id, token } = await customer('Order');
    const bought = await coordinator.ledger.purchase(id, 1); // 10,000 credits, 365 days
    now = START + 60_000; // a minute later (the token lives an hour)
    const promo = await coordinator.ledger.grantPromotional(id, 100); // 90 days: expires first
    const { status, body } = await createSession(token);
    expect(status, JSON.stringify(body)).toBe(200);
    await coordinator.sessions.markReady(body.session_id);
    now += 30_000;
    await coordinator.meter.flush(); // 150 credits
    const grants = (await coordinator.ledger.balance(id)).grants;
    expect(grants.map((g) => [g.id, g.remaining])).toEqual([
      [promo.id, 0],
      [bought.id, 9_950],
    ]);
    now = START;
  });

  it('never charges a second twice: retried and concurrent flushes write one tick per second', async () => {
    const { id, token } = await customer('Retries');
    await coordinator.ledger.grantPromotional(id, 100_000);
    const { body } = await createSession(token);
    await coordinator.sessions.markReady(body.session_id);
    now += 20_000;
    await Promise.all(Array.from({ length: 10 }, () => coordinator.meter.flush()));
    await coordinator.meter.flushSession(body.session_id, id); // a retry
    const written = await ticks(body.session_id);
    expect(written.reduce((sum, t) => sum + Number(t.seconds), 0)).toBe(20);
    const draws = await coordinator.storage.db
      .selectFrom('grant_draws')
      .select('credits')
      .where('session_id', '=', body.session_id)
      .execute();
    expect(draws.reduce((sum, d) => sum + Number(d.credits), 0)).toBe(100);
    now = START;
  });

  it('stops at the session maximum duration and reports an account that ran dry', async () => {
    const { id, token } = await customer('Dry');
    await coordinator.ledger.grantPromotional(id, 20); // 4 seconds' worth
    const { body } = await createSession(token);
    await coordinator.sessions.markReady(body.session_id);
    now += 10_000;
    const { mustEnd } = await coordinator.meter.flush();
    expect(mustEnd).toContainEqual({ sessionId: body.session_id, accountId: id, stop: 'out_of_credits' });
    const unpaid = await coordinator.storage.db
      .selectFrom('grant_draws')
      .select('credits')
      .where('session_id', '=', body.session_id)
      .where('grant_id', 'is', null)
      .execute();
    expect(unpaid.map((d) => Number(d.credits))).toEqual([30]);
    expect((await coordinator.ledger.balance(id)).credits).toBe(0);
    now += 3_600_000; // far past the 1,200 s maximum
    await coordinator.meter.flush();
    expect((await ticks(body.session_id)).reduce((sum, t) => sum + Number(t.seconds), 0)).toBe(1200);
    now = START;
  });
  it('a session that ended past its maximum duration stops being a meter candidate once the maximum is billed', async () => {
    const { id, token } = await customer('Ended late');
    await coordinator.ledger.grantPromotional(id, 100_000);
    const { body } = await createSession(token);
    await coordinator.sessions.markReady(body.session_id);
    const readyAt = now;
    try {
      // Ended well past its 1,200 s maximum, as a reap at a late heartbeat records it.
      await coordinator.storage.db
        .updateTable('sessions')
        .set({ status: 'ended', ended_at: readyAt + 1_500_000, end_reason: 'reaped' })
        .where('id', '=', body.session_id)
        .execute();
      now = readyAt + 1_600_000;
      await coordinator.meter.flush();
      expect((await ticks(body.session_id)).reduce((sum, t) => sum + Number(t.seconds), 0)).toBe(1200);
      // Done: later flushes do not charge it, nor take its account's lock for it.
      const charged = vi.spyOn(coordinator.meter, 'flushSession');
      await coordinator.meter.flush();
      expect(charged.mock.calls.map(([sessionId]) => sessionId)).not.toContain(body.session_id);
      charged.mockRestore();
    } finally {
      now = START;
    }
  });

  it("reconciles: grants' running spend equals their draws, ticks are paid exactly, billed seconds are ticked — and a tampered row shows", async () => {
    const { id, token } = await customer('Reconciled');
    await coordinator.ledger.grantPromotional(id, 100_000);
    const sessions = [(await createSession(token)).body, (await createSession(token)).body];
    for (const s of sessions) await coordinator.sessions.markReady(s.session_id);
    try {
      now += 7_000;
      await coordinator.meter.flush(); // both sessions of the account in one charge
      expect(await coordinator.ledger.reconcile(id)).toEqual([]);
      const grant = await coordinator.storage.db
        .selectFrom('credit_grants')
        .select(['id', 'spent'])
        .where('account_id', '=', id)
        .executeTakeFirstOrThrow();
      expect(Number(grant.spent)).toBe(2 * 7 * 5);
      await coordinator.storage.db
        .updateTable('credit_grants')
        .set({ spent: Number(grant.spent) + 1 })
        .where('id', '=', grant.id)
        .execute();
      expect(await coordinator.ledger.reconcile(id)).toEqual([
        `grant ${grant.id}: spent ${2 * 7 * 5 + 1} but its draws sum to ${2 * 7 * 5}`,
      ]);
      await coordinator.storage.db
        .updateTable('credit_grants')
        .set({ spent: Number(grant.spent) })
        .where('id', '=', grant.id)
        .execute();
      await coordinator.storage.db.updateTable('sessions').set({ billed_seconds: 8 }).where('id', '=', sessions[0]!.session_id).execute();
      expect(await coordinator.ledger.reconcile(id)).toEqual([`session ${sessions[0]!.session_id}: billed 8 s but its ticks cover 7 s`]);
      await coordinator.storage.db.updateTable('sessions').set({ billed_seconds: 7 }).where('id', '=', sessions[0]!.session_id).execute();
    } finally {
      now = START;
    }
  });

  it("a monthly billing cap: a running session ends when the month's spend reaches it, then 402 billing_cap_reached until next month", async () => {
    const { id, key, token } = await customer('Cap');
    await coordinator.ledger.grantPromotional(id, 100_000);
    await coordinator.accounts.setQuotas(id, { monthlyCreditCap: 100 }); // 20 seconds of pattern
    const { body } = await createSession(token);
    await coordinator.sessions.markReady(body.session_id);
    const readyAt = now;
    now = readyAt + 15_000;
    await coordinator.housekeeping(); // 75 credits: under the cap
    expect((await coordinator.sessions.get(body.session_id))?.status).toBe('ready');
    now = readyAt + 25_000;
    await coordinator.housekeeping(); // 125: over it — ended now, billed to now
    const ended = await coordinator.sessions.get(body.session_id);
    expect(ended).toMatchObject({ status: 'ended', ended_at: readyAt + 25_000, end_reason: expect.stringMatching(/billing cap/) });
    expect(await coordinator.ledger.spentThisMonth(id)).toBe(125);
    const refused = await createSession(token);
    expect(refused.status).toBe(402);
    expect(refused.body.code).toBe('billing_cap_reached');
    try {
      now = Date.UTC(2026, 11, 1, 0, 0, 1); // a new month: the cap starts over (a fresh token: the old one expired)
      const minted = await fetch(`${coordinator.url}/tokens`, {
        method: 'POST',
        headers: { 'Service-API-Key': key, 'content-type': 'application/json' },
        body: JSON.stringify({ authorization_details: [{ type: 'session', resources: { models: { match: ['pattern'] } } }] }),
      });
      const fresh = (await minted.json()) as { token: string };
      expect(await coordinator.ledger.spentThisMonth(id)).toBe(0);
      const admitted = await createSession(fresh.token);
      expect(admitted.status, JSON.stringify(admitted.body)).toBe(200);
      await coordinator.accounts.setQuotas(id, { monthlyCreditCap: 0 }); // no cap
      await fetch(`${coordinator.url}/sessions/${admitted.body.session_id}`, {
        method: 'DELETE',
        headers: { authorization: `Bearer ${key}` },
      });
    } finally {
      now = START;
    }
  });

  it('terminates a session at its maximum duration (the lower of token and account) and bills exactly that long', async () => {
    const account = await coordinator.accounts.create('Capped');
    const { key } = await coordinator.apiKeys.create(account.id);
    await coordinator.ledger.grantPromotional(account.id, 100_000);
    const minted = await fetch(`${coordinator.url}/tokens`, {
      method: 'POST',
      headers: { 'Service-API-Key': key, 'content-type': 'application/json' },
      body: JSON.stringify({
        authorization_details: [
          { type: 'session', resources: { models: { match: ['pattern'] } }, constraints: { max_session_duration_seconds: 90 } },
        ],
      }),
    });
    const { token } = (await minted.json()) as { token: string };
    const { body } = await createSession(token);
    expect(body.max_duration_seconds).toBe(90);
    await coordinator.sessions.markReady(body.session_id);
    const readyAt = now;
    now = readyAt + 89_000;
    await coordinator.housekeeping();
    const running = await fetch(`${coordinator.url}/sessions/${body.session_id}`, { headers: { authorization: `Bearer ${token}` } });
    expect(((await running.json()) as { status: string }).status).toBe('ready');
    now = readyAt + 95_000;
    await coordinator.housekeeping();
    const ended = (await (
      await fetch(`${coordinator.url}/sessions/${body.session_id}`, { headers: { authorization: `Bearer ${token}` } })
    ).json()) as Record<string, any>;
    expect(ended).toMatchObject({
      state: 'CLOSED',
      ended_at: readyAt + 90_000,
      end_reason: expect.stringMatching(/maximum duration \(90 s\)/),
    });
    expect((await ticks(body.session_id)).reduce((sum, t) => sum + Number(t.seconds), 0)).toBe(90);
    now = START;
  });

  // A hosted runtime ends a session at its maximum duration by itself and reports it a moment
  // after the deadline; any end that comes after the deadline is recorded as the deadline's.
  it("an end reported after the maximum duration (the runtime's own, a late DELETE) is recorded at the deadline, with its reason", async () => {
    const account = await coordinator.accounts.create('Late end');
    const { key } = await coordinator.apiKeys.create(account.id);
    await coordinator.ledger.grantPromotional(account.id, 100_000);
    const minted = await fetch(`${coordinator.url}/tokens`, {
      method: 'POST',
      headers: { 'Service-API-Key': key, 'content-type': 'application/json' },
      body: JSON.stringify({
        authorization_details: [
          { type: 'session', resources: { models: { match: ['pattern'] } }, constraints: { max_session_duration_seconds: 30 } },
        ],
      }),
    });
    const { token } = (await minted.json()) as { token: string };
    const late = (await createSession(token)).body;
    const early = (await createSession(token)).body;
    await coordinator.sessions.markReady(late.session_id);
    await coordinator.sessions.markReady(early.session_id);
    const readyAt = now;
    try {
      now = readyAt + 12_300; // before its maximum: ends now, with the reason given
      await fetch(`${coordinator.url}/sessions/${early.session_id}`, {
        method: 'DELETE',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ reason: 'done' }),
      });
      expect(await coordinator.sessions.get(early.session_id)).toMatchObject({
        status: 'ended',
        ended_at: readyAt + 12_300,
        end_reason: 'done',
      });
      now = readyAt + 30_250; // no housekeeping ran at the deadline
      const ended = await fetch(`${coordinator.url}/sessions/${late.session_id}`, {
        method: 'DELETE',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ reason: 'idle_timeout' }),
      });
      expect(ended.status).toBe(200);
      expect(await coordinator.sessions.get(late.session_id)).toMatchObject({
        status: 'ended',
        ended_at: readyAt + 30_000,
        end_reason: 'The session reached its maximum duration (30 s).',
        billed_seconds: 30,
      });
      expect((await ticks(late.session_id)).reduce((sum, t) => sum + Number(t.seconds), 0)).toBe(30);
    } finally {
      now = START;
    }
  });

  // The other two sides of "the lower of token and account wins": the account's maximum lower
  // than the token's, and no token maximum at all (the account's applies alone).
  it.each([
    { name: "the account maximum is lower than the token's", account: 60, token: 90 as number | undefined, expected: 60 },
    { name: 'the token sets none', account: 60, token: undefined, expected: 60 },
  ])(
    'maximum duration when $name: ends at $expected s and bills exactly that long',
    async ({ account: accountMax, token: tokenMax, expected }) => {
      const account = await coordinator.accounts.create(`Duration ${accountMax}/${tokenMax ?? 'none'}`, {
        maxSessionDurationSeconds: accountMax,
      });
      const { key } = await coordinator.apiKeys.create(account.id);
      await coordinator.ledger.grantPromotional(account.id, 100_000);
      const constraints = tokenMax === undefined ? {} : { constraints: { max_session_duration_seconds: tokenMax } };
      const minted = await fetch(`${coordinator.url}/tokens`, {
        method: 'POST',
        headers: { 'Service-API-Key': key, 'content-type': 'application/json' },
        body: JSON.stringify({
          authorization_details: [{ type: 'session', resources: { models: { match: ['pattern'] } }, ...constraints }],
        }),
      });
      const { token } = (await minted.json()) as { token: string };
      const { body } = await createSession(token);
      expect(body.max_duration_seconds).toBe(expected);
      await coordinator.sessions.markReady(body.session_id);
      const readyAt = now;
      now = readyAt + (expected - 1) * 1000;
      await coordinator.housekeeping();
      expect((await coordinator.sessions.get(body.session_id))?.status).toBe('ready');
      now = readyAt + (expected + 20) * 1000; // past the account's 60 s, short of the token's 90 s
      await coordinator.housekeeping();
      expect(await coordinator.sessions.get(body.session_id)).toMatchObject({
        status: 'ended',
        ended_at: readyAt + expected * 1000,
        end_reason: expect.stringMatching(new RegExp(`maximum duration \\(${expected} s\\)`)),
      });
      expect((await ticks(body.session_id)).reduce((sum, t) => sum + Number(t.seconds), 0)).toBe(expected);
      now = START;
    },
  );

  describe('platform API', () => {
    const read = (path: string, credential?: string) =>
      fetch(`${coordinator.url}${path}`, { headers: credential ? { authorization: `Bearer ${credential}` } : {} }).then(async (r) => ({
        status: r.status,
        body: (await r.json()) as Record<string, any>,
      }));

    it('reads models, balance and usage with the API key; refuses session tokens (403) and anonymous calls (401)', async () => {
      const { id, key, token } = await customer('Platform');
      const secret = await coordinator.catalog.add('platform-secret', 9, { public: false });
      await coordinator.catalog.grant(id, secret.id);
      await coordinator.ledger.grantPromotional(id, 1_000);
      const { body } = await createSession(token);
      await coordinator.sessions.markReady(body.session_id);
      now += 7_000;
      await coordinator.meter.flush();

      const models = await read('/platform/models', key);
      expect(models.status).toBe(200);
      expect(models.body.models.map((m: { name: string }) => m.name)).toEqual(['pattern', 'platform-secret']);
      const balance = await read('/platform/balance', key);
      expect(balance.body.credits).toBe(1_000 - 35);
      expect(balance.body.grants[0]).toMatchObject({ kind: 'promotional', credits: 1_000, remaining: 965 });
      const usage = await read(`/platform/usage?since=${START}`, key);
      expect(usage.body.sessions).toEqual([
        expect.objectContaining({ session_id: body.session_id, model: 'pattern', billed_seconds: 7, credits: 35 }),
      ]);
      expect(usage.body.total).toEqual({ billed_seconds: 7, credits: 35 });

      for (const path of ['/platform/models', '/platform/balance', '/platform/usage']) {
        expect((await read(path, token)).status, path).toBe(403);
        expect((await read(path)).status, path).toBe(401);
      }
      expect((await read('/platform/usage?since=soon', key)).status).toBe(400);
      now = START;
    });

    it('an unscoped token (server side, no authorization_details) reads it like the API key', async () => {
      const { id, key } = await customer('Unscoped');
      await coordinator.ledger.grantPromotional(id, 1_000);
      const minted = await fetch(`${coordinator.url}/tokens`, { method: 'POST', headers: { 'Service-API-Key': key } });
      const { token: unscoped } = (await minted.json()) as { token: string };
      for (const path of ['/platform/models', '/platform/balance', `/platform/usage?since=${START}`]) {
        const withToken = await read(path, unscoped);
        expect(withToken.status, path).toBe(200);
        expect(withToken.body, path).toEqual((await read(path, key)).body);
      }
    });

    it("arclight admin usage reports the charged seconds and credits, and this month's spend", async () => {
      const { id, token } = await customer('Admin usage');
      await coordinator.ledger.grantPromotional(id, 1_000);
      await coordinator.accounts.setQuotas(id, { monthlyCreditCap: 5_000 });
      const { body } = await createSession(token);
      await coordinator.sessions.markReady(body.session_id);
      now += 12_400;
      await coordinator.meter.flush(); // 12 s at 5 credits/s
      let stdout = '';
      const write = process.stdout.write;
      process.stdout.write = ((chunk: string | Uint8Array) => ((stdout += String(chunk)), true)) as typeof process.stdout.write;
      let code: number;
      try {
        code = await coordinatorCli(['admin', 'usage', id, '--since', String(START), '--database', database]);
      } finally {
        process.stdout.write = write;
      }
      expect(code).toBe(0);
      const report = JSON.parse(stdout) as Record<string, any>;
      expect(report.sessions).toEqual([
        expect.objectContaining({ session_id: body.session_id, model: 'pattern', status: 'ready', billed_seconds: 12, credits: 60 }),
      ]);
      expect(report.total).toEqual({ billed_seconds: 12, credits: 60 });
      // The CLI takes the month from the real clock while the ticks carry this test's clock (START):
      // the spend counts them only while the calendar is still in START's month.
      const realMonthStart = Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), 1);
      expect(report.month).toEqual({ spent_credits: now >= realMonthStart ? 60 : 0, cap_credits: 5_000 });
      now = START;
    });
  });
});

// Signup credits (the spec: "New accounts receive free promotional credits", which "expire 90 days
// after issue") and the balance ceiling bounding promotional grants as it bounds purchases.
describe.each(ENGINES)('signup credits and the balance ceiling on %s', (engine) => {
  let now = START;
  const coordinators: Coordinator[] = [];
  const start = async (options: { signupCredits?: number; maxAccountCredits?: number } = {}) => {
    const coordinator = await startCoordinator({
      database: await freshDatabase(engine),
      port: 0,
      now: () => now,
      meterFlushMs: 0,
      ...(options.signupCredits === undefined ? {} : { signupCredits: options.signupCredits }),
      ...(options.maxAccountCredits === undefined ? {} : { pricing: { maxAccountCredits: options.maxAccountCredits } }),
    });
    coordinators.push(coordinator);
    return coordinator;
  };
  const grantRows = (coordinator: Coordinator, accountId: string) =>
    coordinator.storage.db
      .selectFrom('credit_grants')
      .select(['kind', 'credits', 'withheld_credits'])
      .where('account_id', '=', accountId)
      .orderBy('created_at')
      .execute();
  afterAll(async () => {
    for (const coordinator of coordinators) await coordinator.close();
  });

  it('a new account receives 100,000 promotional credits by default, expiring 90 days after issue', async () => {
    const coordinator = await start();
    const account = await coordinator.accounts.create('Newcomer');
    expect(account.signupGrant).toMatchObject({ kind: 'promotional', credits: 100_000, remaining: 100_000, withheld: 0 });
    expect(account.signupGrant!.expiresAt - now).toBe(90 * DAY);
    const { key } = await coordinator.apiKeys.create(account.id);
    const balance = await fetch(`${coordinator.url}/platform/balance`, { headers: { authorization: `Bearer ${key}` } });
    expect(await balance.json()).toEqual({
      credits: 100_000,
      grants: [{ id: account.signupGrant!.id, kind: 'promotional', credits: 100_000, remaining: 100_000, expires_at: START + 90 * DAY }],
    });
    // Spendable at once: a paid session is admitted (no 402) with nothing granted by hand.
    await coordinator.catalog.add('pattern', 5);
    const minted = await fetch(`${coordinator.url}/tokens`, {
      method: 'POST',
      headers: { 'Service-API-Key': key, 'content-type': 'application/json' },
      body: JSON.stringify({ authorization_details: [{ type: 'session', resources: { models: { match: ['pattern'] } } }] }),
    });
    const { token } = (await minted.json()) as { token: string };
    const created = await fetch(`${coordinator.url}/sessions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: { name: 'pattern' } }),
    });
    expect(created.status).toBe(200);
    now = START + 90 * DAY;
    try {
      expect((await coordinator.ledger.balance(account.id)).credits).toBe(0); // expired with the promotion
    } finally {
      now = START;
    }
  });

  it('signupCredits sets the grant; 0 turns it off', async () => {
    const some = await start({ signupCredits: 2_500 });
    const account = await some.accounts.create('Some');
    expect((await some.ledger.balance(account.id)).credits).toBe(2_500);
    const none = await start({ signupCredits: 0 });
    const clean = await none.accounts.create('None');
    expect(clean.signupGrant).toBeUndefined();
    expect((await none.ledger.balance(clean.id)).credits).toBe(0);
    expect(await grantRows(none, clean.id)).toEqual([]);
  });

  it('refuses a signupCredits that is not a whole number of credits, or above the balance ceiling', async () => {
    for (const signupCredits of [-1, 2.5, Number.NaN]) {
      await expect(startCoordinator({ database: ':memory:', port: 0, signupCredits })).rejects.toThrow(
        /signupCredits must be a whole number/,
      );
    }
    await expect(
      startCoordinator({ database: ':memory:', port: 0, signupCredits: 5_001, pricing: { maxAccountCredits: 5_000 } }),
    ).rejects.toThrow(/above the balance ceiling of 5000/);
  });

  it('a promotional grant past the balance ceiling is made up to it; the rest is withheld and recorded', async () => {
    const coordinator = await start({ signupCredits: 100_000, maxAccountCredits: 150_000 });
    const { id } = await coordinator.accounts.create('Near the ceiling');
    const cut = await coordinator.ledger.grantPromotional(id, 80_000);
    expect(cut).toMatchObject({ kind: 'promotional', credits: 50_000, remaining: 50_000, withheld: 30_000 });
    expect((await coordinator.ledger.balance(id)).credits).toBe(150_000);
    // At the ceiling: nothing is added, and the attempt is still on record.
    expect(await coordinator.ledger.grantPromotional(id, 10)).toMatchObject({ credits: 0, withheld: 10 });
    const { credits, grants } = await coordinator.ledger.balance(id);
    expect(credits).toBe(150_000);
    // The empty grant is not listed. (Grants made in the same millisecond tie on expiry and
    // creation time, so their order is the ids': compare them sorted.)
    expect(grants.map((g) => g.credits).sort((a, b) => b - a)).toEqual([100_000, 50_000]);
    const rows = (await grantRows(coordinator, id)).map((r) => [r.kind, Number(r.credits), Number(r.withheld_credits)] as const);
    expect([...rows].sort((a, b) => b[1] - a[1])).toEqual([
      ['promotional', 100_000, 0],
      ['promotional', 50_000, 30_000],
      ['promotional', 0, 10],
    ]);
    // Purchases keep their rule: refused, not cut.
    await expect(coordinator.ledger.purchase(id, 1)).rejects.toThrow(/ceiling/);
  });

  it('concurrent promotional grants never take the balance past the ceiling', async () => {
    const coordinator = await start({ signupCredits: 0, maxAccountCredits: 150_000 });
    const { id } = await coordinator.accounts.create('Raced grants');
    const grants = await Promise.all(Array.from({ length: 10 }, () => coordinator.ledger.grantPromotional(id, 20_000)));
    expect(grants.reduce((sum, g) => sum + g.credits, 0)).toBe(150_000);
    expect(grants.reduce((sum, g) => sum + g.withheld, 0)).toBe(50_000);
    expect((await coordinator.ledger.balance(id)).credits).toBe(150_000);
  });
});
