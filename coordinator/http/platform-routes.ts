/**
 * The platform API: account-level data and management for servers (and the account dashboard,
 * which uses nothing else) — the account and its quotas, the models it may use, its open
 * sessions, its credit balance and usage, its purchases and automatic top-up, and its API keys.
 * Authenticated with the API key as bearer (or an unscoped token, which can do what the key can),
 * or — for the account dashboard's page — the dashboard session cookie, with its CSRF defence on
 * every change (coordinator/dashboard/); session-scoped tokens are refused with 403, since they are
 * meant for browsers and must not read account data. The one exception is the payment provider's
 * webhook, which carries a signature instead of credentials.
 *
 * Just over ~400 lines: every /platform route in one place, as app.ts wires them; each is a screen.
 */

import type { Context, Hono } from 'hono';
import { ArclightError } from '../../protocol/errors.ts';
import { readBodyText } from '../../server-kit/body-limit.ts';
import { parseApiKeyName, type ApiKeyRecord, type ApiKeyStore } from '../accounts/api-keys.ts';
import type { CreditLedger } from '../billing/credit-ledger.ts';
import { MAX_PURCHASES_PAGE, type PurchaseService } from '../billing/purchases.ts';
import { DEFAULT_USAGE_WINDOW_MS, usageReport } from '../billing/usage-report.ts';
import type { ModelCatalog } from '../models/model-catalog.ts';
import type { DashboardAuth } from '../dashboard/dashboard-auth.ts';
import type { SessionLifecycle } from '../sessions/session-lifecycle.ts';
import type { CoordinatorStorage } from '../storage/database.ts';
import type { BearerAuthenticator } from './bearer-auth.ts';
import { MAX_BODY_BYTES, readJson } from './request-body.ts';

/** Open sessions listed by `GET /platform/sessions` (an account's concurrency quota is usually far lower). */
export const MAX_OPEN_SESSIONS_LISTED = 1000;
/** Longest end reason kept, as on `DELETE /sessions/{id}`. */
const MAX_END_REASON_LENGTH = 256;
/** `Idempotency-Key`, as on `POST /sessions`. */
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

export interface PlatformRouteServices {
  readonly auth: BearerAuthenticator;
  /** The dashboard cookie: accepted wherever the API key is, when no Authorization header is sent. */
  readonly dashboard: DashboardAuth;
  readonly apiKeys: ApiKeyStore;
  readonly catalog: ModelCatalog;
  readonly ledger: CreditLedger;
  readonly purchases: PurchaseService;
  /** The payment provider's name, or undefined when purchases are off. */
  readonly paymentProvider: string | undefined;
  readonly storage: CoordinatorStorage;
  /** Ends sessions (`DELETE /platform/sessions/{id}`). */
  readonly lifecycle: SessionLifecycle;
  /** Milliseconds since the epoch. */
  readonly now: () => number;
}

/** Who calls: the account, and the API key presented or the one that minted the token presented. */
export interface PlatformCaller {
  readonly accountId: string;
  /** The key presented, or that minted the token, or that signed the dashboard session in (null: a sign-in link). */
  readonly keyId: string | null;
  /** How: the API key itself as bearer, an unscoped token, or the dashboard cookie. */
  readonly via: 'api_key' | 'token' | 'dashboard';
}

/** A key as the platform API shows it: never the secret, nor its hash. */
export interface ApiKeyBody {
  readonly id: string;
  readonly name: string | null;
  readonly prefix: string;
  readonly status: 'active' | 'revoked';
  readonly created_at: number;
  readonly revoked_at: number | null;
  /**
   * When the tokens this key minted stopped working: set by a revocation (they stop with the key),
   * null for an active or a rotated key (a rotation leaves them until they expire, up to 6 h).
   */
  readonly tokens_revoked_at: number | null;
  /** The key this request was made with (or whose token made it). */
  readonly current: boolean;
}

