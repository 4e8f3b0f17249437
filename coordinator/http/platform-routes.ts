/**
 * The platform API: read access to account-level data for servers — the models the account may
 * use, its credit balance and its usage. Authenticated with the API key as bearer (or an unscoped
 * token, which can do what the key can); session-scoped tokens are refused with 403, since they
 * are meant for browsers and must not read account data.
 */

import type { Hono } from 'hono';
import { ArclightError } from '../../protocol/errors.ts';
import type { CreditLedger } from '../billing/credit-ledger.ts';
import type { ModelCatalog } from '../models/model-catalog.ts';
import type { CoordinatorStorage } from '../storage/database.ts';
import type { BearerAuthenticator } from './bearer-auth.ts';

export interface PlatformRouteServices {
  readonly auth: BearerAuthenticator;
  readonly catalog: ModelCatalog;
  readonly ledger: CreditLedger;
  readonly storage: CoordinatorStorage;
}

/** Usage rows per request, newest first. */
const MAX_USAGE_ROWS = 1000;

export function registerPlatformRoutes(app: Hono, services: PlatformRouteServices): void {
  const accountOf = async (c: Parameters<BearerAuthenticator['actor']>[0]): Promise<string> => {
    const actor = await services.auth.actor(c, { allowApiKey: true });
    if (actor.kind === 'token' && actor.token.scoped) {
      throw new ArclightError('forbidden', 'Session tokens are not accepted on the platform API; use the API key from a server.');
    }
    return actor.kind === 'token' ? actor.token.accountId : actor.accountId;
  };

  app.get('/platform/models', async (c) => {
    const accountId = await accountOf(c);
    const models = await services.catalog.listVisible(accountId);
    return c.json({
      models: models.map((m) => ({ id: m.id, name: m.name, public: m.public, rate: { amount_per_sec: m.rateCreditsPerSecond, unit: 'credits', denomination: 'second' } })),
    });
  });

  app.get('/platform/balance', async (c) => {
    const balance = await services.ledger.balance(await accountOf(c));
    return c.json({
      credits: balance.credits,
      grants: balance.grants.map((g) => ({ id: g.id, kind: g.kind, credits: g.credits, remaining: g.remaining, expires_at: g.expiresAt })),
    });
  });

  /** `?since=<ms>` (default: 30 days ago): sessions created since, with seconds and credits charged. */
  app.get('/platform/usage', async (c) => {
    const accountId = await accountOf(c);
    const sinceParam = c.req.query('since');
    const since = sinceParam === undefined ? Date.now() - 30 * 86_400_000 : Number(sinceParam);
    if (!Number.isSafeInteger(since) || since < 0) throw new ArclightError('invalid_request', 'since must be a time in ms since the epoch.', { field: 'since' });
    const { db } = services.storage;
    const rows = await db
      .selectFrom('sessions as s')
      .innerJoin('models as m', 'm.id', 's.model_id')
      .leftJoin('meter_ticks as t', 't.session_id', 's.id')
      .select((eb) => [
        's.id',
        'm.name',
        's.status',
        's.created_at',
        's.ready_at',
        's.ended_at',
        eb.fn.sum<number | string | null>('t.seconds').as('seconds'),
        eb.fn.sum<number | string | null>('t.credits').as('credits'),
      ])
      .where('s.account_id', '=', accountId)
      .where('s.created_at', '>=', since)
      .groupBy(['s.id', 'm.name', 's.status', 's.created_at', 's.ready_at', 's.ended_at'])
      .orderBy('s.created_at', 'desc')
      .limit(MAX_USAGE_ROWS)
      .execute();
    const sessions = rows.map((r) => ({
      session_id: r.id,
      model: r.name,
      status: r.status,
      created_at: r.created_at,
      ready_at: r.ready_at,
      ended_at: r.ended_at,
      billed_seconds: Number(r.seconds ?? 0),
      credits: Number(r.credits ?? 0),
    }));
    return c.json({
      since,
      sessions,
      total: { billed_seconds: sessions.reduce((s, r) => s + r.billed_seconds, 0), credits: sessions.reduce((s, r) => s + r.credits, 0) },
    });
  });
}
