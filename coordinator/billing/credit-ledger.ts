/**
 * Credits: a ledger whose history is append-only. Grants add credits with an expiry (promotional
 * 90 days, purchased 365 days); the session meter's ticks spend them, earliest expiry first, each
 * tick's draws written with it. Ticks and draws are only ever inserted; the one running figure is
 * each grant's `spent`, moved with its draws in the same transaction under the account's lock (so
 * a balance is one indexed read, not a sum over every draw since the grant was made). `reconcile()`
 * proves it: every grant's `spent` equals the sum of its draws, every tick is paid by draws of the
 * same credits, and every session's billed seconds are its ticks' — so grants − draws = balance.
 *
 * The balance ceiling (`maxAccountCredits`) bounds every grant: a purchase that would pass it is
 * refused (the buyer can buy less), a promotional grant is made up to it and the rest withheld —
 * recorded on the grant (`withheld`) — since nobody is there to choose a smaller amount when a
 * signup or promotion is granted. Purchases still pending at the payment provider hold their
 * credits' room under the ceiling (coordinator/billing/purchases.ts), so a confirmation always fits.
 *
 * Refunds take credits back from the purchased grant they refund: a `refunds` row each, and the
 * grant's running `refunded` moved with it (what a grant has left is `credits − spent − refunded`);
 * `reconcile()` checks that too. Credits a refund pays back that were already spent are not taken
 * from anything else: the refund records them as `unrecovered_credits`.
 *
 * Longer than ~400 lines: the ledger's writes and `reconcile()`, which proves them, are kept
 * together so a change to one is read against the other.
 */

import { randomUUID } from 'node:crypto';
import type { Kysely, Transaction } from 'kysely';
import { ArclightError } from '../../protocol/errors.ts';
import { lockAccountRow } from '../accounts/account-lock.ts';
import type { PricingSettings } from '../pricing/pricing.ts';
import type { DatabaseEngine } from '../storage/database.ts';
import type { CoordinatorDatabase, GrantKind } from '../storage/schema.ts';

const DAY_MS = 86_400_000;
/** How long credits live, by kind (the spec's Credits table). */
export const GRANT_LIFETIME_DAYS: Record<GrantKind, number> = { promotional: 90, purchased: 365 };

type Db = Kysely<CoordinatorDatabase> | Transaction<CoordinatorDatabase>;

/** Rows per multi-row insert: well under SQLite's bound-parameter limit at 6 columns a row. */
const INSERT_CHUNK = 500;

function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

export interface GrantBalance {
  readonly id: string;
  readonly kind: GrantKind;
  readonly credits: number;
  readonly remaining: number;
  readonly expiresAt: number;
}

/** A promotional grant as made: `credits` is what the account got. */
export interface PromotionalGrant extends GrantBalance {
  /** Credits asked for that the balance ceiling left out (0 = none); kept on the grant's row. */
  readonly withheld: number;
}

export interface Balance {
  /** Unspent credits of unexpired grants. */
  readonly credits: number;
  /** Per grant, earliest expiry first (the order they are spent in). */
  readonly grants: readonly GrantBalance[];
}

export interface Charge {
  readonly accountId: string;
  readonly sessionId: string;
  /** First billed second this tick covers; (sessionId, seq) is the tick's idempotency key. */
  readonly seq: number;
  readonly seconds: number;
  readonly credits: number;
}

export interface ChargeResult {
  /** False when this (session, seq) was already charged: nothing was written. */
  readonly charged: boolean;
  /** Credits the grants could not cover (the account ran dry). */
  readonly unpaid: number;
}

/** What `chargeMany` did: per session, and the account's balance once the charges were drawn. */
export interface ChargeBatch {
  readonly results: Map<string, ChargeResult>;
  readonly balance: number;
}

/** An account's automatic top-up settings, as read with its lock (`auto_topup_*` columns). */
export interface AutoTopupState {
  readonly thresholdCredits: number;
  readonly amountDollars: number;
  /** The next charge leaving the balance below the threshold makes a top-up (schema.ts). */
  readonly armed: boolean;
}

