/**
 * The coordinator's tables, as Kysely sees them. One schema for SQLite and PostgreSQL: times are
 * integer milliseconds since the Unix epoch (`bigint` in PostgreSQL, read back as numbers),
 * booleans are 0/1 integers, lists are JSON text — the common ground of both engines, so every
 * query is written once.
 */

import type { Generated } from 'kysely';

/** A customer. Quotas default to the spec's limits and can be raised per account. */
export interface AccountTable {
  id: string;
  name: string;
  created_at: number;
  /** Sessions open at once (connecting, waiting and ready count). */
  concurrent_sessions: Generated<number>;
  /** Sessions created per minute, per model. */
  sessions_per_minute: Generated<number>;
  /** Ceiling on every session's duration; a token's constraint can only lower it. */
  max_session_duration_seconds: Generated<number>;
  /** Credits the account may spend per calendar month (UTC); 0 = no cap. */
  monthly_credit_cap: Generated<number>;
  /**
   * Automatic top-up (coordinator/billing/purchases.ts): when a charge leaves the balance below
   * this many credits, one purchase of `auto_topup_amount_dollars` is made. Null = off.
   */
  auto_topup_threshold_credits: Generated<number | null>;
  auto_topup_amount_dollars: Generated<number | null>;
  /**
   * 1: the next charge that leaves the balance below the threshold makes a top-up. Cleared by the
   * charge that makes one; set again when credits added bring the balance back to the threshold,
   * or when the settings are saved. One top-up per fall below the threshold, whatever the replicas.
   */
  auto_topup_armed: Generated<number>;
  /** When the settings were last saved (ms); null when never. */
  auto_topup_updated_at: Generated<number | null>;
}

/** `rk_` keys, stored as SHA-256 of the whole key (high-entropy secrets need no slow hash). */
export interface ApiKeyTable {
  id: string;
  account_id: string;
  /** A label the account chose (`production`), kept across rotations; null when none. */
  name: string | null;
  key_hash: string;
  /** The first characters of the key, to tell keys apart in listings without the secret. */
  key_prefix: string;
  created_at: number;
  /** When the key stopped working: revoked, or rotated (replaced by a new key). */
  revoked_at: number | null;
  /**
   * When the tokens it minted stopped working: set by a revocation, never by a rotation (tokens
   * of a rotated key live until they expire). Token verification reads it with the token's row.
   */
  tokens_revoked_at: Generated<number | null>;
}

/** The model catalog: slugs clients connect with, and the per-second rate. */
export interface ModelTable {
  id: string;
  /** The connect slug (`modelName`). */
  name: string;
  rate_credits_per_second: number;
  /** 1: in the public catalog and visible to every account; 0: only to accounts granted it. */
  public: number;
  created_at: number;
}

/** Private models an account may use. */
export interface ModelGrantTable {
  account_id: string;
  model_id: string;
}

/**
 * ES256 keys that sign tokens; every coordinator replica reads the same set (and re-reads it at
 * least every few seconds). A row is a key that verifies; retiring a key deletes its row.
 */
export interface SigningKeyTable {
  kid: string;
  /**
   * The private JWK: encrypted (`v1:…`, AES-256-GCM under the operator's secret,
   * coordinator/tokens/signing-key-secret.ts), or plain JSON on SQLite without a secret.
   */
  private_jwk: string;
  public_jwk: string;
  created_at: number;
  /** Set when a newer key takes over signing (a rotation); the key still verifies until retired. */
  retired_at: number | null;
}

/** Every token minted. The JWT carries its id (`jti`); scope and bound set live here. */
export interface TokenTable {
  id: string;
  account_id: string;
  api_key_id: string;
  /** 1: session-scoped (authorization_details given); 0: unscoped. */
  scoped: number;
  /** JSON array of model slugs (`resources.models.match`); null when unscoped. */
  models: string | null;
  /** Size its bound set may reach (sessions bound at minting + created since); null when unscoped. */
  max_sessions: number | null;
  /** The bound set's size: sessions bound at minting plus those created since. Never decreases. */
  bound_sessions: Generated<number>;
  max_session_duration_seconds: number | null;
  created_at: number;
  expires_at: number;
}