function keyBody(record: ApiKeyRecord, caller: PlatformCaller): ApiKeyBody {
  return {
    id: record.id,
    name: record.name,
    prefix: record.prefix,
    status: record.revokedAt === null ? 'active' : 'revoked',
    created_at: record.createdAt,
    revoked_at: record.revokedAt,
    tokens_revoked_at: record.tokensRevokedAt,
    current: record.id === caller.keyId,
  };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A body that must be a JSON object with at most `allowed` fields (an empty body reads as `{}`). */
export async function objectBody(c: Context, allowed: readonly string[]): Promise<Record<string, unknown>> {
  const body = await readJson(c);
  if (!isObject(body))
    throw new ArclightError(
      'invalid_request',
      `The body must be a JSON object${allowed.length ? `: {${allowed.map((f) => `${f}?`).join(', ')}}` : ' without fields, or empty'}.`,
      { field: '' },
    );
  for (const field of Object.keys(body)) {
    if (!allowed.includes(field))
      throw new ArclightError('invalid_request', `Unknown field "${field}"${allowed.length ? ` (accepted: ${allowed.join(', ')})` : ''}.`, {
        field: `/${field.replace(/~/g, '~0').replace(/\//g, '~1')}`,
      });
  }
  return body;
}

/** A `?name=` query parameter as a time in ms since the epoch, or undefined when absent. */
function timeParam(c: Context, name: string): number | undefined {
  const text = c.req.query(name);
  if (text === undefined) return undefined;
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < 0)
    throw new ArclightError('invalid_request', `${name} must be a time in ms since the epoch.`, { field: name });
  return value;
}

/** A `?name=` whole number in [min, max], or undefined when absent. */
function intParam(c: Context, name: string, min: number, max: number): number | undefined {
  const text = c.req.query(name);
  if (text === undefined) return undefined;
  const value = Number(text);
  if (!/^\d{1,9}$/.test(text) || value < min || value > max)
    throw new ArclightError('invalid_request', `${name} must be a whole number from ${min} to ${max}.`, { field: name });
  return value;
}