/** What ledger writers need of the account they locked. */
export interface LockedAccount {
  /** Monthly billing cap in credits; 0 = none. */
  readonly monthlyCreditCap: number;
  /** Undefined when automatic top-up is off. */
  readonly autoTopup: AutoTopupState | undefined;
}

export class CreditLedger {
  readonly #db: Kysely<CoordinatorDatabase>;
  readonly #engine: DatabaseEngine;
  readonly #pricing: PricingSettings;
  readonly #now: () => number;

  constructor(db: Kysely<CoordinatorDatabase>, engine: DatabaseEngine, pricing: PricingSettings, now: () => number = Date.now) {
    this.#db = db;
    this.#engine = engine;
    this.#pricing = pricing;
    this.#now = now;
  }

  /**
   * Free credits (signup, promotions); they expire after 90 days. Granted up to the balance
   * ceiling: what would pass it is withheld (recorded on the grant), so a grant to an account
   * already at the ceiling adds nothing.
   */
  async grantPromotional(accountId: string, credits: number): Promise<PromotionalGrant> {
    return this.#db.transaction().execute((tx) => this.grantPromotionalIn(tx, accountId, credits));
  }

  /** grantPromotional inside `tx` (account creation grants the signup credits in its own transaction). */
  async grantPromotionalIn(tx: Transaction<CoordinatorDatabase>, accountId: string, credits: number): Promise<PromotionalGrant> {
    if (!Number.isSafeInteger(credits) || credits < 1) throw new ArclightError('invalid_request', 'credits must be a positive integer.');
    // Under the account lock, like a purchase: two grants at once must not both fit under the ceiling.
    const locked = await this.lockAccount(tx, accountId);
    let granted = credits;
    const ceiling = this.#pricing.maxAccountCredits;
    if (ceiling > 0) granted = Math.max(0, Math.min(credits, await this.ceilingRoom(tx, accountId)));
    const grant = await this.#insertGrant(tx, accountId, 'promotional', granted, null, credits - granted);
    if (granted > 0) await this.rearmAutoTopupIn(tx, accountId, locked);
    return { ...grant, withheld: credits - granted };
  }