/** `resources.sessions.bind`: sessions a token may act on without having created them. */
export interface TokenBindingTable {
  token_id: string;
  session_id: string;
}

export type SessionStatus = 'connecting' | 'waiting' | 'ready' | 'ended';

export interface SessionTable {
  id: string;
  account_id: string;
  model_id: string;
  /** The token that created it (its owner); null when created with an unscoped token's key. */
  token_id: string | null;
  status: SessionStatus;
  created_at: number;
  ready_at: number | null;
  ended_at: number | null;
  end_reason: string | null;
  max_duration_seconds: number;
  /** The model's rate when the session was created. */
  rate_credits_per_second: Generated<number>;
  /** Seconds the meter has charged so far (the meter_ticks rows are the record). */
  billed_seconds: Generated<number>;
  /** The runtime serving it, once assigned. */
  runtime_id: Generated<string | null>;
  /**
   * When its runtime let the slot go (answered the end, ended it itself, or was declared gone);
   * null while the slot is held — an ended session still holds it until then.
   */
  slot_released_at: Generated<number | null>;
  /** The creating request's `Idempotency-Key`, if it sent one: a retry with it gets this session back. */
  idempotency_key: Generated<string | null>;
}

export type GrantKind = 'promotional' | 'purchased';

/** Credits added to an account: a signup or promotional grant, or a purchase. Never updated. */
export interface CreditGrantTable {
  id: string;
  account_id: string;
  kind: GrantKind;
  credits: number;
  /** Purchases only: what was paid, in US cents. */
  paid_cents: number | null;
  created_at: number;
  /** After this the grant's unspent credits are gone (promotional 90 days, purchased 365). */
  expires_at: number;
  /** The sum of this grant's draws (grant_draws), kept in step with them by the ledger. */
  spent: Generated<number>;
  /**
   * Promotional grants: credits asked for that the balance ceiling left out (`credits` is what
   * was granted). 0 for purchases, which are refused rather than cut.
   */
  withheld_credits: Generated<number>;
  /**
   * Purchased grants: credits taken back by refunds (the sum of its `refunds` rows' credits, kept
   * in step with them by the ledger). What is left to spend is `credits − spent − refunded`.
   */
  refunded: Generated<number>;
}

/** `operator`: recorded by `arclight admin buy-credits` (paid outside the coordinator, confirmed at once). */
export type PurchaseKind = 'manual' | 'auto_topup' | 'operator';
export type PurchaseStatus = 'pending' | 'confirmed' | 'failed' | 'refunded';

/**
 * A purchase of credits through the payment provider: created `pending`, then `confirmed` (its
 * grant made in the same transaction) or `failed`; `refunded` once refunds cover what was paid.
 */
export interface PurchaseTable {
  id: string;
  account_id: string;
  kind: PurchaseKind;
  status: PurchaseStatus;
  dollars: number;
  credits: number;
  /** The provider's name (`test`, `stripe`, …). */
  provider: string;
  /** The provider's id of the payment; unique per provider, so one payment confirms one purchase. */
  provider_ref: string | null;
  /** Where the buyer completes a pending payment, when the provider needs that. */
  checkout_url: string | null;
  /** Why the payment failed, as the provider said it. */
  failure: string | null;
  /** `Idempotency-Key` of `POST /platform/purchases`: unique per account. */
  idempotency_key: string | null;
  /** The purchased grant, once confirmed. */
  grant_id: string | null;
  /** US cents refunded so far. */
  refunded_cents: Generated<number>;
  /** Checkouts asked of the provider (retries after an error included). */
  attempts: Generated<number>;
  /** When housekeeping may ask the provider again for a pending purchase it has no answer for. */
  retry_at: number | null;
  created_at: number;
  updated_at: number;
  confirmed_at: number | null;
}