export function registerPlatformRoutes(app: Hono, services: PlatformRouteServices): void {
  const { apiKeys, purchases } = services;

  const callerOf = async (c: Context): Promise<PlatformCaller> => {
    // The dashboard's page: its cookie, when no Authorization header is sent (a server's key wins).
    if (c.req.header('authorization') === undefined) {
      const cookie = await services.dashboard.caller(c);
      if (cookie) return { accountId: cookie.session.accountId, keyId: cookie.session.apiKeyId, via: 'dashboard' };
    }
    const actor = await services.auth.actor(c, { allowApiKey: true });
    if (actor.kind === 'api_key') return { accountId: actor.accountId, keyId: actor.keyId, via: 'api_key' };
    if (actor.token.scoped)
      throw new ArclightError('forbidden', 'Session tokens are not accepted on the platform API; use the API key from a server.');
    return { accountId: actor.token.accountId, keyId: actor.token.apiKeyId, via: 'token' };
  };
  const accountOf = async (c: Context): Promise<string> => (await callerOf(c)).accountId;

  /**
   * Key management takes the API key, or an unscoped token only while the key that minted it is
   * active: revoking a leaked key must also stop tokens minted with it from issuing new keys (they
   * keep their other powers until they expire, as after any rotation).
   */
  const keyManager = async (c: Context): Promise<PlatformCaller> => {
    const caller = await callerOf(c);
    if (caller.via === 'token' && caller.keyId !== null && !(await apiKeys.isActive(caller.keyId))) {
      throw new ArclightError(
        'unauthorized',
        'The API key this token was minted with has been revoked or rotated; managing keys needs an active API key or a token minted with one.',
      );
    }
    return caller;
  };

  /** Spending money and changing how it is spent: like key management (an active key, or a token minted by one). */
  const accountManager = keyManager;

  app.get('/platform/account', async (c) => {
    const accountId = await accountOf(c);
    const db = services.storage.db;
    const account = await db.selectFrom('accounts').selectAll().where('id', '=', accountId).executeTakeFirstOrThrow();
    const open = await db
      .selectFrom('sessions')
      .select((eb) => eb.fn.countAll<number | string>().as('n'))
      .where('account_id', '=', accountId)
      .where('status', '!=', 'ended')
      .executeTakeFirstOrThrow();
    return c.json({
      id: account.id,
      name: account.name,
      created_at: Number(account.created_at),
      quotas: {
        concurrent_sessions: Number(account.concurrent_sessions),
        sessions_per_minute: Number(account.sessions_per_minute),
        max_session_duration_seconds: Number(account.max_session_duration_seconds),
        monthly_credit_cap: Number(account.monthly_credit_cap),
      },
      open_sessions: Number(open.n),
      payment_provider: services.paymentProvider ?? null,
    });
  });

  /** Open sessions (connecting, waiting, ready), newest first; end one with `DELETE /sessions/{id}` and the API key. */
  app.get('/platform/sessions', async (c) => {
    const accountId = await accountOf(c);
    const rows = await services.storage.db
      .selectFrom('sessions as s')
      .innerJoin('models as m', 'm.id', 's.model_id')
      .leftJoin('tokens as k', 'k.id', 's.token_id')
      .select([
        's.id',
        'm.name',
        'k.api_key_id',
        's.status',
        's.created_at',
        's.ready_at',
        's.max_duration_seconds',
        's.billed_seconds',
        's.rate_credits_per_second',
      ])
      .where('s.account_id', '=', accountId)
      .where('s.status', '!=', 'ended')
      .orderBy('s.created_at', 'desc')
      .orderBy('s.id')
      .limit(MAX_OPEN_SESSIONS_LISTED + 1)
      .execute();
    return c.json({
      sessions: rows.slice(0, MAX_OPEN_SESSIONS_LISTED).map((r) => ({
        session_id: r.id,
        model: r.name,
        key_id: r.api_key_id,
        status: r.status,
        created_at: Number(r.created_at),
        ready_at: r.ready_at === null ? null : Number(r.ready_at),
        max_duration_seconds: Number(r.max_duration_seconds),
        billed_seconds: Number(r.billed_seconds),
        rate: { amount_per_sec: Number(r.rate_credits_per_second), unit: 'credits', denomination: 'second' },
      })),
      truncated: rows.length > MAX_OPEN_SESSIONS_LISTED,
    });
  });

  /**
   * Ends one of the account's sessions, as `DELETE /sessions/{id}` with the API key does — here
   * with the platform API's credentials (the dashboard's cookie included). Unknown and other
   * accounts' ids: 404 `session_not_found`. An ended session answers as it is (idempotent).
   */
  app.delete('/platform/sessions/:id', async (c) => {
    const caller = await accountManager(c);
    const body = await objectBody(c, ['reason']);
    const reason = body['reason'];
    if (reason !== undefined && (typeof reason !== 'string' || reason.length === 0 || reason.length > MAX_END_REASON_LENGTH)) {
      throw new ArclightError('invalid_request', `reason must be a string of 1 to ${MAX_END_REASON_LENGTH} characters.`, {
        field: '/reason',
      });
    }
    const id = c.req.param('id');
    const db = services.storage.db;
    const owned =
      id.length > 128
        ? undefined
        : await db
            .selectFrom('sessions')
            .select(['id', 'status'])
            .where('id', '=', id)
            .where('account_id', '=', caller.accountId)
            .executeTakeFirst();
    if (!owned) throw new ArclightError('session_not_found', 'This account has no session with that id.');
    if (owned.status !== 'ended')
      await services.lifecycle.end(owned.id, reason ?? 'The session was ended from the account dashboard or the platform API.');
    const row = await db
      .selectFrom('sessions as s')
      .innerJoin('models as m', 'm.id', 's.model_id')
      .select(['s.id', 'm.name', 's.status', 's.created_at', 's.ready_at', 's.ended_at', 's.end_reason', 's.billed_seconds'])
      .where('s.id', '=', owned.id)
      .executeTakeFirstOrThrow();
    return c.json({
      session_id: row.id,
      model: row.name,
      status: row.status,
      created_at: Number(row.created_at),
      ready_at: row.ready_at === null ? null : Number(row.ready_at),
      ended_at: row.ended_at === null ? null : Number(row.ended_at),
      end_reason: row.end_reason,
      billed_seconds: Number(row.billed_seconds),
    });
  });

  app.get('/platform/models', async (c) => {
    const accountId = await accountOf(c);
    const models = await services.catalog.listVisible(accountId);
    return c.json({
      models: models.map((m) => ({
        id: m.id,
        name: m.name,
        public: m.public,
        rate: { amount_per_sec: m.rateCreditsPerSecond, unit: 'credits', denomination: 'second' },
      })),
    });
  });

  app.get('/platform/balance', async (c) => {
    const balance = await services.ledger.balance(await accountOf(c));
    return c.json({
      credits: balance.credits,
      grants: balance.grants.map((g) => ({ id: g.id, kind: g.kind, credits: g.credits, remaining: g.remaining, expires_at: g.expiresAt })),
    });
  });

  /**
   * `?since=<ms>` (default: 30 days ago), `?until=<ms>` (exclusive), `?key_id=<id>`: sessions
   * created in the window, with seconds and credits charged and the key that created them; the
   * totals; and this month's spend against the billing cap.
   */
  app.get('/platform/usage', async (c) => {
    const accountId = await accountOf(c);
    const since = timeParam(c, 'since') ?? services.now() - DEFAULT_USAGE_WINDOW_MS;
    const until = timeParam(c, 'until');
    if (until !== undefined && until <= since)
      throw new ArclightError('invalid_request', 'until must be later than since.', { field: 'until' });
    const keyId = c.req.query('key_id');
    if (keyId !== undefined && !(await apiKeys.getOwned(accountId, keyId))) {
      throw new ArclightError('api_key_not_found', 'This account has no API key with that id.', { field: 'key_id' });
    }
    const report = await usageReport(services.storage.db, accountId, since, {
      ...(until === undefined ? {} : { until }),
      ...(keyId === undefined ? {} : { keyId }),
    });
    const account = await services.storage.db
      .selectFrom('accounts')
      .select('monthly_credit_cap')
      .where('id', '=', accountId)
      .executeTakeFirst();
    return c.json({
      ...report,
      month: { spent_credits: await services.ledger.spentThisMonth(accountId), cap_credits: Number(account?.monthly_credit_cap ?? 0) },
    });
  });

  // Purchases and automatic top-up (docs/coordinator.md "Purchases and automatic top-up").
  app.post('/platform/purchases', async (c) => {
    const caller = await accountManager(c);
    const header = c.req.header('idempotency-key');
    if (header !== undefined && !IDEMPOTENCY_KEY.test(header)) {
      throw new ArclightError('invalid_request', 'Idempotency-Key must be 1–255 printable ASCII characters without spaces.', {
        field: 'Idempotency-Key',
      });
    }
    const body = await objectBody(c, ['dollars']);
    if (body['dollars'] === undefined)
      throw new ArclightError('invalid_request', 'dollars (whole US dollars) is required.', { field: '/dollars' });
    const { purchase } = await purchases.create(caller.accountId, body['dollars'], header);
    if (purchase.status === 'failed') {
      throw new ArclightError(
        'payment_failed',
        `The payment failed: ${purchase.failure ?? 'declined'} (purchase ${purchase.id}; nothing was granted).`,
      );
    }
    return c.json(purchase, purchase.status === 'pending' ? 202 : 200);
  });

  app.get('/platform/purchases', async (c) => {
    const accountId = await accountOf(c);
    const limit = intParam(c, 'limit', 1, MAX_PURCHASES_PAGE);
    const cursor = c.req.query('cursor');
    return c.json(
      await purchases.list(accountId, { ...(limit === undefined ? {} : { limit }), ...(cursor === undefined ? {} : { cursor }) }),
    );
  });

  app.get('/platform/purchases/:id', async (c) => c.json(await purchases.get(await accountOf(c), c.req.param('id'))));

  app.get('/platform/auto-topup', async (c) => c.json(await purchases.autoTopup(await accountOf(c))));

  app.put('/platform/auto-topup', async (c) => {
    const caller = await accountManager(c);
    const body = await objectBody(c, ['threshold_credits', 'amount_dollars']);
    return c.json(await purchases.setAutoTopup(caller.accountId, body['threshold_credits'], body['amount_dollars']));
  });

  app.delete('/platform/auto-topup', async (c) => c.json(await purchases.clearAutoTopup((await accountManager(c)).accountId)));

  /** The payment provider's webhook: no credentials, a signature over the raw body instead. */
  app.post('/platform/payments/webhook', async (c) => {
    const raw = await readBodyText(c.req.raw, MAX_BODY_BYTES);
    const { outcome, event, purchase } = await purchases.handleWebhook(raw, (name) => c.req.header(name));
    return c.json({ received: true, event_id: event.eventId, outcome, purchase_id: purchase?.id ?? null });
  });

  // API keys (docs/coordinator.md "Keys"). Unknown and foreign ids are the same 404.
  app.get('/platform/keys', async (c) => {
    const caller = await keyManager(c);
    return c.json({ keys: (await apiKeys.list(caller.accountId)).map((k) => keyBody(k, caller)) });
  });

  app.post('/platform/keys', async (c) => {
    const caller = await keyManager(c);
    const name = parseApiKeyName((await objectBody(c, ['name']))['name']);
    const issued = await apiKeys.createOwned(caller.accountId, name, services.now());
    c.header('Cache-Control', 'no-store');
    return c.json({ key: issued.key, ...keyBody(issued.record, caller) }, 201);
  });

  app.post('/platform/keys/:id/rotate', async (c) => {
    const caller = await keyManager(c);
    await objectBody(c, []);
    const rotated = await apiKeys.rotateOwned(caller.accountId, c.req.param('id'), services.now());
    c.header('Cache-Control', 'no-store');
    return c.json({ key: rotated.key, ...keyBody(rotated.record, caller), replaces: rotated.replaces }, 201);
  });

  app.delete('/platform/keys/:id', async (c) => {
    const caller = await keyManager(c);
    return c.json(keyBody(await apiKeys.revokeOwned(caller.accountId, c.req.param('id'), services.now()), caller));
  });
}
