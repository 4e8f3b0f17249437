/**
 * The platform API: read access to account-level data for servers — the models the account may
 * use, its credit balance and its usage. Authenticated with the API key as bearer (or an unscoped
 * token, which can do what the key can); session-scoped tokens are refused with 403, since they
 * are meant for browsers and must not read account data.
 */

import type { Hono } from 'hono';
import { ArclightError } from '../../protocol/errors.ts';
import type { CreditLedger } from '../billing/credit-ledger.ts';
import { DEFAULT_USAGE_WINDOW_MS, usageReport } from '../billing/usage-report.ts';
import type { ModelCatalog } from '../models/model-catalog.ts';
import type { CoordinatorStorage } from '../storage/database.ts';
import type { BearerAuthenticator } from './bearer-auth.ts';

export interface PlatformRouteServices {
  readonly auth: BearerAuthenticator;
  readonly catalog: ModelCatalog;
  readonly ledger: CreditLedger;
  readonly storage: CoordinatorStorage;
}

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
    const since = sinceParam === undefined ? Date.now() - DEFAULT_USAGE_WINDOW_MS : Number(sinceParam);
    if (!Number.isSafeInteger(since) || since < 0) throw new ArclightError('invalid_request', 'since must be a time in ms since the epoch.', { field: 'since' });
    return c.json(await usageReport(services.storage.db, accountId, since));
  });
}