/** A refund of (part of) a confirmed purchase, reported by its provider. Never updated. */
export interface RefundTable {
  id: string;
  purchase_id: string;
  /** The purchased grant the credits were taken from. */
  grant_id: string;
  provider: string;
  /** The provider's id of the refund: unique per provider, so a replayed refund takes nothing twice. */
  provider_ref: string;
  cents: number;
  /** Credits taken off the grant (`credit_grants.refunded`). */
  credits: number;
  /** Credits the refund paid back that had already been spent (or had expired): not taken from anything. */
  unrecovered_credits: number;
  created_at: number;
}

/**
 * One flush of a session's meter: `seconds` billed seconds from second `seq` on (counted from
 * the session's `ready_at`). (session_id, seq) is unique, so a retried or concurrent flush of the
 * same seconds inserts nothing: a second is never charged twice.
 */
export interface MeterTickTable {
  session_id: string;
  seq: number;
  account_id: string;
  seconds: number;
  credits: number;
  created_at: number;
}

/** Which grants paid for a tick (earliest expiry first); `grant_id` null = unpaid (the account ran dry). */
export interface GrantDrawTable {
  session_id: string;
  seq: number;
  grant_id: string | null;
  credits: number;
}

/** A runtime process (one GPU) that registered to serve one model. */
export interface RuntimeTable {
  /** Chosen by the runtime (stable across its restarts if it wants its sessions back). */
  id: string;
  /** Where the coordinator reaches it (relays, session start/stop). */
  url: string;
  model_id: string;
  /** Sessions it can hold at once (one per GPU). */
  slots: number;
  /** Its capabilities document (JSON), served to clients once a session is assigned to it. */
  capabilities: string;
  registered_at: number;
  heartbeat_at: number;
  /** 1 after SIGTERM: no new sessions; live ones run to their end. */
  draining: number;
  /** 1 once it stopped heartbeating (its sessions were ended) or deregistered. */
  gone: number;
}

/** A lease among replicas (coordinator/housekeeping/housekeeper-lease.ts): who holds it, until when. */
export interface LeaseTable {
  name: string;
  /** '' when nobody has held it yet. */
  holder: string;
  expires_at: number;
  acquired_at: number;
}

/**
 * A signed-in account dashboard (coordinator/dashboard/): the cookie's value is a random id stored
 * only as its SHA-256, like API keys. Ends at `expires_at` (absolute), after `idle_ms` without a
 * request, at sign-out, or when the API key it signed in with is revoked.
 */
export interface DashboardSessionTable {
  /** SHA-256 (hex) of the cookie's value. */
  id_hash: string;
  account_id: string;
  /** The API key that signed in; null for an operator's sign-in link. */
  api_key_id: string | null;
  /** `api_key` or `link`. */
  method: string;
  created_at: number;
  /** Absolute end (created_at + 12 h). */
  expires_at: number;
  /** The last request it authenticated (written at most once a minute); idle expiry counts from it. */
  last_seen_at: number;
}

/** An operator-issued, single-use sign-in link (`arclight admin dashboard-link`): its token hashed. */
export interface DashboardLinkTable {
  /** SHA-256 (hex) of the link's token. */
  token_hash: string;
  account_id: string;
  created_at: number;
  expires_at: number;
  /** When it was exchanged for a dashboard session; a used link signs nobody in again. */
  used_at: number | null;
}

export interface CoordinatorDatabase {
  dashboard_sessions: DashboardSessionTable;
  dashboard_links: DashboardLinkTable;
  runtimes: RuntimeTable;
  credit_grants: CreditGrantTable;
  meter_ticks: MeterTickTable;
  grant_draws: GrantDrawTable;
  purchases: PurchaseTable;
  refunds: RefundTable;
  accounts: AccountTable;
  api_keys: ApiKeyTable;
  models: ModelTable;
  model_grants: ModelGrantTable;
  signing_keys: SigningKeyTable;
  tokens: TokenTable;
  token_bindings: TokenBindingTable;
  sessions: SessionTable;
  leases: LeaseTable;
}
