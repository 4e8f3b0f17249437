/**
 * Schema migrations, in code so a coordinator binary carries its own schema. Kysely's migrator
 * takes a lock table first, so replicas starting together on one PostgreSQL migrate once.
 * Migrations are append-only: a released one is never edited, a change is a new entry.
 *
 * Longer than ~400 lines by design: the list only grows.
 */

import { Migrator, sql, type Kysely, type Migration, type MigrationProvider } from 'kysely';

const initial: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable('accounts')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('name', 'text', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .addColumn('concurrent_sessions', 'integer', (c) => c.notNull().defaultTo(5))
      .addColumn('sessions_per_minute', 'integer', (c) => c.notNull().defaultTo(50))
      .addColumn('max_session_duration_seconds', 'integer', (c) => c.notNull().defaultTo(1200))
      .execute();
    await db.schema
      .createTable('api_keys')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
      .addColumn('key_hash', 'text', (c) => c.notNull().unique())
      .addColumn('key_prefix', 'text', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .addColumn('revoked_at', 'bigint')
      .execute();
    await db.schema.createIndex('api_keys_account').on('api_keys').column('account_id').execute();
    await db.schema
      .createTable('models')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('name', 'text', (c) => c.notNull().unique())
      .addColumn('rate_credits_per_second', 'integer', (c) => c.notNull())
      .addColumn('public', 'integer', (c) => c.notNull().defaultTo(1))
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .execute();
    await db.schema
      .createTable('model_grants')
      .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
      .addColumn('model_id', 'text', (c) => c.notNull().references('models.id'))
      .addPrimaryKeyConstraint('model_grants_pk', ['account_id', 'model_id'])
      .execute();
    await db.schema
      .createTable('signing_keys')
      .addColumn('kid', 'text', (c) => c.primaryKey())
      .addColumn('private_jwk', 'text', (c) => c.notNull())
      .addColumn('public_jwk', 'text', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .addColumn('retired_at', 'bigint')
      .execute();
    await db.schema
      .createTable('tokens')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
      .addColumn('api_key_id', 'text', (c) => c.notNull().references('api_keys.id'))
      .addColumn('scoped', 'integer', (c) => c.notNull())
      .addColumn('models', 'text')
      .addColumn('max_sessions', 'integer')
      .addColumn('bound_sessions', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('max_session_duration_seconds', 'integer')
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .addColumn('expires_at', 'bigint', (c) => c.notNull())
      .execute();
    await db.schema
      .createTable('sessions')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
      .addColumn('model_id', 'text', (c) => c.notNull().references('models.id'))
      .addColumn('token_id', 'text', (c) => c.references('tokens.id'))
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .addColumn('ready_at', 'bigint')
      .addColumn('ended_at', 'bigint')
      .addColumn('end_reason', 'text')
      .addColumn('max_duration_seconds', 'integer', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('sessions_account_status').on('sessions').columns(['account_id', 'status']).execute();
    await db.schema.createIndex('sessions_token').on('sessions').column('token_id').execute();
    await db.schema
      .createTable('token_bindings')
      .addColumn('token_id', 'text', (c) => c.notNull().references('tokens.id'))
      .addColumn('session_id', 'text', (c) => c.notNull().references('sessions.id'))
      .addPrimaryKeyConstraint('token_bindings_pk', ['token_id', 'session_id'])
      .execute();
  },
  async down(db: Kysely<unknown>): Promise<void> {
    for (const table of ['token_bindings', 'sessions', 'tokens', 'signing_keys', 'model_grants', 'models', 'api_keys', 'accounts']) {
      await sql`drop table if exists ${sql.table(table)}`.execute(db);
    }
  },
};

const billing: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable('credit_grants')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
      .addColumn('kind', 'text', (c) => c.notNull())
      .addColumn('credits', 'bigint', (c) => c.notNull())
      .addColumn('paid_cents', 'bigint')
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .addColumn('expires_at', 'bigint', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('credit_grants_account').on('credit_grants').columns(['account_id', 'expires_at']).execute();
    await db.schema
      .createTable('meter_ticks')
      .addColumn('session_id', 'text', (c) => c.notNull().references('sessions.id'))
      .addColumn('seq', 'bigint', (c) => c.notNull())
      .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
      .addColumn('seconds', 'bigint', (c) => c.notNull())
      .addColumn('credits', 'bigint', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .addPrimaryKeyConstraint('meter_ticks_pk', ['session_id', 'seq'])
      .execute();
    await db.schema
      .createTable('grant_draws')
      .addColumn('session_id', 'text', (c) => c.notNull())
      .addColumn('seq', 'bigint', (c) => c.notNull())
      .addColumn('grant_id', 'text', (c) => c.references('credit_grants.id'))
      .addColumn('credits', 'bigint', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('grant_draws_grant').on('grant_draws').column('grant_id').execute();
    await db.schema.createIndex('grant_draws_tick').on('grant_draws').columns(['session_id', 'seq']).execute();
    // The rate is fixed when a session is created (a later price change applies to new sessions);
    // billed_seconds caches the meter's progress (the ticks are the record).
    await db.schema
      .alterTable('sessions')
      .addColumn('rate_credits_per_second', 'integer', (c) => c.notNull().defaultTo(0))
      .execute();
    await db.schema
      .alterTable('sessions')
      .addColumn('billed_seconds', 'bigint', (c) => c.notNull().defaultTo(0))
      .execute();
  },
  async down(db: Kysely<unknown>): Promise<void> {
    for (const table of ['grant_draws', 'meter_ticks', 'credit_grants']) await sql`drop table if exists ${sql.table(table)}`.execute(db);
  },
};

const runtimes: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable('runtimes')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('url', 'text', (c) => c.notNull())
      .addColumn('model_id', 'text', (c) => c.notNull().references('models.id'))
      .addColumn('slots', 'integer', (c) => c.notNull())
      .addColumn('capabilities', 'text', (c) => c.notNull())
      .addColumn('registered_at', 'bigint', (c) => c.notNull())
      .addColumn('heartbeat_at', 'bigint', (c) => c.notNull())
      .addColumn('draining', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('gone', 'integer', (c) => c.notNull().defaultTo(0))
      .execute();
    await db.schema.alterTable('sessions').addColumn('runtime_id', 'text').execute();
    await db.schema.createIndex('sessions_runtime').on('sessions').columns(['runtime_id', 'status']).execute();
  },
  async down(db: Kysely<unknown>): Promise<void> {
    await sql`drop table if exists runtimes`.execute(db);
  },
};

const billingCap: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    // Credits the account may spend per calendar month (UTC); 0 = no cap.
    await db.schema
      .alterTable('accounts')
      .addColumn('monthly_credit_cap', 'bigint', (c) => c.notNull().defaultTo(0))
      .execute();
    // The month's spend is summed from the ticks: index them by account and time.
    await db.schema.createIndex('meter_ticks_account_time').on('meter_ticks').columns(['account_id', 'created_at']).execute();
  },
  async down(db: Kysely<unknown>): Promise<void> {
    await sql`drop index if exists meter_ticks_account_time`.execute(db);
    await db.schema.alterTable('accounts').dropColumn('monthly_credit_cap').execute();
  },
};

const sessionRateIndex: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    // Admission counts an account's sessions of a model created in the last minute.
    await db.schema
      .createIndex('sessions_account_model_created')
      .on('sessions')
      .columns(['account_id', 'model_id', 'created_at'])
      .execute();
  },
  async down(db: Kysely<unknown>): Promise<void> {
    await sql`drop index if exists sessions_account_model_created`.execute(db);
  },
};