  /**
   * A purchase of whole dollars (1–1,000 per transaction by default), turned into credits at
   * credits_per_dollar; refused when the balance would pass the account ceiling. This is the
   * operator's (`arclight admin buy-credits`): paid elsewhere, granted at once, no provider — and
   * recorded like any purchase, in the same transaction as its grant: `kind` and `provider`
   * `operator`, `confirmed`, so the account sees it in `GET /platform/purchases` (and the
   * dashboard) beside what it bought itself. Accounts buy through `POST /platform/purchases`
   * (purchases.ts).
   */
  async purchase(accountId: string, dollars: number): Promise<GrantBalance & { readonly purchaseId: string }> {
    const credits = this.purchaseCredits(dollars);
    return this.#db.transaction().execute(async (tx) => {
      const locked = await this.lockAccount(tx, accountId);
      await this.checkCeiling(tx, accountId, credits);
      const grant = await this.#insertGrant(tx, accountId, 'purchased', credits, dollars * 100);
      const now = this.#now();
      const purchaseId = randomUUID();
      await tx
        .insertInto('purchases')
        .values({
          id: purchaseId,
          account_id: accountId,
          kind: 'operator',
          status: 'confirmed',
          dollars,
          credits,
          provider: 'operator',
          provider_ref: null,
          checkout_url: null,
          failure: null,
          idempotency_key: null,
          grant_id: grant.id,
          retry_at: null,
          created_at: now,
          updated_at: now,
          confirmed_at: now,
        })
        .execute();
      await this.rearmAutoTopupIn(tx, accountId, locked);
      return { ...grant, purchaseId };
    });
  }

  /** The credits `dollars` buy; `invalid_request` unless 1–1,000 whole dollars (the pricing's bounds). */
  purchaseCredits(dollars: unknown, field?: string): number {
    const { purchaseMinDollars: min, purchaseMaxDollars: max, creditsPerDollar } = this.#pricing;
    if (typeof dollars !== 'number' || !Number.isInteger(dollars) || dollars < min || dollars > max) {
      throw new ArclightError('invalid_request', `A purchase is ${min} to ${max} whole US dollars.`, field === undefined ? {} : { field });
    }
    return dollars * creditsPerDollar;
  }

  /**
   * Credits that may still be added under the balance ceiling (Infinity without one): the ceiling
   * less the balance and less what pending purchases will add when confirmed. In `tx`, holding the
   * account's lock.
   */
  async ceilingRoom(tx: Transaction<CoordinatorDatabase>, accountId: string): Promise<number> {
    const ceiling = this.#pricing.maxAccountCredits;
    if (ceiling === 0) return Number.POSITIVE_INFINITY;
    const { credits: balance } = await this.balance(accountId, tx);
    const pending = await tx
      .selectFrom('purchases')
      .select((eb) => eb.fn.sum<number | string | null>('credits').as('credits'))
      .where('account_id', '=', accountId)
      .where('status', '=', 'pending')
      .executeTakeFirst();
    return Math.max(0, ceiling - balance - Number(pending?.credits ?? 0));
  }

  /** 409 `balance_ceiling_exceeded` when `credits` do not fit in ceilingRoom. */
  async checkCeiling(tx: Transaction<CoordinatorDatabase>, accountId: string, credits: number): Promise<void> {
    const room = await this.ceilingRoom(tx, accountId);
    if (credits > room) {
      throw new ArclightError(
        'balance_ceiling_exceeded',
        `The balance would exceed the account ceiling of ${this.#pricing.maxAccountCredits} credits (room left: ${room} credits, pending purchases counted).`,
      );
    }
  }

  /**
   * A confirmed purchase's grant, in `tx` (holding the account's lock): bounds and ceiling were
   * checked when the purchase was made, and its credits held their room since.
   */
  async grantPurchasedIn(
    tx: Transaction<CoordinatorDatabase>,
    accountId: string,
    locked: LockedAccount,
    credits: number,
    paidCents: number,
  ): Promise<GrantBalance> {
    const grant = await this.#insertGrant(tx, accountId, 'purchased', credits, paidCents);
    await this.rearmAutoTopupIn(tx, accountId, locked);
    return grant;
  }

  /**
   * After credits were added (in `tx`, under the lock): a disarmed automatic top-up is armed again
   * once the balance is back at or above its threshold — one top-up per fall below it.
   */
  async rearmAutoTopupIn(tx: Transaction<CoordinatorDatabase>, accountId: string, locked: LockedAccount): Promise<void> {
    const topup = locked.autoTopup;
    if (!topup || topup.armed) return;
    if ((await this.balance(accountId, tx)).credits < topup.thresholdCredits) return;
    await tx.updateTable('accounts').set({ auto_topup_armed: 1 }).where('id', '=', accountId).execute();
  }

  async balance(accountId: string, db: Db = this.#db): Promise<Balance> {
    const rows = await db
      .selectFrom('credit_grants as g')
      .select(['g.id', 'g.kind', 'g.credits', 'g.expires_at', 'g.spent', 'g.refunded'])
      .where('g.account_id', '=', accountId)
      .where('g.expires_at', '>', this.#now())
      // A promotional grant wholly withheld by the ceiling has nothing to spend or show.
      .where('g.credits', '>', 0)
      .orderBy('g.expires_at')
      .orderBy('g.id')
      .execute();
    const grants = rows.map((r) => {
      const credits = Number(r.credits);
      return {
        id: r.id,
        kind: r.kind,
        credits,
        remaining: credits - Number(r.spent ?? 0) - Number(r.refunded ?? 0),
        expiresAt: Number(r.expires_at),
      };
    });
    return { credits: grants.reduce((sum, g) => sum + Math.max(0, g.remaining), 0), grants };
  }

  /**
   * Many charges of one account in one go, inside `tx` (which must hold the account lock): one
   * multi-row insert of the ticks (those already written are left alone and reported uncharged),
   * one of the draws — paid in the order given, earliest-expiring grant first — and one update per
   * grant drawn from. A flush of N sessions of an account costs a handful of statements, not N
   * times that. Results by session id, and the balance left once they were drawn.
   */
  async chargeMany(tx: Transaction<CoordinatorDatabase>, accountId: string, charges: readonly Charge[]): Promise<ChargeBatch> {
    const results = new Map<string, ChargeResult>();
    if (charges.length === 0) return { results, balance: (await this.balance(accountId, tx)).credits };
    const now = this.#now();
    const fresh = new Set<string>();
    for (const chunk of chunks(charges, INSERT_CHUNK)) {
      const inserted = await tx
        .insertInto('meter_ticks')
        .values(
          chunk.map((c) => ({
            session_id: c.sessionId,
            seq: c.seq,
            account_id: accountId,
            seconds: c.seconds,
            credits: c.credits,
            created_at: now,
          })),
        )
        .onConflict((oc) => oc.columns(['session_id', 'seq']).doNothing())
        .returning(['session_id', 'seq'])
        .execute();
      for (const row of inserted) fresh.add(`${row.session_id}\u0000${Number(row.seq)}`);
    }
    const grants = (await this.balance(accountId, tx)).grants.map((g) => ({ id: g.id, remaining: g.remaining }));
    const draws: Array<{ session_id: string; seq: number; grant_id: string | null; credits: number }> = [];
    const spent = new Map<string, number>();
    for (const charge of charges) {
      if (!fresh.has(`${charge.sessionId}\u0000${charge.seq}`)) {
        results.set(charge.sessionId, { charged: false, unpaid: 0 });
        continue;
      }
      let owed = charge.credits;
      for (const grant of grants) {
        if (owed === 0) break;
        const take = Math.min(owed, grant.remaining);
        if (take <= 0) continue;
        draws.push({ session_id: charge.sessionId, seq: charge.seq, grant_id: grant.id, credits: take });
        grant.remaining -= take;
        spent.set(grant.id, (spent.get(grant.id) ?? 0) + take);
        owed -= take;
      }
      if (owed > 0) draws.push({ session_id: charge.sessionId, seq: charge.seq, grant_id: null, credits: owed });
      results.set(charge.sessionId, { charged: true, unpaid: owed });
    }
    for (const chunk of chunks(draws, INSERT_CHUNK)) await tx.insertInto('grant_draws').values(chunk).execute();
    // Each grant's running total moves with its draws, in this transaction (under the account lock).
    for (const [grantId, credits] of spent) {
      await tx
        .updateTable('credit_grants')
        .set((eb) => ({ spent: eb('spent', '+', credits) }))
        .where('id', '=', grantId)
        .execute();
    }
    return { results, balance: grants.reduce((sum, g) => sum + Math.max(0, g.remaining), 0) };
  }

  /**
   * What should always add up, checked across the whole ledger (or one account's): each grant's
   * running `spent` against the sum of its draws, its running `refunded` against the sum of its
   * refunds, and the two within its credits; each tick's credits against its draws; each
   * session's billed seconds against its ticks. Empty when everything reconciles; otherwise one
   * line per discrepancy. The crash, replica and failover tests run it after their runs.
   */
  async reconcile(accountId?: string): Promise<string[]> {
    const problems: string[] = [];
    let grants = this.#db
      .selectFrom('credit_grants as g')
      .leftJoin(
        (eb) =>
          eb
            .selectFrom('grant_draws')
            .select(['grant_id', (e) => e.fn.sum<string | number>('credits').as('drawn')])
            .groupBy('grant_id')
            .as('d'),
        (join) => join.onRef('d.grant_id', '=', 'g.id'),
      )
      .leftJoin(
        (eb) =>
          eb
            .selectFrom('refunds')
            .select(['grant_id', (e) => e.fn.sum<string | number>('credits').as('taken')])
            .groupBy('grant_id')
            .as('r'),
        (join) => join.onRef('r.grant_id', '=', 'g.id'),
      )
      .select(['g.id', 'g.credits', 'g.spent', 'g.refunded', 'd.drawn', 'r.taken']);
    if (accountId) grants = grants.where('g.account_id', '=', accountId);
    for (const g of await grants.execute()) {
      const spent = Number(g.spent ?? 0);
      const refunded = Number(g.refunded ?? 0);
      if (spent !== Number(g.drawn ?? 0)) problems.push(`grant ${g.id}: spent ${spent} but its draws sum to ${Number(g.drawn ?? 0)}`);
      if (refunded !== Number(g.taken ?? 0))
        problems.push(`grant ${g.id}: refunded ${refunded} but its refunds sum to ${Number(g.taken ?? 0)}`);
      if (spent + refunded > Number(g.credits))
        problems.push(`grant ${g.id}: spent ${spent} and refunded ${refunded} exceed its ${Number(g.credits)} credits`);
    }
    let ticks = this.#db
      .selectFrom('meter_ticks as t')
      .leftJoin(
        (eb) =>
          eb
            .selectFrom('grant_draws')
            .select(['session_id', 'seq', (e) => e.fn.sum<string | number>('credits').as('paid')])
            .groupBy(['session_id', 'seq'])
            .as('d'),
        (join) => join.onRef('d.session_id', '=', 't.session_id').onRef('d.seq', '=', 't.seq'),
      )
      .select(['t.session_id', 't.seq', 't.credits', 'd.paid']);
    if (accountId) ticks = ticks.where('t.account_id', '=', accountId);
    for (const t of await ticks.execute()) {
      if (Number(t.credits) !== Number(t.paid ?? 0))
        problems.push(`tick (${t.session_id}, ${Number(t.seq)}): ${Number(t.credits)} credits but draws of ${Number(t.paid ?? 0)}`);
    }
    let sessions = this.#db
      .selectFrom('sessions as s')
      .leftJoin(
        (eb) =>
          eb
            .selectFrom('meter_ticks')
            .select(['session_id', (e) => e.fn.sum<string | number>('seconds').as('ticked')])
            .groupBy('session_id')
            .as('t'),
        (join) => join.onRef('t.session_id', '=', 's.id'),
      )
      .select(['s.id', 's.billed_seconds', 't.ticked']);
    if (accountId) sessions = sessions.where('s.account_id', '=', accountId);
    for (const session of await sessions.execute()) {
      if (Number(session.billed_seconds) !== Number(session.ticked ?? 0)) {
        problems.push(
          `session ${session.id}: billed ${Number(session.billed_seconds)} s but its ticks cover ${Number(session.ticked ?? 0)} s`,
        );
      }
    }
    return problems;
  }

  /**
   * Credits charged to the account since the start of this calendar month (UTC) — what a billing
   * cap limits. Summed from the ticks (indexed by account and time), so it cannot drift.
   */
  async spentThisMonth(accountId: string, db: Db = this.#db): Promise<number> {
    const now = new Date(this.#now());
    const monthStart = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1);
    const row = await db
      .selectFrom('meter_ticks')
      .select((eb) => eb.fn.sum<number | string | null>('credits').as('spent'))
      .where('account_id', '=', accountId)
      .where('created_at', '>=', monthStart)
      .executeTakeFirst();
    return Number(row?.spent ?? 0);
  }

  /**
   * Serializes ledger writes per account (lockAccountRow). Returns what was read with the lock:
   * the monthly billing cap (0 = none) and the automatic top-up settings.
   */
  async lockAccount(tx: Transaction<CoordinatorDatabase>, accountId: string): Promise<LockedAccount> {
    const account = await lockAccountRow(tx, this.#engine, accountId);
    if (!account) throw new ArclightError('invalid_request', `No account ${accountId}.`);
    const threshold = account.auto_topup_threshold_credits;
    const amount = account.auto_topup_amount_dollars;
    return {
      monthlyCreditCap: Number(account.monthly_credit_cap),
      autoTopup:
        threshold === null || threshold === undefined || amount === null || amount === undefined
          ? undefined
          : { thresholdCredits: Number(threshold), amountDollars: Number(amount), armed: Number(account.auto_topup_armed) === 1 },
    };
  }

  async #insertGrant(
    tx: Transaction<CoordinatorDatabase>,
    accountId: string,
    kind: GrantKind,
    credits: number,
    paidCents: number | null,
    withheld = 0,
  ): Promise<GrantBalance> {
    const now = this.#now();
    const grant = {
      id: randomUUID(),
      account_id: accountId,
      kind,
      credits,
      paid_cents: paidCents,
      created_at: now,
      expires_at: now + GRANT_LIFETIME_DAYS[kind] * DAY_MS,
      withheld_credits: withheld,
    };
    await tx.insertInto('credit_grants').values(grant).execute();
    return { id: grant.id, kind, credits, remaining: credits, expiresAt: grant.expires_at };
  }
}
