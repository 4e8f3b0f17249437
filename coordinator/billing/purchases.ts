/**
 * Purchases of credits through a payment provider, and automatic top-ups.
 *
 * A purchase is a row before it is money: created `pending` under the account's lock (bounds
 * checked, its credits holding their room under the balance ceiling), then the provider is asked
 * — outside any transaction, never holding the lock — and its answer (or later its signed webhook)
 * moves it to `confirmed`, with the purchased grant made in the same transaction as the status
 * change, or to `failed`. Every step is conditional on the status it moves from, under the account's
 * lock, so a replayed or concurrent confirmation grants nothing twice; `purchases.provider_ref` is
 * unique per provider (one payment, one purchase) and refunds are keyed by the provider's refund id.
 *
 * Automatic top-up: an account sets a threshold and an amount. A meter charge that leaves the
 * balance below the threshold while the settings are armed claims one top-up in the charge's own
 * transaction (under the account's lock: concurrent flushes on any number of replicas serialize
 * there) — it inserts the pending purchase and disarms; a partial unique index allows one pending
 * top-up per account whatever happens. The payment follows the commit. The settings are armed
 * again when credits bring the balance back to the threshold, or when they are saved again: one
 * top-up per fall below the threshold, and a failed payment is not retried by itself (no retry
 * storm on a declined card) — it is recorded on the purchase, shown by `GET /platform/auto-topup`,
 * and the account's sessions run dry as they would without a top-up.
 *
 * A checkout that gets no answer (the provider timed out, the replica died after its claim) stays
 * pending; housekeeping asks again with the same purchase id — the provider's idempotency key, so
 * the payment is never made twice — backing off from 1 minute to 1 hour, and fails what no
 * provider confirmed within 24 hours.
 *
 * Longer than ~400 lines: purchases, their webhooks, refunds and automatic top-up are one set of
 * conditional status moves under the account's lock; whether anything can be granted twice is
 * read across all of them, so they stay in view together.
 */

import { randomUUID } from 'node:crypto';
import type { Kysely, Selectable, Transaction } from 'kysely';
import type { AutoTopupBody, PurchaseBody } from '../../protocol/coordinator.ts';
import { ArclightError } from '../../protocol/errors.ts';
import type { Logger } from '../../server-kit/log.ts';
import { maxAutoTopupThreshold, type PricingSettings } from '../pricing/pricing.ts';
import type { CoordinatorDatabase, PurchaseKind, PurchaseTable } from '../storage/schema.ts';
import type { AutoTopupState, CreditLedger } from './credit-ledger.ts';
import type { CheckoutResult, PaymentEvent, PaymentProvider } from './payment-provider.ts';
import type { AutoTopupClaimer } from './session-meter.ts';

/** First retry of a checkout that got no answer; doubled per attempt up to RETRY_MAX_MS. */
export const RETRY_AFTER_MS = 60_000;
export const RETRY_MAX_MS = 3_600_000;
/** A purchase no provider confirmed (nor failed) within this is failed. */
export const PENDING_EXPIRY_MS = 86_400_000;
/** How long a checkout may take before it counts as no answer (the purchase stays pending). */
export const PROVIDER_TIMEOUT_MS = 20_000;
/** Purchases per page of `GET /platform/purchases` (default and most). */
export const DEFAULT_PURCHASES_PAGE = 20;
export const MAX_PURCHASES_PAGE = 100;
/** Pending purchases housekeeping asks again per pass. */
const RESUME_BATCH = 100;

type Row = Selectable<PurchaseTable>;

/** What a webhook did: `applied` changed something, `duplicate` had been applied before, `ignored` concerns nothing here. */
export type WebhookOutcome = 'applied' | 'duplicate' | 'ignored';

function purchaseBody(row: Row): PurchaseBody {
  return {
    id: row.id,
    kind: row.kind,
    status: row.status,
    dollars: Number(row.dollars),
    credits: Number(row.credits),
    provider: row.provider,
    provider_ref: row.provider_ref,
    checkout_url: row.checkout_url,
    failure: row.failure,
    grant_id: row.grant_id,
    refunded_cents: Number(row.refunded_cents),
    created_at: Number(row.created_at),
    updated_at: Number(row.updated_at),
    confirmed_at: row.confirmed_at === null ? null : Number(row.confirmed_at),
  };
}

