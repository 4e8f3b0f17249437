/**
 * Purchases through a payment provider and automatic top-up (issue 22 parts 2–4), over real HTTP,
 * on SQLite and PostgreSQL, with the built-in test provider: a purchase is bounded by GET /pricing
 * and the balance ceiling, and a refused one charges and grants nothing; a confirmation — at once
 * or by a signed webhook, replayed or not — grants once; refunds take credits back once; bad,
 * tampered and stale signatures are refused; an automatic top-up is made once per fall below the
 * threshold, a failed one is recorded and shown and the session then runs dry; and the ledger
 * reconciles after all of it. The race across two coordinator processes is in
 * auto-topup-replicas.test.ts.
 */

import { sql } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { startCoordinator, TestPaymentProvider, WEBHOOK_SIGNATURE_HEADER, signWebhook, type Coordinator } from '../../coordinator/index.ts';
import { ENGINES, freshDatabase } from './storage-engines.ts';

const START = Date.UTC(2026, 10, 22, 12, 0, 0);
const DAY = 86_400_000;
const CEILING = 100_000_000;

interface Answer {
  readonly status: number;
  readonly body: Record<string, any>;
}

describe.each(ENGINES)('purchases and automatic top-up on %s', (engine) => {
  let coordinator: Coordinator;
  let database: string;
  let now = START;
  const provider = new TestPaymentProvider({ webhookSecret: 'whsec_test_secret' });

  const call = async (
    method: string,
    path: string,
    credential?: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<Answer> => {
    const response = await fetch(`${coordinator.url}${path}`, {
      method,
      headers: {
        ...(credential ? { authorization: `Bearer ${credential}` } : {}),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
      ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
    });
    return { status: response.status, body: (await response.json()) as Record<string, any> };
  };
  const buy = (key: string, dollars: unknown, headers: Record<string, string> = {}) =>
    call('POST', '/platform/purchases', key, { dollars }, headers);
  const webhook = async (body: string, headers: Record<string, string>): Promise<Answer> => {
    const response = await fetch(`${coordinator.url}/platform/payments/webhook`, { method: 'POST', headers, body });
    return { status: response.status, body: (await response.json()) as Record<string, any> };
  };
  const event = (type: string, data: Record<string, unknown>, id?: string) =>
    provider.signedEvent({ ...(id ? { id } : {}), type, data }, now);

  /** A fresh account (no credits), its API key, a scoped token for both models and an unscoped one. */
  const customer = async (name: string, quotas: { concurrentSessions?: number } = {}) => {
    const account = await coordinator.accounts.create(name, quotas, now);
    const { key } = await coordinator.apiKeys.create(account.id, { now });
    const mint = async (body: unknown) => {
      const response = await fetch(`${coordinator.url}/tokens`, {
        method: 'POST',
        headers: { 'Service-API-Key': key, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      return ((await response.json()) as { token: string }).token;
    };
    const token = await mint({
      authorization_details: [
        { type: 'session', resources: { models: { match: ['pattern', 'pricey'] } }, constraints: { max_sessions: 50 } },
      ],
    });
    return { id: account.id, key, token, unscoped: await mint({}) };
  };
  const startSession = async (token: string, model = 'pricey') => {
    const response = await fetch(`${coordinator.url}/sessions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: { name: model } }),
    });
    const body = (await response.json()) as { session_id: string };
    expect(response.status, JSON.stringify(body)).toBe(200);
    await coordinator.sessions.markReady(body.session_id);
    return body.session_id;
  };
  const balance = async (id: string) => (await coordinator.ledger.balance(id)).credits;
  const purchasesOf = (id: string) =>
    coordinator.storage.db.selectFrom('purchases').selectAll().where('account_id', '=', id).orderBy('created_at').execute();
  const purchasedGrants = (id: string) =>
    coordinator.storage.db.selectFrom('credit_grants').selectAll().where('account_id', '=', id).where('kind', '=', 'purchased').execute();
  const checkoutsOf = (id: string) => provider.checkouts.filter((c) => c.accountId === id);
  /** One meter flush, then the payments it started. */
  const flush = async () => {
    const result = await coordinator.meter.flush();
    await coordinator.purchases.settled();
    return result;
  };

  beforeAll(async () => {
    database = await freshDatabase(engine);
    coordinator = await startCoordinator({
      database,
      port: 0,
      now: () => now,
      meterFlushMs: 0,
      signupCredits: 0,
      paymentProvider: provider,
    });
    await coordinator.catalog.add('pattern', 5);
    await coordinator.catalog.add('pricey', 1_000);
  });
  afterEach(async () => {
    provider.mode = 'confirm';
    vi.restoreAllMocks();
    // Sessions still open end exactly where they were billed to, so later tests' flushes (at
    // other times) charge nothing more of them.
    await coordinator.purchases.settled();
    await coordinator.storage.db
      .updateTable('sessions')
      .set({
        status: 'ended',
        ended_at: sql<number>`coalesce(ready_at + billed_seconds * 1000, created_at)`,
        slot_released_at: sql<number>`created_at`,
      })
      .where('status', '!=', 'ended')
      .execute();
    now = START;
  });
  afterAll(async () => {
    if (!coordinator) return;
    // Whatever the purchases, refunds and top-ups did, the ledger adds up.
    expect(await coordinator.ledger.reconcile()).toEqual([]);
    await coordinator.close();
  });

  it('a purchase is paid, granted as purchased credits (365 days) in the same step, and listed', async () => {
    const acme = await customer('Acme');
    const bought = await buy(acme.key, 25);
    expect(bought.status).toBe(200);
    expect(bought.body).toEqual({
      id: expect.any(String),
      kind: 'manual',
      status: 'confirmed',
      dollars: 25,
      credits: 250_000,
      provider: 'test',
      provider_ref: `test_${bought.body.id}`,
      checkout_url: null,
      failure: null,
      grant_id: expect.any(String),
      refunded_cents: 0,
      created_at: START,
      updated_at: START,
      confirmed_at: START,
    });
    expect(checkoutsOf(acme.id)).toEqual([
      expect.objectContaining({
        purchaseId: bought.body.id,
        kind: 'manual',
        dollars: 25,
        amountCents: 2_500,
        credits: 250_000,
        description: expect.stringContaining('250,000'),
      }),
    ]);
    const platformBalance = await call('GET', '/platform/balance', acme.key);
    expect(platformBalance.body).toEqual({
      credits: 250_000,
      grants: [{ id: bought.body.grant_id, kind: 'purchased', credits: 250_000, remaining: 250_000, expires_at: START + 365 * DAY }],
    });
    expect((await call('GET', `/platform/purchases/${bought.body.id}`, acme.key)).body).toEqual(bought.body);
    // An unscoped token reads them too.
    expect((await call('GET', '/platform/purchases', acme.unscoped)).body).toEqual({ purchases: [bought.body], next_cursor: null });
  });

  it('lists purchases newest first, a page at a time', async () => {
    const beta = await customer('Beta');
    const ids: string[] = [];
    for (let i = 1; i <= 5; i++) {
      now = START + i * 1_000;
      ids.push((await buy(beta.key, i)).body.id);
    }
    const first = await call('GET', '/platform/purchases?limit=2', beta.key);
    expect(first.body.purchases.map((p: { id: string }) => p.id)).toEqual([ids[4], ids[3]]);
    const second = await call('GET', `/platform/purchases?limit=2&cursor=${first.body.next_cursor}`, beta.key);
    expect(second.body.purchases.map((p: { id: string }) => p.id)).toEqual([ids[2], ids[1]]);
    const last = await call('GET', `/platform/purchases?limit=2&cursor=${second.body.next_cursor}`, beta.key);
    expect(last.body).toEqual({ purchases: [expect.objectContaining({ id: ids[0], dollars: 1 })], next_cursor: null });
  });

  it('bad input on every purchase endpoint: a clear error, nothing charged, nothing granted', async () => {
    const gamma = await customer('Gamma');
    const other = await customer('Other');
    const otherPurchase = (await buy(other.key, 1)).body.id as string;
    const refusedBodies: Array<[unknown, string]> = [
      [{ dollars: 0 }, '/dollars'],
      [{ dollars: 1_001 }, '/dollars'],
      [{ dollars: 2.5 }, '/dollars'],
      [{ dollars: -1 }, '/dollars'],
      [{ dollars: '10' }, '/dollars'],
      [{ dollars: null }, '/dollars'],
      [{ dollars: 1e21 }, '/dollars'],
      [{}, '/dollars'],
      [{ dollars: 10, currency: 'usd' }, '/currency'],
      [[10], ''],
    ];
    for (const [body, field] of refusedBodies) {
      const answer = await call('POST', '/platform/purchases', gamma.key, body);
      expect(answer, JSON.stringify(body)).toMatchObject({ status: 400, body: { code: 'invalid_request', field } });
    }
    expect(await call('POST', '/platform/purchases', gamma.key, '{"dollars": 1')).toMatchObject({
      status: 400,
      body: { code: 'invalid_json' },
    });
    expect(await buy(gamma.key, 5, { 'Idempotency-Key': 'has a space' })).toMatchObject({
      status: 400,
      body: { field: 'Idempotency-Key' },
    });
    // Credentials: as on the rest of the platform API.
    expect(await buy(gamma.token, 5)).toMatchObject({ status: 403, body: { code: 'forbidden' } });
    expect(await buy('', 5)).toMatchObject({ status: 401, body: { code: 'unauthorized' } });
    expect(await buy('rk_not_a_key', 5)).toMatchObject({ status: 401, body: { code: 'unauthorized' } });
    for (const path of ['/platform/purchases', '/platform/auto-topup', '/platform/account', '/platform/sessions']) {
      expect((await call('GET', path, gamma.token)).status, path).toBe(403);
      expect((await call('GET', path)).status, path).toBe(401);
    }
    expect((await call('PUT', '/platform/auto-topup', gamma.token, { threshold_credits: 1_000, amount_dollars: 10 })).status).toBe(403);
    expect((await call('DELETE', '/platform/auto-topup', gamma.token)).status).toBe(403);
    // Reads: unknown and other accounts' purchases are the same 404; bad pages are 400.
    expect(await call('GET', `/platform/purchases/${otherPurchase}`, gamma.key)).toMatchObject({
      status: 404,
      body: { code: 'purchase_not_found' },
    });
    expect(await call('GET', '/platform/purchases/nope', gamma.key)).toMatchObject({ status: 404, body: { code: 'purchase_not_found' } });
    expect(await call('GET', `/platform/purchases?cursor=${otherPurchase}`, gamma.key)).toMatchObject({
      status: 400,
      body: { field: 'cursor' },
    });
    for (const limit of ['0', '101', 'ten', '-1', '2.5'])
      expect(await call('GET', `/platform/purchases?limit=${limit}`, gamma.key)).toMatchObject({ status: 400, body: { field: 'limit' } });

    expect(checkoutsOf(gamma.id)).toEqual([]);
    expect(await purchasesOf(gamma.id)).toEqual([]);
    expect(await balance(gamma.id)).toBe(0);
  });

  it('the balance ceiling: a purchase past it is 409 balance_ceiling_exceeded and charges nothing; pending purchases hold their room', async () => {
    const delta = await customer('Delta');
    await coordinator.ledger.grantPromotional(delta.id, CEILING - 100_000);
    expect((await buy(delta.key, 5)).status).toBe(200); // 50,000 credits: room 50,000 left
    const refused = await buy(delta.key, 6);
    expect(refused).toMatchObject({
      status: 409,
      body: { code: 'balance_ceiling_exceeded', message: expect.stringContaining(String(CEILING)) },
    });
    provider.mode = 'pending';
    const pending = await buy(delta.key, 5); // exactly the room left, awaiting its webhook
    expect(pending).toMatchObject({
      status: 202,
      body: { status: 'pending', checkout_url: expect.stringContaining(pending.body.provider_ref), grant_id: null },
    });
    // The pending purchase holds its room: even $1 more does not fit, nor does a promotion.
    expect((await buy(delta.key, 1)).body.code).toBe('balance_ceiling_exceeded');
    expect((await coordinator.ledger.grantPromotional(delta.id, 1_000)).withheld).toBe(1_000);
    expect(checkoutsOf(delta.id).map((c) => c.dollars)).toEqual([5, 5]);
    // Confirmed, it fits exactly.
    const confirmed = event('payment.succeeded', { provider_ref: pending.body.provider_ref });
    expect((await webhook(confirmed.body, confirmed.headers)).body.outcome).toBe('applied');
    expect(await balance(delta.id)).toBe(CEILING);
  });

  it('Idempotency-Key: a retried purchase is the same purchase and one payment; another amount is 409', async () => {
    const eps = await customer('Epsilon');
    const answers = await Promise.all(Array.from({ length: 10 }, () => buy(eps.key, 7, { 'Idempotency-Key': 'order-7' })));
    // 202 for a retry that found the purchase while the first attempt was still at the provider.
    for (const answer of answers) expect([200, 202]).toContain(answer.status);
    expect((await buy(eps.key, 7, { 'Idempotency-Key': 'order-7' })).body).toMatchObject({ id: answers[0]!.body.id, status: 'confirmed' });
    expect(new Set(answers.map((a) => a.body.id)).size).toBe(1);
    expect(checkoutsOf(eps.id)).toHaveLength(1);
    expect(await balance(eps.id)).toBe(70_000);
    expect(await buy(eps.key, 8, { 'Idempotency-Key': 'order-7' })).toMatchObject({ status: 409, body: { code: 'idempotency_conflict' } });
    expect(await balance(eps.id)).toBe(70_000);
  });

  it('a declined payment is 402 payment_failed, recorded failed with the reason, and grants nothing', async () => {
    const zeta = await customer('Zeta');
    const declined = await buy(zeta.key, 402); // the test provider's declined amount
    expect(declined).toMatchObject({ status: 402, body: { code: 'payment_failed', message: expect.stringMatching(/declined/) } });
    provider.mode = 'fail';
    now = START + 1_000;
    expect((await buy(zeta.key, 3)).status).toBe(402);
    const listed = (await call('GET', '/platform/purchases', zeta.key)).body.purchases as Array<Record<string, unknown>>;
    expect(listed).toEqual([
      expect.objectContaining({ dollars: 3, status: 'failed', failure: expect.stringMatching(/declined/), grant_id: null }),
      expect.objectContaining({ dollars: 402, status: 'failed', failure: expect.stringMatching(/declined/), grant_id: null }),
    ]);
    expect(await balance(zeta.id)).toBe(0);
    expect(await purchasedGrants(zeta.id)).toEqual([]);
  });

  it('a pending purchase is confirmed by a signed webhook; replays — one after another and all at once — grant nothing twice', async () => {
    const eta = await customer('Eta');
    provider.mode = 'pending';
    const pending = await buy(eta.key, 12);
    expect(pending.status).toBe(202);
    const ref = pending.body.provider_ref as string;
    const succeeded = event('payment.succeeded', { provider_ref: ref, purchase_id: pending.body.id }, 'evt_1');
    now = START + 30_000; // within the five-minute tolerance
    expect(await webhook(succeeded.body, succeeded.headers)).toEqual({
      status: 200,
      body: { received: true, event_id: 'evt_1', outcome: 'applied', purchase_id: pending.body.id },
    });
    expect(await balance(eta.id)).toBe(120_000);
    // The same event again, and 20 at once, and the same payment under another event id.
    expect((await webhook(succeeded.body, succeeded.headers)).body.outcome).toBe('duplicate');
    const replays = await Promise.all(Array.from({ length: 20 }, () => webhook(succeeded.body, succeeded.headers)));
    expect(replays.map((r) => [r.status, r.body.outcome])).toEqual(Array(20).fill([200, 'duplicate']));
    const again = event('payment.succeeded', { provider_ref: ref }, 'evt_2');
    expect((await webhook(again.body, again.headers)).body.outcome).toBe('duplicate');
    // A failure reported after the success changes nothing.
    const failedLate = event('payment.failed', { provider_ref: ref, failure: 'too late' });
    expect((await webhook(failedLate.body, failedLate.headers)).body.outcome).toBe('duplicate');
    expect(await purchasedGrants(eta.id)).toHaveLength(1);
    expect(await balance(eta.id)).toBe(120_000);
    expect((await call('GET', `/platform/purchases/${pending.body.id}`, eta.key)).body).toMatchObject({
      status: 'confirmed',
      confirmed_at: START + 30_000,
    });
  });

  it('concurrent first deliveries of one confirmation grant once', async () => {
    const theta = await customer('Theta');
    provider.mode = 'pending';
    const pending = await buy(theta.key, 3);
    const succeeded = event('payment.succeeded', { provider_ref: pending.body.provider_ref });
    const outcomes = (await Promise.all(Array.from({ length: 20 }, () => webhook(succeeded.body, succeeded.headers)))).map(
      (a) => a.body.outcome,
    );
    expect(outcomes.filter((o) => o === 'applied')).toHaveLength(1);
    expect(outcomes.filter((o) => o === 'duplicate')).toHaveLength(19);
    expect(await purchasedGrants(theta.id)).toHaveLength(1);
    expect(await balance(theta.id)).toBe(30_000);
  });

  it('webhook signatures: missing, malformed, wrong, tampered, stale or early are 400 webhook_signature_invalid, and nothing is granted', async () => {
    const iota = await customer('Iota');
    provider.mode = 'pending';
    const pending = await buy(iota.key, 4);
    const { body, headers } = event('payment.succeeded', { provider_ref: pending.body.provider_ref });
    const t = Math.floor(now / 1000);
    const variants: Array<[string, string, Record<string, string>]> = [
      ['missing', body, { 'content-type': 'application/json' }],
      ['empty', body, { [WEBHOOK_SIGNATURE_HEADER]: '' }],
      ['malformed', body, { [WEBHOOK_SIGNATURE_HEADER]: 'garbage' }],
      ['no v1', body, { [WEBHOOK_SIGNATURE_HEADER]: `t=${t}` }],
      ['bad timestamp', body, { [WEBHOOK_SIGNATURE_HEADER]: `t=soon,v1=${'0'.repeat(64)}` }],
      ['wrong secret', body, { [WEBHOOK_SIGNATURE_HEADER]: signWebhook(body, 'whsec_someone_else', t) }],
      ['tampered body', body.replace('payment.succeeded', 'payment.succeeded '), headers],
      ['stale (6 minutes old)', body, { [WEBHOOK_SIGNATURE_HEADER]: signWebhook(body, provider.webhookSecret, t - 360) }],
      ['early (6 minutes ahead)', body, { [WEBHOOK_SIGNATURE_HEADER]: signWebhook(body, provider.webhookSecret, t + 360) }],
    ];
    for (const [what, text, hdrs] of variants) {
      const answer = await webhook(text, hdrs);
      expect(answer, what).toMatchObject({ status: 400, body: { code: 'webhook_signature_invalid', field: WEBHOOK_SIGNATURE_HEADER } });
    }
    // A captured webhook replayed after the tolerance window: refused too.
    now = START + 301_000;
    expect((await webhook(body, headers)).body.code).toBe('webhook_signature_invalid');
    now = START;
    // A signed body that is not an event: 400, named.
    const notEvent = '{"id": 5}';
    expect(await webhook(notEvent, { [WEBHOOK_SIGNATURE_HEADER]: signWebhook(notEvent, provider.webhookSecret, t) })).toMatchObject({
      status: 400,
      body: { code: 'invalid_request', field: '/id' },
    });
    expect(await balance(iota.id)).toBe(0);
    expect((await call('GET', `/platform/purchases/${pending.body.id}`, iota.key)).body.status).toBe('pending');
    // Rotating secrets: a header with an old and a new v1 verifies.
    const both = `${signWebhook(body, 'whsec_old', t)},v1=${signWebhook(body, provider.webhookSecret, t).split('v1=')[1]}`;
    expect((await webhook(body, { [WEBHOOK_SIGNATURE_HEADER]: both })).body.outcome).toBe('applied');
    expect(await balance(iota.id)).toBe(40_000);
  });

  it('payment.failed fails a pending purchase; events for unknown payments and other event types are acknowledged and ignored', async () => {
    const kappa = await customer('Kappa');
    provider.mode = 'pending';
    const pending = await buy(kappa.key, 9);
    const failed = event('payment.failed', { provider_ref: pending.body.provider_ref, failure: 'insufficient_funds' });
    expect((await webhook(failed.body, failed.headers)).body.outcome).toBe('applied');
    expect((await call('GET', `/platform/purchases/${pending.body.id}`, kappa.key)).body).toMatchObject({
      status: 'failed',
      failure: 'insufficient_funds',
    });
    const unknown = event('payment.succeeded', { provider_ref: 'test_nobody' });
    expect((await webhook(unknown.body, unknown.headers)).body).toMatchObject({ received: true, outcome: 'ignored', purchase_id: null });
    const other = event('customer.updated', {});
    expect((await webhook(other.body, other.headers)).body.outcome).toBe('ignored');
    expect(await balance(kappa.id)).toBe(0);
    // The provider's success after all (the buyer retried the card): the money was taken, so it is granted.
    const late = event('payment.succeeded', { provider_ref: pending.body.provider_ref });
    expect((await webhook(late.body, late.headers)).body.outcome).toBe('applied');
    expect(await balance(kappa.id)).toBe(90_000);
  });

  it('refunds take the credits back from the purchased grant, once per refund id; credits already spent are recorded as unrecovered', async () => {
    const lambda = await customer('Lambda');
    const bought = await buy(lambda.key, 10); // 100,000 credits
    const sessionId = await startSession(lambda.token, 'pattern');
    now = START + 10_000;
    await flush(); // 10 s at 5 credits/s
    expect((await coordinator.sessions.get(sessionId))?.billed_seconds).toBe(10);
    expect(await balance(lambda.id)).toBe(100_000 - 50);
    const ref = bought.body.provider_ref as string;

    const partial = event('refund.created', { provider_ref: ref, refund_id: 're_1', amount_cents: 400 });
    expect((await webhook(partial.body, partial.headers)).body.outcome).toBe('applied');
    expect(await balance(lambda.id)).toBe(100_000 - 50 - 40_000);
    expect((await webhook(partial.body, partial.headers)).body.outcome).toBe('duplicate');
    expect(await balance(lambda.id)).toBe(100_000 - 50 - 40_000);
    expect((await call('GET', `/platform/purchases/${bought.body.id}`, lambda.key)).body).toMatchObject({
      status: 'confirmed',
      refunded_cents: 400,
    });

    // The rest (and more than was paid): what is left is taken, the 50 credits spent are unrecovered.
    const rest = event('refund.created', { provider_ref: ref, refund_id: 're_2', amount_cents: 700 });
    expect((await webhook(rest.body, rest.headers)).body.outcome).toBe('applied');
    expect(await balance(lambda.id)).toBe(0);
    expect((await call('GET', `/platform/purchases/${bought.body.id}`, lambda.key)).body).toMatchObject({
      status: 'refunded',
      refunded_cents: 1_000,
    });
    const refunds = await coordinator.storage.db
      .selectFrom('refunds')
      .select(['provider_ref', 'cents', 'credits', 'unrecovered_credits'])
      .where('purchase_id', '=', bought.body.id)
      .orderBy('created_at')
      .orderBy('provider_ref')
      .execute();
    expect(refunds.map((r) => [r.provider_ref, Number(r.cents), Number(r.credits), Number(r.unrecovered_credits)])).toEqual([
      ['re_1', 400, 40_000, 0],
      ['re_2', 600, 59_950, 50],
    ]);
    const more = event('refund.created', { provider_ref: ref, refund_id: 're_3', amount_cents: 100 });
    expect((await webhook(more.body, more.headers)).body.outcome).toBe('ignored');
    expect(await coordinator.ledger.reconcile(lambda.id)).toEqual([]);
    // A tampered running total shows.
    const grant = bought.body.grant_id as string;
    await coordinator.storage.db.updateTable('credit_grants').set({ refunded: 1 }).where('id', '=', grant).execute();
    expect(await coordinator.ledger.reconcile(lambda.id)).toContain(`grant ${grant}: refunded 1 but its refunds sum to 99950`);
    await coordinator.storage.db.updateTable('credit_grants').set({ refunded: 99_950 }).where('id', '=', grant).execute();
    expect(await coordinator.ledger.reconcile(lambda.id)).toEqual([]);
  });

  describe('automatic top-up', () => {
    const settings = (key: string, body: unknown) => call('PUT', '/platform/auto-topup', key, body);

    it('reads, saves (armed), validates against GET /pricing and turns off', async () => {
      const mu = await customer('Mu');
      expect(await call('GET', '/platform/auto-topup', mu.key)).toEqual({
        status: 200,
        body: { enabled: false, threshold_credits: null, amount_dollars: null, armed: false, updated_at: null, last_topup: null },
      });
      const pricing = (await call('GET', '/pricing')).body.settings;
      const maxThreshold = pricing.auto_topup.max_threshold_credits as number;
      const minDollars = pricing.auto_topup.min_dollars as number;
      const refused: Array<[unknown, string]> = [
        [{ threshold_credits: 0, amount_dollars: 10 }, '/threshold_credits'],
        [{ threshold_credits: maxThreshold + 1, amount_dollars: 10 }, '/threshold_credits'],
        [{ threshold_credits: 1.5, amount_dollars: 10 }, '/threshold_credits'],
        [{ threshold_credits: '1000', amount_dollars: 10 }, '/threshold_credits'],
        [{ amount_dollars: 10 }, '/threshold_credits'],
        [{ threshold_credits: 1_000, amount_dollars: minDollars - 1 }, '/amount_dollars'],
        [{ threshold_credits: 1_000, amount_dollars: pricing.purchase.max_dollars + 1 }, '/amount_dollars'],
        [{ threshold_credits: 1_000, amount_dollars: 10.5 }, '/amount_dollars'],
        [{ threshold_credits: 1_000 }, '/amount_dollars'],
        // Within each bound, but together past the ceiling: a top-up below the threshold could not fit.
        [{ threshold_credits: maxThreshold, amount_dollars: minDollars + 1 }, '/amount_dollars'],
        [{ threshold_credits: 1_000, amount_dollars: 10, enabled: true }, '/enabled'],
        [[1_000, 10], ''],
      ];
      for (const [body, field] of refused)
        expect(await settings(mu.key, body), JSON.stringify(body)).toMatchObject({ status: 400, body: { code: 'invalid_request', field } });
      expect((await call('GET', '/platform/auto-topup', mu.key)).body.enabled).toBe(false);

      now = START + 5_000;
      expect(await settings(mu.key, { threshold_credits: maxThreshold, amount_dollars: minDollars })).toEqual({
        status: 200,
        body: {
          enabled: true,
          threshold_credits: maxThreshold,
          amount_dollars: minDollars,
          armed: true,
          updated_at: START + 5_000,
          last_topup: null,
        },
      });
      expect((await settings(mu.unscoped, { threshold_credits: 50_000, amount_dollars: 20 })).body).toMatchObject({
        threshold_credits: 50_000,
        amount_dollars: 20,
      });
      now = START + 6_000;
      expect(await call('DELETE', '/platform/auto-topup', mu.key)).toMatchObject({
        status: 200,
        body: { enabled: false, threshold_credits: null, amount_dollars: null, armed: false, updated_at: START + 6_000 },
      });
      expect((await call('DELETE', '/platform/auto-topup', mu.key)).status).toBe(200); // idempotent
      expect(checkoutsOf(mu.id)).toEqual([]);
    });

    it('a charge that takes the balance below the threshold buys one top-up; once back above, the next fall buys another', async () => {
      const nu = await customer('Nu');
      await coordinator.ledger.grantPromotional(nu.id, 200_000);
      expect((await settings(nu.key, { threshold_credits: 150_000, amount_dollars: 10 })).status).toBe(200);
      await startSession(nu.token); // 1,000 credits/s
      now = START + 30_000;
      await flush(); // 170,000: above
      expect(await purchasesOf(nu.id)).toEqual([]);
      now = START + 60_000;
      // Many flushes at once below the threshold: one top-up.
      await Promise.all(Array.from({ length: 10 }, () => coordinator.meter.flush()));
      await coordinator.purchases.settled();
      const [first, ...others] = await purchasesOf(nu.id);
      expect(others).toEqual([]);
      expect(first).toMatchObject({ kind: 'auto_topup', status: 'confirmed', dollars: 10 });
      expect(Number(first!.credits)).toBe(100_000);
      expect(await balance(nu.id)).toBe(140_000 + 100_000);
      const shown = (await call('GET', '/platform/auto-topup', nu.key)).body;
      expect(shown).toMatchObject({
        enabled: true,
        armed: true,
        last_topup: { id: first!.id, kind: 'auto_topup', status: 'confirmed', dollars: 10 },
      });
      expect(checkoutsOf(nu.id)).toEqual([expect.objectContaining({ purchaseId: first!.id, kind: 'auto_topup', dollars: 10 })]);

      now = START + 151_000; // 91 s more: 149,000, below again
      await flush();
      expect((await purchasesOf(nu.id)).map((p) => [p.kind, p.status])).toEqual([
        ['auto_topup', 'confirmed'],
        ['auto_topup', 'confirmed'],
      ]);
      expect(await balance(nu.id)).toBe(149_000 + 100_000);
    });

    it('one top-up per fall below the threshold: further charges below it buy nothing more until the settings are saved again', async () => {
      const xi = await customer('Xi');
      await coordinator.ledger.grantPromotional(xi.id, 100_000);
      // Saved while below the threshold already: armed, so the next charge tops up.
      expect((await settings(xi.key, { threshold_credits: 1_000_000, amount_dollars: 10 })).body.armed).toBe(true);
      await startSession(xi.token);
      now = START + 10_000;
      await flush();
      expect((await purchasesOf(xi.id)).map((p) => p.status)).toEqual(['confirmed']);
      // 190,000 now: still below, so disarmed until the balance is back at 1,000,000 or the settings are saved.
      expect((await call('GET', '/platform/auto-topup', xi.key)).body).toMatchObject({ armed: false, last_topup: { status: 'confirmed' } });
      for (let i = 2; i <= 5; i++) {
        now = START + i * 10_000;
        await flush();
      }
      expect(await purchasesOf(xi.id)).toHaveLength(1);
      expect((await settings(xi.key, { threshold_credits: 1_000_000, amount_dollars: 10 })).body.armed).toBe(true);
      now = START + 60_000;
      await flush();
      expect(await purchasesOf(xi.id)).toHaveLength(2);
    });

    it('concurrent charges of many sessions below the threshold claim one top-up', async () => {
      const tau = await customer('Tau', { concurrentSessions: 40 });
      await coordinator.ledger.grantPromotional(tau.id, 100_000);
      await settings(tau.key, { threshold_credits: 5_000_000, amount_dollars: 10 });
      const sessions: string[] = [];
      for (let i = 0; i < 40; i++) sessions.push(await startSession(tau.token, 'pattern'));
      now = START + 10_000;
      // Each its own charge (as at 40 session ends on this replica), all at once, plus a full flush.
      await Promise.all([...sessions.map((id) => coordinator.meter.flushSession(id, tau.id)), coordinator.meter.flush()]);
      await coordinator.purchases.settled();
      expect((await purchasesOf(tau.id)).map((p) => [p.kind, p.status])).toEqual([['auto_topup', 'confirmed']]);
      expect(await balance(tau.id)).toBe(100_000 - 40 * 50 + 100_000);
    });

    it('a failed top-up is recorded and shown, is not retried by itself, and the session then runs dry', async () => {
      const omicron = await customer('Omicron');
      await coordinator.ledger.grantPromotional(omicron.id, 50_000);
      await settings(omicron.key, { threshold_credits: 40_000, amount_dollars: 10 });
      provider.mode = 'fail';
      const sessionId = await startSession(omicron.token);
      now = START + 20_000;
      await flush(); // 30,000 left: below, and the payment is declined
      const shown = (await call('GET', '/platform/auto-topup', omicron.key)).body;
      expect(shown).toMatchObject({
        enabled: true,
        armed: false,
        last_topup: { kind: 'auto_topup', status: 'failed', failure: expect.stringMatching(/declined/), grant_id: null },
      });
      expect((await call('GET', '/platform/purchases', omicron.key)).body.purchases).toEqual([shown.last_topup]);
      expect(await balance(omicron.id)).toBe(30_000);
      // Then as without a top-up: the account runs dry, the session ends; no second attempt.
      now = START + 60_000;
      await coordinator.housekeeping();
      await coordinator.purchases.settled();
      const session = await coordinator.sessions.get(sessionId);
      expect(session).toMatchObject({ status: 'ended', end_reason: 'The account ran out of credits.' });
      expect(await purchasesOf(omicron.id)).toHaveLength(1);
      expect(checkoutsOf(omicron.id)).toHaveLength(1);
    });

    it('a checkout without an answer stays pending and is asked again by housekeeping with the same id — one payment, one grant', async () => {
      const pi = await customer('Pi');
      await coordinator.ledger.grantPromotional(pi.id, 50_000);
      await settings(pi.key, { threshold_credits: 40_000, amount_dollars: 10 });
      const real = provider.createCheckout.bind(provider);
      const calls = vi.spyOn(provider, 'createCheckout').mockImplementation(real).mockRejectedValueOnce(new Error('connection reset'));
      await startSession(pi.token);
      now = START + 20_000;
      await flush(); // 30,000 left: below; the provider does not answer
      expect((await purchasesOf(pi.id)).map((p) => [p.status, p.provider_ref])).toEqual([['pending', null]]);
      // While it waits, more charges below the threshold claim nothing more — even re-armed by a
      // save: one pending top-up per account (the partial unique index).
      now = START + 25_000;
      await flush();
      expect(await purchasesOf(pi.id)).toHaveLength(1);
      expect((await settings(pi.key, { threshold_credits: 40_000, amount_dollars: 10 })).body).toMatchObject({
        armed: true,
        last_topup: { status: 'pending' },
      });
      now = START + 30_000;
      await flush();
      expect(await purchasesOf(pi.id)).toHaveLength(1);
      now += 61_000;
      await coordinator.housekeeping();
      await coordinator.purchases.settled();
      const [purchase] = await purchasesOf(pi.id);
      expect(purchase).toMatchObject({ status: 'confirmed', attempts: 2 });
      expect(calls.mock.calls.map(([request]) => request.purchaseId)).toEqual([purchase!.id, purchase!.id]);
      expect(await purchasedGrants(pi.id)).toHaveLength(1);
    });

    it('a pending purchase no provider confirms within 24 hours is failed by housekeeping', async () => {
      const rho = await customer('Rho');
      provider.mode = 'pending';
      const pending = await buy(rho.key, 2);
      now = START + DAY + 1;
      await coordinator.housekeeping();
      expect((await call('GET', `/platform/purchases/${pending.body.id}`, rho.key)).body).toMatchObject({
        status: 'failed',
        failure: expect.stringMatching(/24 hours/),
      });
      expect(await balance(rho.id)).toBe(0);
    });
  });

  it("the dashboard's reads: the account and its quotas, open sessions, and usage by model and by day", async () => {
    const sigma = await customer('Sigma');
    await coordinator.ledger.grantPromotional(sigma.id, 1_000_000);
    const a = await startSession(sigma.token, 'pattern');
    const b = await startSession(sigma.token, 'pricey');
    now = START + 10_000;
    await flush();
    const account = await call('GET', '/platform/account', sigma.key);
    expect(account).toEqual({
      status: 200,
      body: {
        id: sigma.id,
        name: 'Sigma',
        created_at: START,
        quotas: { concurrent_sessions: 5, sessions_per_minute: 50, max_session_duration_seconds: 1200, monthly_credit_cap: 0 },
        open_sessions: 2,
        payment_provider: 'test',
      },
    });
    const open = await call('GET', '/platform/sessions', sigma.key);
    expect(open.body.truncated).toBe(false);
    expect(
      open.body.sessions
        .map((s: { session_id: string; model: string; status: string; billed_seconds: number }) => [
          s.session_id,
          s.model,
          s.status,
          s.billed_seconds,
        ])
        .sort(),
    ).toEqual(
      [
        [a, 'pattern', 'ready', 10],
        [b, 'pricey', 'ready', 10],
      ].sort(),
    );
    // Ending one with the API key (the existing DELETE /sessions/{id}) takes it off the list.
    expect(
      (await fetch(`${coordinator.url}/sessions/${a}`, { method: 'DELETE', headers: { authorization: `Bearer ${sigma.key}` } })).status,
    ).toBe(200);
    expect((await call('GET', '/platform/sessions', sigma.key)).body.sessions.map((s: { session_id: string }) => s.session_id)).toEqual([
      b,
    ]);
    now = START + DAY + 5_000; // the next day: b is billed up to its maximum (1,200 s)
    await flush();
    const usage = await call('GET', `/platform/usage?since=${START}`, sigma.key);
    // Credits charged, paid or not (the account ran dry on the second day).
    expect(usage.body.by_model).toEqual([
      { model: 'pricey', sessions: 1, billed_seconds: 1_200, credits: 1_200_000 },
      { model: 'pattern', sessions: 1, billed_seconds: 10, credits: 50 },
    ]);
    expect(usage.body.by_day).toEqual([
      { day: '2026-11-22', billed_seconds: 20, credits: 10_050 },
      { day: '2026-11-23', billed_seconds: 1_190, credits: 1_190_000 },
    ]);
    const sum = (key: 'billed_seconds' | 'credits') => usage.body.by_day.reduce((s: number, d: Record<string, number>) => s + d[key]!, 0);
    expect({ billed_seconds: sum('billed_seconds'), credits: sum('credits') }).toEqual(usage.body.total);
  });
});

describe.each(ENGINES)('without a payment provider on %s', (engine) => {
  let coordinator: Coordinator;
  beforeAll(async () => {
    coordinator = await startCoordinator({ database: await freshDatabase(engine), port: 0, meterFlushMs: 0, signupCredits: 0 });
  });
  afterAll(async () => coordinator?.close());

  it('purchases, top-up settings and webhooks answer 501 payments_not_configured; reads work; nothing is granted', async () => {
    const account = await coordinator.accounts.create('Offline');
    const { key } = await coordinator.apiKeys.create(account.id);
    const send = (method: string, path: string, body?: unknown, headers: Record<string, string> = { authorization: `Bearer ${key}` }) =>
      fetch(`${coordinator.url}${path}`, {
        method,
        headers: { ...headers, 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      }).then(async (r) => ({
        status: r.status,
        body: (await r.json()) as Record<string, any>,
      }));
    expect(await send('POST', '/platform/purchases', { dollars: 10 })).toMatchObject({
      status: 501,
      body: { code: 'payments_not_configured' },
    });
    expect(await send('PUT', '/platform/auto-topup', { threshold_credits: 1_000, amount_dollars: 10 })).toMatchObject({
      status: 501,
      body: { code: 'payments_not_configured' },
    });
    expect(
      await send('POST', '/platform/payments/webhook', { id: 'evt', type: 'payment.succeeded', data: { provider_ref: 'x' } }, {}),
    ).toMatchObject({ status: 501 });
    expect(await send('GET', '/platform/auto-topup')).toMatchObject({ status: 200, body: { enabled: false } });
    expect(await send('GET', '/platform/purchases')).toEqual({ status: 200, body: { purchases: [], next_cursor: null } });
    expect(await send('DELETE', '/platform/auto-topup')).toMatchObject({ status: 200, body: { enabled: false } });
    expect((await send('GET', '/platform/account')).body.payment_provider).toBeNull();
    expect((await coordinator.ledger.balance(account.id)).credits).toBe(0);
  });
});