const ledgerSpend: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    // Each grant's spend, kept beside it: a charge read the account's balance by summing every
    // draw ever made on its live grants, a cost that grew with the account's history (a session
    // charged every 5 s leaves ~17,000 draws a day). The draws stay the record; this is their sum,
    // updated in the same transaction as each draw.
    await db.schema
      .alterTable('credit_grants')
      .addColumn('spent', 'bigint', (c) => c.notNull().defaultTo(0))
      .execute();
    await sql`update credit_grants set spent = coalesce((select sum(d.credits) from grant_draws d where d.grant_id = credit_grants.id), 0)`.execute(
      db,
    );
    // Open sessions by status (metrics, the meter's candidates) without reading ended ones.
    await db.schema.createIndex('sessions_status').on('sessions').column('status').execute();
  },
  async down(db: Kysely<unknown>): Promise<void> {
    await sql`drop index if exists sessions_status`.execute(db);
    await db.schema.alterTable('credit_grants').dropColumn('spent').execute();
  },
};

const sessionIdempotency: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    // POST /sessions with an Idempotency-Key: a retry (a lost response, a client timeout) finds
    // the session the first attempt created instead of creating — and billing — a second one.
    // Unique per account: the admission transaction looks the key up under the account's lock,
    // and the index is the backstop if anything ever inserted outside it. NULLs never collide.
    await db.schema.alterTable('sessions').addColumn('idempotency_key', 'text').execute();
    await db.schema.createIndex('sessions_idempotency_key').unique().on('sessions').columns(['account_id', 'idempotency_key']).execute();
  },
  async down(db: Kysely<unknown>): Promise<void> {
    await sql`drop index if exists sessions_idempotency_key`.execute(db);
    await db.schema.alterTable('sessions').dropColumn('idempotency_key').execute();
  },
};

