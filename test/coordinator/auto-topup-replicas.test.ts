/**
 * Automatic top-up across coordinator processes (issue 22's race): two `arclight coordinator`
 * processes on one database, each with the test payment provider, and an account below its
 * top-up threshold with 100 running sessions. 100 concurrent `DELETE /sessions/{id}`, spread over
 * both processes, each charge their session's last seconds (a flush under the account's lock, on
 * whichever process served it — while the housekeeping holder's own flushes run too): exactly one
 * top-up purchase is made, confirmed once, and the ledger reconciles. What makes it hold is the
 * claim inside the charge's transaction (the account's row lock on PostgreSQL, the write lock of
 * BEGIN IMMEDIATE on SQLite) that disarms the settings, backed by a partial unique index allowing
 * one pending top-up per account.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CreditLedger } from '../../coordinator/billing/credit-ledger.ts';
import { startCoordinator, TestPaymentProvider } from '../../coordinator/index.ts';
import { DEFAULT_PRICING } from '../../coordinator/pricing/pricing.ts';
import { openStorage, type CoordinatorStorage } from '../../coordinator/storage/database.ts';
import { freePort, killProcess, startCoordinatorProcess, type CoordinatorProcess } from '../support/coordinator-process.ts';
import { pollUntil } from '../support/poll.ts';
import { ENGINES, freshDatabase } from './storage-engines.ts';

const SESSIONS = 100;
const THRESHOLD = 10_000_000;
const START_CREDITS = 500_000;

describe.each(ENGINES)('automatic top-up across two coordinator processes on %s', (engine) => {
  let replicas: CoordinatorProcess[] = [];
  let database: string;
  let storage: CoordinatorStorage;
  let accountId: string;
  let key: string;
  const sessionIds: string[] = [];

  beforeAll(async () => {
    database = await freshDatabase(engine);
    // Seeded in-process, its clock two minutes back: the sessions have been ready that long when
    // the processes (on the real clock) end them, so every end charges about 120 s.
    const clock = Date.now() - 120_000;
    const seed = await startCoordinator({
      database,
      port: 0,
      meterFlushMs: 0,
      signupCredits: 0,
      now: () => clock,
      paymentProvider: new TestPaymentProvider(),
    });
    try {
      await seed.catalog.add('pattern', 5);
      const account = await seed.accounts.create('Racer', { concurrentSessions: SESSIONS, sessionsPerMinute: 1_000 }, clock);
      accountId = account.id;
      await seed.ledger.grantPromotional(accountId, START_CREDITS);
      ({ key } = await seed.apiKeys.create(accountId, { now: clock }));
      const minted = await fetch(`${seed.url}/tokens`, {
        method: 'POST',
        headers: { 'Service-API-Key': key, 'content-type': 'application/json' },
        body: JSON.stringify({
          authorization_details: [
            { type: 'session', resources: { models: { match: ['pattern'] } }, constraints: { max_sessions: SESSIONS } },
          ],
        }),
      });
      const { token } = (await minted.json()) as { token: string };
      for (let i = 0; i < SESSIONS; i++) {
        const response = await fetch(`${seed.url}/sessions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: { name: 'pattern' } }),
        });
        const { session_id: id } = (await response.json()) as { session_id: string };
        await seed.sessions.markReady(id);
        sessionIds.push(id);
      }
      // Saved while the balance (500,000) is far below the threshold: armed.
      const saved = await fetch(`${seed.url}/platform/auto-topup`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ threshold_credits: THRESHOLD, amount_dollars: 10 }),
      });
      expect(await saved.json()).toMatchObject({ enabled: true, armed: true });
    } finally {
      await seed.close();
    }
    replicas = await Promise.all(
      [0, 1].map(async () =>
        startCoordinatorProcess({
          database,
          port: await freePort(),
          extraArgs: ['--payment-provider', 'test', '--meter-flush-ms', '1000'],
        }),
      ),
    );
    storage = await openStorage(database);
  }, 120_000);

  afterAll(async () => {
    for (const replica of replicas) await killProcess(replica.child);
    if (!storage) return;
    try {
      // Whatever the race did, the ledger adds up.
      expect(await new CreditLedger(storage.db, storage.engine, DEFAULT_PRICING).reconcile()).toEqual([]);
    } finally {
      await storage.close();
    }
  });

  it(`${SESSIONS} concurrent charges below the threshold, on both processes, make exactly one top-up purchase`, async () => {
    const answers = await Promise.all(
      sessionIds.map((id, i) =>
        fetch(`${replicas[i % replicas.length]!.url}/sessions/${id}`, {
          method: 'DELETE',
          headers: { authorization: `Bearer ${key}` },
        }).then(async (r) => {
          await r.arrayBuffer();
          return r.status;
        }),
      ),
    );
    expect(answers).toEqual(Array(SESSIONS).fill(200));
    // Every session's seconds charged (housekeeping may have charged some first), and no payment still in flight.
    await pollUntil(
      'every session charged to its end and no purchase pending',
      async () => {
        const sessions = await storage.db
          .selectFrom('sessions')
          .select(['status', 'ready_at', 'ended_at', 'billed_seconds'])
          .where('account_id', '=', accountId)
          .execute();
        const due = sessions.filter(
          (r) => r.status !== 'ended' || Number(r.billed_seconds) < Math.floor((Number(r.ended_at) - Number(r.ready_at)) / 1000),
        );
        const pending = await storage.db
          .selectFrom('purchases')
          .select('id')
          .where('account_id', '=', accountId)
          .where('status', '=', 'pending')
          .execute();
        return due.length === 0 && pending.length === 0;
      },
      {
        timeoutMs: 60_000,
        diagnostics: async () =>
          `\npurchases: ${JSON.stringify(await storage.db.selectFrom('purchases').selectAll().where('account_id', '=', accountId).execute())}` +
          `\nsessions: ${JSON.stringify(await storage.db.selectFrom('sessions').select(['status', 'ready_at', 'ended_at', 'billed_seconds']).where('account_id', '=', accountId).limit(3).execute())}`,
      },
    );
    const purchases = await storage.db.selectFrom('purchases').selectAll().where('account_id', '=', accountId).execute();
    expect(purchases.map((p) => [p.kind, p.status, Number(p.dollars), Number(p.credits)])).toEqual([
      ['auto_topup', 'confirmed', 10, 100_000],
    ]);
    const grants = await storage.db
      .selectFrom('credit_grants')
      .select(['id', 'credits'])
      .where('account_id', '=', accountId)
      .where('kind', '=', 'purchased')
      .execute();
    expect(grants.map((g) => [g.id, Number(g.credits)])).toEqual([[purchases[0]!.grant_id, 100_000]]);
    // Still below the threshold (about 540,000): disarmed, and the top-up is shown on either process.
    const shown = await fetch(`${replicas[1]!.url}/platform/auto-topup`, { headers: { authorization: `Bearer ${key}` } }).then(
      (r) => r.json() as Promise<Record<string, any>>,
    );
    expect(shown).toMatchObject({ enabled: true, armed: false, last_topup: { id: purchases[0]!.id, status: 'confirmed' } });
    const charged = await storage.db
      .selectFrom('meter_ticks')
      .select((eb) => eb.fn.sum<number | string>('credits').as('credits'))
      .where('account_id', '=', accountId)
      .executeTakeFirstOrThrow();
    const balance = await new CreditLedger(storage.db, storage.engine, DEFAULT_PRICING).balance(accountId);
    expect(balance.credits).toBe(START_CREDITS + 100_000 - Number(charged.credits));
    expect(balance.credits).toBeLessThan(THRESHOLD);
  }, 120_000);
});