const NOT_FOUND = () => new ArclightError('purchase_not_found', 'This account has no purchase with that id.');
/** Longer than any id we issue (UUIDs): unknown without a query. */
const MAX_ID_LENGTH = 128;

async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not answer within ${ms} ms`)), ms);
    timer.unref();
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function description(kind: PurchaseKind, dollars: number, credits: number): string {
  return `Arclight credits: ${credits.toLocaleString('en-US')} (${dollars} USD${kind === 'auto_topup' ? ', automatic top-up' : ''})`;
}

export class PurchaseService implements AutoTopupClaimer {
  readonly #db: Kysely<CoordinatorDatabase>;
  readonly #ledger: CreditLedger;
  readonly #pricing: PricingSettings;
  readonly #provider: PaymentProvider | undefined;
  readonly #now: () => number;
  readonly #log: Logger;
  readonly #inFlight = new Set<Promise<unknown>>();

  constructor(
    db: Kysely<CoordinatorDatabase>,
    ledger: CreditLedger,
    pricing: PricingSettings,
    provider: PaymentProvider | undefined,
    log: Logger,
    now: () => number = Date.now,
  ) {
    this.#db = db;
    this.#ledger = ledger;
    this.#pricing = pricing;
    this.#provider = provider;
    this.#log = log;
    this.#now = now;
  }

  /** The provider, or 501 `payments_not_configured`. */
  #requireProvider(): PaymentProvider {
    if (!this.#provider)
      throw new ArclightError(
        'payments_not_configured',
        'This coordinator has no payment provider configured: purchases and automatic top-up are off (docs/coordinator.md, "Purchases and automatic top-up").',
      );
    return this.#provider;
  }

  /**
   * A purchase by the account (`POST /platform/purchases`): bounds, then the ceiling (pending
   * purchases counted) under the account's lock, then the provider. Resolves to the purchase as
   * the provider left it: `confirmed`, `pending` (a webhook will tell; or no answer yet, asked
   * again later) or `failed`. With `idempotencyKey`, a purchase the account already made with
   * that key is returned as it is now (409 `idempotency_conflict` for another amount).
   */
  async create(accountId: string, dollars: unknown, idempotencyKey?: string): Promise<{ purchase: PurchaseBody; replayed: boolean }> {
    const provider = this.#requireProvider();
    const credits = this.#ledger.purchaseCredits(dollars, '/dollars');
    const amount = dollars as number;
    const now = this.#now();
    const { id, replayed } = await this.#db.transaction().execute(async (tx) => {
      await this.#ledger.lockAccount(tx, accountId);
      if (idempotencyKey !== undefined) {
        const existing = await tx
          .selectFrom('purchases')
          .select(['id', 'dollars'])
          .where('account_id', '=', accountId)
          .where('idempotency_key', '=', idempotencyKey)
          .executeTakeFirst();
        if (existing) {
          if (Number(existing.dollars) !== amount) {
            throw new ArclightError(
              'idempotency_conflict',
              'This Idempotency-Key already made a purchase of another amount; use a new key for a new purchase.',
            );
          }
          return { id: existing.id, replayed: true };
        }
      }
      await this.#ledger.checkCeiling(tx, accountId, credits);
      const purchaseId = randomUUID();
      await tx
        .insertInto('purchases')
        .values({
          id: purchaseId,
          account_id: accountId,
          kind: 'manual',
          status: 'pending',
          dollars: amount,
          credits,
          provider: provider.name,
          provider_ref: null,
          checkout_url: null,
          failure: null,
          idempotency_key: idempotencyKey ?? null,
          grant_id: null,
          retry_at: now + RETRY_AFTER_MS,
          created_at: now,
          updated_at: now,
          confirmed_at: null,
        })
        .execute();
      return { id: purchaseId, replayed: false };
    });
    if (replayed) return { purchase: purchaseBody(await this.#row(id)), replayed };
    return { purchase: await this.#process(id), replayed };
  }

  /** The account's purchase; 404 `purchase_not_found` for unknown and other accounts' ids alike. */
  async get(accountId: string, purchaseId: string): Promise<PurchaseBody> {
    if (purchaseId.length > MAX_ID_LENGTH) throw NOT_FOUND();
    const row = await this.#db
      .selectFrom('purchases')
      .selectAll()
      .where('id', '=', purchaseId)
      .where('account_id', '=', accountId)
      .executeTakeFirst();
    if (!row) throw NOT_FOUND();
    return purchaseBody(row);
  }

  /** Newest first, `limit` a page; `cursor`: the last id of the previous page (400 if not the account's). */
  async list(
    accountId: string,
    options: { limit?: number; cursor?: string } = {},
  ): Promise<{ purchases: PurchaseBody[]; next_cursor: string | null }> {
    const limit = options.limit ?? DEFAULT_PURCHASES_PAGE;
    let query = this.#db.selectFrom('purchases').selectAll().where('account_id', '=', accountId);
    if (options.cursor !== undefined) {
      const after =
        options.cursor.length > MAX_ID_LENGTH
          ? undefined
          : await this.#db
              .selectFrom('purchases')
              .select(['id', 'created_at'])
              .where('id', '=', options.cursor)
              .where('account_id', '=', accountId)
              .executeTakeFirst();
      if (!after) throw new ArclightError('invalid_request', 'cursor must be a next_cursor this endpoint returned.', { field: 'cursor' });
      query = query.where((eb) =>
        eb.or([eb('created_at', '<', after.created_at), eb.and([eb('created_at', '=', after.created_at), eb('id', '<', after.id)])]),
      );
    }
    const rows = await query
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(limit + 1)
      .execute();
    const page = rows.slice(0, limit);
    return { purchases: page.map(purchaseBody), next_cursor: rows.length > limit ? page.at(-1)!.id : null };
  }

  // --- Automatic top-up -------------------------------------------------------------------

  async autoTopup(accountId: string): Promise<AutoTopupBody> {
    const account = await this.#db
      .selectFrom('accounts')
      .select(['auto_topup_threshold_credits', 'auto_topup_amount_dollars', 'auto_topup_armed', 'auto_topup_updated_at'])
      .where('id', '=', accountId)
      .executeTakeFirstOrThrow();
    const last = await this.#db
      .selectFrom('purchases')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('kind', '=', 'auto_topup')
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(1)
      .executeTakeFirst();
    const threshold = account.auto_topup_threshold_credits;
    const amount = account.auto_topup_amount_dollars;
    const enabled = threshold !== null && amount !== null;
    return {
      enabled,
      threshold_credits: enabled ? Number(threshold) : null,
      amount_dollars: enabled ? Number(amount) : null,
      armed: enabled && Number(account.auto_topup_armed) === 1,
      updated_at: account.auto_topup_updated_at === null ? null : Number(account.auto_topup_updated_at),
      last_topup: last ? purchaseBody(last) : null,
    };
  }

  /**
   * Saves the settings (`PUT /platform/auto-topup`), and arms them: if the balance is below the
   * threshold already, the next charge tops up. Needs a provider (501 otherwise). `threshold`:
   * 1 to max_threshold_credits; `amount`: auto_topup.min_dollars to purchase.max_dollars, and the
   * two together within the balance ceiling — so a top-up made below the threshold always fits.
   */
  async setAutoTopup(accountId: string, threshold: unknown, amount: unknown): Promise<AutoTopupBody> {
    this.#requireProvider();
    const { autoTopupMinDollars, purchaseMaxDollars, creditsPerDollar, maxAccountCredits } = this.#pricing;
    const maxThreshold = maxAutoTopupThreshold(this.#pricing) ?? Number.MAX_SAFE_INTEGER;
    if (typeof threshold !== 'number' || !Number.isSafeInteger(threshold) || threshold < 1 || threshold > maxThreshold) {
      throw new ArclightError(
        'invalid_request',
        `threshold_credits must be a whole number of credits from 1 to ${maxThreshold} (settings.auto_topup.max_threshold_credits).`,
        { field: '/threshold_credits' },
      );
    }
    if (typeof amount !== 'number' || !Number.isInteger(amount) || amount < autoTopupMinDollars || amount > purchaseMaxDollars) {
      throw new ArclightError(
        'invalid_request',
        `amount_dollars must be ${autoTopupMinDollars} to ${purchaseMaxDollars} whole US dollars (settings.auto_topup.min_dollars, settings.purchase.max_dollars).`,
        { field: '/amount_dollars' },
      );
    }
    if (maxAccountCredits > 0 && threshold + amount * creditsPerDollar > maxAccountCredits) {
      throw new ArclightError(
        'invalid_request',
        `A top-up of ${amount} USD (${amount * creditsPerDollar} credits) made just below ${threshold} credits would pass the balance ceiling of ${maxAccountCredits} credits: lower the threshold or the amount.`,
        { field: '/amount_dollars' },
      );
    }
    await this.#db.transaction().execute(async (tx) => {
      // Under the lock, as the meter reads the settings: a save and a claim never interleave.
      await this.#ledger.lockAccount(tx, accountId);
      await tx
        .updateTable('accounts')
        .set({
          auto_topup_threshold_credits: threshold,
          auto_topup_amount_dollars: amount,
          auto_topup_armed: 1,
          auto_topup_updated_at: this.#now(),
        })
        .where('id', '=', accountId)
        .execute();
    });
    return this.autoTopup(accountId);
  }

  /** Turns automatic top-up off (`DELETE /platform/auto-topup`); idempotent. A top-up already in flight completes. */
  async clearAutoTopup(accountId: string): Promise<AutoTopupBody> {
    await this.#db.transaction().execute(async (tx) => {
      await this.#ledger.lockAccount(tx, accountId);
      await tx
        .updateTable('accounts')
        .set({
          auto_topup_threshold_credits: null,
          auto_topup_amount_dollars: null,
          auto_topup_armed: 0,
          auto_topup_updated_at: this.#now(),
        })
        .where('id', '=', accountId)
        .execute();
    });
    return this.autoTopup(accountId);
  }

  /**
   * The meter's claim, in its charge's transaction (holding the account's lock), when the balance
   * it left is below the armed threshold: one pending `auto_topup` purchase, and the settings
   * disarmed. None when one is in flight already (the partial unique index). Recorded `failed` at
   * once — disarmed all the same — when there is no provider, or the top-up would pass the ceiling
   * (pending manual purchases hold room too). Returns the id to pay for once committed.
   */
  async claim(
    tx: Transaction<CoordinatorDatabase>,
    accountId: string,
    settings: AutoTopupState,
    balance: number,
  ): Promise<string | undefined> {
    const now = this.#now();
    const credits = settings.amountDollars * this.#pricing.creditsPerDollar;
    let failure: string | null = null;
    if (!this.#provider) failure = 'No payment provider is configured.';
    else if (credits > (await this.#ledger.ceilingRoom(tx, accountId)))
      failure = `The top-up would take the balance past the ceiling of ${this.#pricing.maxAccountCredits} credits.`;
    const id = randomUUID();
    const inserted = await tx
      .insertInto('purchases')
      .values({
        id,
        account_id: accountId,
        kind: 'auto_topup',
        status: failure === null ? 'pending' : 'failed',
        dollars: settings.amountDollars,
        credits,
        provider: this.#provider?.name ?? 'none',
        provider_ref: null,
        checkout_url: null,
        failure,
        idempotency_key: null,
        grant_id: null,
        retry_at: failure === null ? now + RETRY_AFTER_MS : null,
        created_at: now,
        updated_at: now,
        confirmed_at: null,
      })
      .onConflict((oc) => oc.doNothing())
      .returning('id')
      .executeTakeFirst();
    // One is pending already (a save re-armed the settings while it was in flight): that one is the top-up.
    if (!inserted) return undefined;
    await tx.updateTable('accounts').set({ auto_topup_armed: 0 }).where('id', '=', accountId).execute();
    this.#log.info('automatic top-up claimed', {
      account_id: accountId,
      purchase_id: id,
      balance,
      threshold: settings.thresholdCredits,
      dollars: settings.amountDollars,
      failure,
    });
    return failure === null ? id : undefined;
  }

  /** Pays for claimed top-ups, in the background (close() waits for them: `settled`). */
  dispatch(purchaseIds: readonly string[]): void {
    for (const id of purchaseIds) this.#track(this.#process(id));
  }

  /** Resolves once no payment started here is still in flight. */
  async settled(): Promise<void> {
    while (this.#inFlight.size > 0) await Promise.allSettled([...this.#inFlight]);
  }

  /**
   * Housekeeping's part: asks the provider again about pending purchases that got no answer (same
   * purchase id, so the same payment), each when its backoff is due, claimed by a compare-and-set
   * on `retry_at` so two replicas never ask at once; and fails pending purchases older than 24 h.
   */
  async resume(): Promise<void> {
    const now = this.#now();
    const due = await this.#db
      .selectFrom('purchases')
      .select(['id', 'attempts', 'retry_at'])
      .where('status', '=', 'pending')
      .where('retry_at', '<=', now)
      .where('provider_ref', 'is', null)
      .where('created_at', '>=', now - PENDING_EXPIRY_MS)
      .limit(RESUME_BATCH)
      .execute();
    for (const row of due) {
      const backoff = Math.min(RETRY_MAX_MS, RETRY_AFTER_MS * 2 ** Math.min(20, Number(row.attempts)));
      const claimed = await this.#db
        .updateTable('purchases')
        .set({ retry_at: now + backoff })
        .where('id', '=', row.id)
        .where('status', '=', 'pending')
        .where('retry_at', '=', row.retry_at)
        .executeTakeFirst();
      if (Number(claimed.numUpdatedRows) === 1) this.#track(this.#process(row.id));
    }
    const expired = await this.#db
      .selectFrom('purchases')
      .select('id')
      .where('status', '=', 'pending')
      .where('created_at', '<', now - PENDING_EXPIRY_MS)
      .limit(RESUME_BATCH)
      .execute();
    for (const { id } of expired) await this.#fail(id, null, 'No confirmation came from the payment provider within 24 hours.');
  }

  // --- Webhooks ---------------------------------------------------------------------------

  /**
   * A provider's webhook (`POST /platform/payments/webhook`): verified by the provider (400
   * `webhook_signature_invalid` otherwise), then applied — at most once, whatever the replays.
   */
  async handleWebhook(
    rawBody: string,
    header: (name: string) => string | undefined,
  ): Promise<{ outcome: WebhookOutcome; event: PaymentEvent; purchase?: PurchaseBody }> {
    const provider = this.#requireProvider();
    const event = provider.verifyWebhook(rawBody, header, this.#now());
    if (event.type === 'other') return { outcome: 'ignored', event };
    const row = await this.#find(provider.name, event.providerRef, event.type === 'refund' ? undefined : event.purchaseId);
    if (!row) {
      this.#log.warn('a payment webhook names no purchase here; ignored', {
        provider: provider.name,
        event_id: event.eventId,
        type: event.type,
        provider_ref: event.providerRef,
      });
      return { outcome: 'ignored', event };
    }
    if (event.type === 'payment_succeeded') {
      const { applied } = await this.#confirm(row.id, event.providerRef);
      return { outcome: applied ? 'applied' : 'duplicate', event, purchase: purchaseBody(await this.#row(row.id)) };
    }
    if (event.type === 'payment_failed') {
      const applied = await this.#fail(row.id, event.providerRef, event.failure);
      return { outcome: applied ? 'applied' : 'duplicate', event, purchase: purchaseBody(await this.#row(row.id)) };
    }
    const outcome = await this.#refund(row.id, event.refundRef, event.amountCents);
    return { outcome, event, purchase: purchaseBody(await this.#row(row.id)) };
  }

  async #find(provider: string, providerRef: string, purchaseId: string | undefined): Promise<Row | undefined> {
    const byRef = await this.#db
      .selectFrom('purchases')
      .selectAll()
      .where('provider', '=', provider)
      .where('provider_ref', '=', providerRef)
      .executeTakeFirst();
    if (byRef || purchaseId === undefined || purchaseId.length > MAX_ID_LENGTH) return byRef;
    // The webhook came before the checkout's answer was recorded: found by the id the provider echoes.
    const byId = await this.#db
      .selectFrom('purchases')
      .selectAll()
      .where('id', '=', purchaseId)
      .where('provider', '=', provider)
      .executeTakeFirst();
    return byId && (byId.provider_ref === null || byId.provider_ref === providerRef) ? byId : undefined;
  }

  // --- The steps ---------------------------------------------------------------------------

  async #row(id: string): Promise<Row> {
    return this.#db.selectFrom('purchases').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
  }

  #track(work: Promise<unknown>): void {
    const tracked = work
      .catch((error: unknown) => this.#log.error('a payment step failed; the purchase stays as it was', { error }))
      .finally(() => this.#inFlight.delete(tracked));
    this.#inFlight.add(tracked);
  }

  /** Asks the provider to pay for a pending purchase without an answer yet, and applies the answer. */
  async #process(id: string): Promise<PurchaseBody> {
    const row = await this.#row(id);
    if (row.status !== 'pending' || row.provider_ref !== null) return purchaseBody(row);
    const provider = this.#provider;
    if (!provider || provider.name !== row.provider) {
      await this.#fail(id, null, `The payment provider "${row.provider}" is not configured on this coordinator.`);
      return purchaseBody(await this.#row(id));
    }
    await this.#db
      .updateTable('purchases')
      .set((eb) => ({ attempts: eb('attempts', '+', 1) }))
      .where('id', '=', id)
      .execute();
    let result: CheckoutResult;
    try {
      result = await withTimeout(
        provider.createCheckout({
          purchaseId: id,
          accountId: row.account_id,
          kind: row.kind,
          dollars: Number(row.dollars),
          amountCents: Number(row.dollars) * 100,
          credits: Number(row.credits),
          description: description(row.kind, Number(row.dollars), Number(row.credits)),
        }),
        PROVIDER_TIMEOUT_MS,
        `payment provider ${provider.name}`,
      );
    } catch (error) {
      // No answer is not a refusal: the payment may have been made. Asked again later, same id.
      this.#log.warn('the payment provider gave no answer; the purchase stays pending and is asked again', { purchase_id: id, error });
      return purchaseBody(await this.#row(id));
    }
    if (result.status === 'confirmed') await this.#confirm(id, result.providerRef);
    else if (result.status === 'failed')
      await this.#fail(id, result.providerRef, result.failure ?? 'The payment provider declined the payment.');
    else {
      await this.#db
        .updateTable('purchases')
        .set({ provider_ref: result.providerRef, checkout_url: result.checkoutUrl ?? null, updated_at: this.#now() })
        .where('id', '=', id)
        .where('status', '=', 'pending')
        .where('provider_ref', 'is', null)
        .execute();
    }
    return purchaseBody(await this.#row(id));
  }

  /**
   * Paid: the purchased grant and the status change in one transaction under the account's lock,
   * from `pending` — or from `failed`, when a provider reports success after a failure (the money
   * was taken: it is granted, even past the ceiling). Anything else was applied before: no-op.
   */
  async #confirm(id: string, providerRef: string): Promise<{ applied: boolean }> {
    const { account_id: accountId } = await this.#row(id);
    return this.#db.transaction().execute(async (tx) => {
      const locked = await this.#ledger.lockAccount(tx, accountId);
      const row = await tx.selectFrom('purchases').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
      if (row.status !== 'pending' && row.status !== 'failed') return { applied: false };
      if (row.provider_ref !== null && row.provider_ref !== providerRef) {
        this.#log.warn('a confirmation names another payment than the purchase recorded; ignored', {
          purchase_id: id,
          provider_ref: providerRef,
          recorded: row.provider_ref,
        });
        return { applied: false };
      }
      const grant = await this.#ledger.grantPurchasedIn(tx, accountId, locked, Number(row.credits), Number(row.dollars) * 100);
      const now = this.#now();
      const moved = await tx
        .updateTable('purchases')
        .set({
          status: 'confirmed',
          provider_ref: providerRef,
          grant_id: grant.id,
          failure: null,
          retry_at: null,
          confirmed_at: now,
          updated_at: now,
        })
        .where('id', '=', id)
        .where('status', 'in', ['pending', 'failed'])
        .executeTakeFirst();
      if (Number(moved.numUpdatedRows) !== 1) throw new Error(`purchase ${id} changed under the account lock`);
      return { applied: true };
    });
  }

  /** Declined (or never confirmed): `pending` → `failed` with the reason; nothing is granted. False when it was not pending. */
  async #fail(id: string, providerRef: string | null, failure: string): Promise<boolean> {
    const { account_id: accountId } = await this.#row(id);
    return this.#db.transaction().execute(async (tx) => {
      await this.#ledger.lockAccount(tx, accountId);
      const moved = await tx
        .updateTable('purchases')
        .set((eb) => ({
          status: 'failed',
          failure: failure.slice(0, 1000),
          provider_ref: eb.fn.coalesce('provider_ref', eb.val(providerRef)),
          retry_at: null,
          updated_at: this.#now(),
        }))
        .where('id', '=', id)
        .where('status', '=', 'pending')
        .executeTakeFirst();
      const applied = Number(moved.numUpdatedRows) === 1;
      if (applied) this.#log.warn('a purchase failed', { purchase_id: id, account_id: accountId, failure });
      return applied;
    });
  }

  /**
   * A refund of `amountCents` of a confirmed purchase, once per provider refund id: the credits
   * it is worth (in proportion to what was paid, exact once the whole is refunded) are taken off
   * the purchased grant — as much as it has left unspent and unexpired; the rest was spent already
   * and is recorded as `unrecovered_credits`. `refunded` once refunds cover the payment; refunds
   * past it are capped.
   */
  async #refund(id: string, refundRef: string, amountCents: number): Promise<WebhookOutcome> {
    const { account_id: accountId } = await this.#row(id);
    return this.#db.transaction().execute(async (tx) => {
      await this.#ledger.lockAccount(tx, accountId);
      const row = await tx.selectFrom('purchases').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
      const seen = await tx
        .selectFrom('refunds')
        .select('id')
        .where('provider', '=', row.provider)
        .where('provider_ref', '=', refundRef)
        .executeTakeFirst();
      if (seen) return 'duplicate';
      if ((row.status !== 'confirmed' && row.status !== 'refunded') || row.grant_id === null) {
        this.#log.warn('a refund names a purchase that was never confirmed; ignored', {
          purchase_id: id,
          refund_ref: refundRef,
          status: row.status,
        });
        return 'ignored';
      }
      const paid = Number(row.dollars) * 100;
      const before = Number(row.refunded_cents);
      const cents = Math.min(amountCents, paid - before);
      if (cents <= 0) {
        this.#log.warn('a refund past what was paid; ignored', { purchase_id: id, refund_ref: refundRef, amount_cents: amountCents });
        return 'ignored';
      }
      const after = before + cents;
      const purchased = Number(row.credits);
      const worth = Math.floor((after * purchased) / paid) - Math.floor((before * purchased) / paid);
      const grant = await tx
        .selectFrom('credit_grants')
        .select(['credits', 'spent', 'refunded', 'expires_at'])
        .where('id', '=', row.grant_id)
        .executeTakeFirstOrThrow();
      const now = this.#now();
      const left = Number(grant.expires_at) > now ? Number(grant.credits) - Number(grant.spent) - Number(grant.refunded) : 0;
      const taken = Math.max(0, Math.min(worth, left));
      await tx
        .insertInto('refunds')
        .values({
          id: randomUUID(),
          purchase_id: id,
          grant_id: row.grant_id,
          provider: row.provider,
          provider_ref: refundRef,
          cents,
          credits: taken,
          unrecovered_credits: worth - taken,
          created_at: now,
        })
        .execute();
      if (taken > 0)
        await tx
          .updateTable('credit_grants')
          .set((eb) => ({ refunded: eb('refunded', '+', taken) }))
          .where('id', '=', row.grant_id)
          .execute();
      await tx
        .updateTable('purchases')
        .set({ refunded_cents: after, status: after >= paid ? 'refunded' : row.status, updated_at: now })
        .where('id', '=', id)
        .execute();
      this.#log.info('a purchase was refunded', {
        purchase_id: id,
        refund_ref: refundRef,
        cents,
        credits: taken,
        unrecovered_credits: worth - taken,
      });
      return 'applied';
    });
  }
}