const grantWithheld: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    // The balance ceiling now bounds promotional grants (signup credits included): one that would
    // pass it is granted up to it, and what was left out is kept here, on the grant.
    await db.schema
      .alterTable('credit_grants')
      .addColumn('withheld_credits', 'bigint', (c) => c.notNull().defaultTo(0))
      .execute();
  },
  async down(db: Kysely<unknown>): Promise<void> {
    await db.schema.alterTable('credit_grants').dropColumn('withheld_credits').execute();
  },
};

const apiKeyNames: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    // Keys are managed by accounts themselves now (the platform API), several at once: a label
    // tells "production" from "staging" where the 10-character prefix does not say what it is for.
    await db.schema.alterTable('api_keys').addColumn('name', 'text').execute();
  },
  async down(db: Kysely<unknown>): Promise<void> {
    await db.schema.alterTable('api_keys').dropColumn('name').execute();
  },
};

const slotRelease: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    // A session holds its runtime's slot until the runtime has let it go (it answered the end, it
    // ended the session itself, or it is gone) — not merely until the coordinator marked it ended:
    // in between, a start for another session would reach a runtime whose slot is still taken.
    await db.schema.alterTable('sessions').addColumn('slot_released_at', 'bigint').execute();
    await sql`update sessions set slot_released_at = coalesce(ended_at, created_at) where status = 'ended'`.execute(db);
  },
  async down(db: Kysely<unknown>): Promise<void> {
    await db.schema.alterTable('sessions').dropColumn('slot_released_at').execute();
  },
};

const leases: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    // Who does the fleet-wide work (coordinator/housekeeping/housekeeper-lease.ts): one row per
    // lease, taken by a conditional update on its expiry.
    await db.schema
      .createTable('leases')
      .addColumn('name', 'text', (c) => c.primaryKey())
      .addColumn('holder', 'text', (c) => c.notNull())
      .addColumn('expires_at', 'bigint', (c) => c.notNull())
      .addColumn('acquired_at', 'bigint', (c) => c.notNull())
      .execute();
    await sql`insert into leases (name, holder, expires_at, acquired_at) values ('housekeeping', '', 0, 0)`.execute(db);
  },
  async down(db: Kysely<unknown>): Promise<void> {
    await db.schema.dropTable('leases').execute();
  },
};

const keyRevocation: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    // Revoking a key kills the tokens it minted; rotating it does not (spec: "Rotating a key does
    // not affect active sessions"). `revoked_at` is set by both (the key itself stops working), so
    // the tokens' fate needs its own column. Keys revoked before this migration leave their tokens
    // to expire (at most 6 h), as they did then.
    await db.schema.alterTable('api_keys').addColumn('tokens_revoked_at', 'bigint').execute();
  },
  async down(db: Kysely<unknown>): Promise<void> {
    await db.schema.alterTable('api_keys').dropColumn('tokens_revoked_at').execute();
  },
};

