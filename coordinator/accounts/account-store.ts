/** Accounts and their quotas. */

import { randomUUID } from 'node:crypto';
import type { Kysely, Selectable } from 'kysely';
import type { CreditLedger, PromotionalGrant } from '../billing/credit-ledger.ts';
import type { AccountTable, CoordinatorDatabase } from '../storage/schema.ts';

export interface AccountQuotas {
  /** Sessions open at once, across all keys and models (connecting and waiting count). */
  readonly concurrentSessions: number;
  /** Sessions created per minute, per model. */
  readonly sessionsPerMinute: number;
  /** Ceiling on a session's duration in seconds. */
  readonly maxSessionDurationSeconds: number;
  /**
   * Billing cap: credits the account may spend per calendar month (UTC); 0 = none. Reaching it
   * refuses new paid sessions (402 `billing_cap_reached`) and ends running ones.
   */
  readonly monthlyCreditCap: number;
}

/** The spec's defaults; support raises them per account (`arclight admin set-quotas`). */
export const DEFAULT_QUOTAS: AccountQuotas = {
  concurrentSessions: 5,
  sessionsPerMinute: 50,
  maxSessionDurationSeconds: 1200,
  monthlyCreditCap: 0,
};

export interface Account {
  readonly id: string;
  readonly name: string;
  readonly createdAt: number;
  readonly quotas: AccountQuotas;
}

/**
 * Promotional credits every new account receives (the spec: "New accounts receive free promotional
 * credits"), unless the coordinator is configured otherwise (`signupCredits`, `--signup-credits`,
 * `$ARCLIGHT_SIGNUP_CREDITS`; 0 = none). 100,000 credits = 10 US dollars: the smallest automatic
 * top-up, a thousandth of the balance ceiling (so it never meets it), and enough for one session
 * of the default maximum duration (1200 s) at up to 83 credits per second. Like every
 * promotional grant it expires after 90 days.
 */
export const DEFAULT_SIGNUP_CREDITS = 100_000;

/** A new account, with the signup grant it received (undefined when signup credits are off). */
export interface CreatedAccount extends Account {
  readonly signupGrant: PromotionalGrant | undefined;
}

/** Who grants new accounts their signup credits, and how many (0 = none). */
export interface SignupGrant {
  readonly ledger: CreditLedger;
  readonly credits: number;
}

/** Checks a signup grant setting: a whole number of credits, 0 (none) up to the balance ceiling (0 = no ceiling). */
export function checkSignupCredits(credits: number, maxAccountCredits: number): void {
  if (!Number.isSafeInteger(credits) || credits < 0)
    throw new RangeError(`signupCredits must be a whole number of credits, 0 or more (got ${credits})`);
  // Every account would get less than configured: a setting that cannot be what was meant.
  if (maxAccountCredits > 0 && credits > maxAccountCredits) {
    throw new RangeError(`signupCredits (${credits}) is above the balance ceiling of ${maxAccountCredits} credits`);
  }
}

export function accountFromRow(
  row: Pick<
    Selectable<AccountTable>,
    'id' | 'name' | 'created_at' | 'concurrent_sessions' | 'sessions_per_minute' | 'max_session_duration_seconds' | 'monthly_credit_cap'
  >,
): Account {
  return {
    id: row.id,
    name: row.name,
    createdAt: row.created_at,
    quotas: {
      concurrentSessions: row.concurrent_sessions,
      sessionsPerMinute: row.sessions_per_minute,
      maxSessionDurationSeconds: row.max_session_duration_seconds,
      monthlyCreditCap: Number(row.monthly_credit_cap),
    },
  };
}

export class AccountStore {
  readonly #db: Kysely<CoordinatorDatabase>;
  readonly #signup: SignupGrant | undefined;

  /**
   * `signup`: grants every account it creates its signup credits. Without it (benchmarks, tools
   * that seed data) accounts start with none; the coordinator and `arclight admin` always pass it.
   */
  constructor(db: Kysely<CoordinatorDatabase>, signup?: SignupGrant) {
    this.#db = db;
    this.#signup = signup;
  }

  /**
   * Creates an account and grants its signup credits in the same transaction: an account never
   * exists without the credits it was promised, on any creation path.
   */
  async create(name: string, quotas: Partial<AccountQuotas> = {}, now = Date.now()): Promise<CreatedAccount> {
    const q = { ...DEFAULT_QUOTAS, ...quotas };
    const row = {
      id: randomUUID(),
      name,
      created_at: now,
      concurrent_sessions: q.concurrentSessions,
      sessions_per_minute: q.sessionsPerMinute,
      max_session_duration_seconds: q.maxSessionDurationSeconds,
      monthly_credit_cap: q.monthlyCreditCap,
    };
    const signup = this.#signup;
    if (!signup || signup.credits === 0) {
      await this.#db.insertInto('accounts').values(row).execute();
      return { ...accountFromRow(row), signupGrant: undefined };
    }
    const signupGrant = await this.#db.transaction().execute(async (tx) => {
      await tx.insertInto('accounts').values(row).execute();
      return signup.ledger.grantPromotionalIn(tx, row.id, signup.credits);
    });
    return { ...accountFromRow(row), signupGrant };
  }

  async get(id: string): Promise<Account | undefined> {
    const row = await this.#db.selectFrom('accounts').selectAll().where('id', '=', id).executeTakeFirst();
    return row ? accountFromRow(row) : undefined;
  }

  async setQuotas(id: string, quotas: Partial<AccountQuotas>): Promise<void> {
    const values: Partial<
      Record<'concurrent_sessions' | 'sessions_per_minute' | 'max_session_duration_seconds' | 'monthly_credit_cap', number>
    > = {};
    if (quotas.concurrentSessions !== undefined) values.concurrent_sessions = quotas.concurrentSessions;
    if (quotas.sessionsPerMinute !== undefined) values.sessions_per_minute = quotas.sessionsPerMinute;
    if (quotas.maxSessionDurationSeconds !== undefined) values.max_session_duration_seconds = quotas.maxSessionDurationSeconds;
    if (quotas.monthlyCreditCap !== undefined) values.monthly_credit_cap = quotas.monthlyCreditCap;
    if (Object.keys(values).length > 0) await this.#db.updateTable('accounts').set(values).where('id', '=', id).execute();
  }
}