const purchases: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    // Self-serve purchases through a payment provider, and automatic top-ups
    // (coordinator/billing/purchases.ts). The settings live on the account's row: the meter reads
    // that row anyway when it locks it to charge, so an account without a top-up costs nothing more.
    await db.schema.alterTable('accounts').addColumn('auto_topup_threshold_credits', 'bigint').execute();
    await db.schema.alterTable('accounts').addColumn('auto_topup_amount_dollars', 'integer').execute();
    await db.schema
      .alterTable('accounts')
      .addColumn('auto_topup_armed', 'integer', (c) => c.notNull().defaultTo(0))
      .execute();
    await db.schema.alterTable('accounts').addColumn('auto_topup_updated_at', 'bigint').execute();
    // Credits refunds took back from a purchased grant: a running sum beside `spent`, kept with the
    // refunds' rows in one transaction (reconcile() checks it).
    await db.schema
      .alterTable('credit_grants')
      .addColumn('refunded', 'bigint', (c) => c.notNull().defaultTo(0))
      .execute();
    await db.schema
      .createTable('purchases')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
      .addColumn('kind', 'text', (c) => c.notNull())
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('dollars', 'integer', (c) => c.notNull())
      .addColumn('credits', 'bigint', (c) => c.notNull())
      .addColumn('provider', 'text', (c) => c.notNull())
      .addColumn('provider_ref', 'text')
      .addColumn('checkout_url', 'text')
      .addColumn('failure', 'text')
      .addColumn('idempotency_key', 'text')
      .addColumn('grant_id', 'text', (c) => c.references('credit_grants.id'))
      .addColumn('refunded_cents', 'bigint', (c) => c.notNull().defaultTo(0))
      .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('retry_at', 'bigint')
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .addColumn('updated_at', 'bigint', (c) => c.notNull())
      .addColumn('confirmed_at', 'bigint')
      .execute();
    // One provider payment is one purchase: a replayed confirmation finds the purchase it confirmed.
    await db.schema.createIndex('purchases_provider_ref').unique().on('purchases').columns(['provider', 'provider_ref']).execute();
    await db.schema.createIndex('purchases_idempotency_key').unique().on('purchases').columns(['account_id', 'idempotency_key']).execute();
    await db.schema.createIndex('purchases_account_created').on('purchases').columns(['account_id', 'created_at']).execute();
    await db.schema.createIndex('purchases_status').on('purchases').columns(['status', 'retry_at']).execute();
    // At most one automatic top-up in flight per account, whatever inserts it: the claim is made
    // under the account's lock, and this index is the backstop (both engines have partial indexes).
    await sql`create unique index purchases_one_pending_auto_topup on purchases (account_id) where kind = 'auto_topup' and status = 'pending'`.execute(
      db,
    );
    await db.schema
      .createTable('refunds')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('purchase_id', 'text', (c) => c.notNull().references('purchases.id'))
      .addColumn('grant_id', 'text', (c) => c.notNull().references('credit_grants.id'))
      .addColumn('provider', 'text', (c) => c.notNull())
      .addColumn('provider_ref', 'text', (c) => c.notNull())
      .addColumn('cents', 'bigint', (c) => c.notNull())
      .addColumn('credits', 'bigint', (c) => c.notNull())
      .addColumn('unrecovered_credits', 'bigint', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('refunds_provider_ref').unique().on('refunds').columns(['provider', 'provider_ref']).execute();
    await db.schema.createIndex('refunds_purchase').on('refunds').column('purchase_id').execute();
    await db.schema.createIndex('refunds_grant').on('refunds').column('grant_id').execute();
  },
  async down(db: Kysely<unknown>): Promise<void> {
    await sql`drop table if exists refunds`.execute(db);
    await sql`drop table if exists purchases`.execute(db);
    await db.schema.alterTable('credit_grants').dropColumn('refunded').execute();
    for (const column of ['auto_topup_updated_at', 'auto_topup_armed', 'auto_topup_amount_dollars', 'auto_topup_threshold_credits']) {
      await db.schema.alterTable('accounts').dropColumn(column).execute();
    }
  },
};

const dashboard: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    // The account dashboard's sign-ins (coordinator/dashboard/): cookie values and one-time link
    // tokens are stored as SHA-256 only, so a leaked table signs nobody in.
    await db.schema
      .createTable('dashboard_sessions')
      .addColumn('id_hash', 'text', (c) => c.primaryKey())
      .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
      .addColumn('api_key_id', 'text', (c) => c.references('api_keys.id'))
      .addColumn('method', 'text', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .addColumn('expires_at', 'bigint', (c) => c.notNull())
      .addColumn('last_seen_at', 'bigint', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('dashboard_sessions_expires').on('dashboard_sessions').column('expires_at').execute();
    await db.schema
      .createTable('dashboard_links')
      .addColumn('token_hash', 'text', (c) => c.primaryKey())
      .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .addColumn('expires_at', 'bigint', (c) => c.notNull())
      .addColumn('used_at', 'bigint')
      .execute();
    await db.schema.createIndex('dashboard_links_expires').on('dashboard_links').column('expires_at').execute();
  },
  async down(db: Kysely<unknown>): Promise<void> {
    await db.schema.dropTable('dashboard_links').execute();
    await db.schema.dropTable('dashboard_sessions').execute();
  },
};

/** Every migration, oldest first; names sort in order. */
export const MIGRATIONS: Readonly<Record<string, Migration>> = {
  '0001_initial': initial,
  '0002_billing': billing,
  '0003_runtimes': runtimes,
  '0004_billing_cap': billingCap,
  '0005_session_rate_index': sessionRateIndex,
  '0006_ledger_spend': ledgerSpend,
  '0007_session_idempotency': sessionIdempotency,
  '0008_grant_withheld': grantWithheld,
  '0009_api_key_names': apiKeyNames,
  '0010_slot_release': slotRelease,
  '0011_leases': leases,
  '0012_key_revocation': keyRevocation,
  '0013_purchases': purchases,
  '0014_dashboard': dashboard,
};

const provider: MigrationProvider = { getMigrations: async () => ({ ...MIGRATIONS }) };

/** Brings the schema up to date; throws with the failing migration's error. */
export async function migrateToLatest(db: Kysely<unknown>): Promise<void> {
  const { error, results } = await new Migrator({ db, provider }).migrateToLatest();
  if (error) {
    const failed = results?.find((r) => r.status === 'Error')?.migrationName ?? 'unknown';
    throw new Error(`coordinator schema migration ${failed} failed`, { cause: error });
  }
}
