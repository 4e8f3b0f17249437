/**
 * Public pricing (`GET /pricing`): purchase settings and the public catalog's per-second rates.
 * The credit rules (10,000 credits per USD, purchases of 1–1,000 USD, a balance of at most
 * 10,000 USD of credits) are the spec's; an operator may change them per deployment.
 */

import type { PricingResponse } from '../../protocol/coordinator.ts';
import type { CatalogModel } from '../models/model-catalog.ts';

export interface PricingSettings {
  readonly creditsPerDollar: number;
  readonly purchaseMinDollars: number;
  readonly purchaseMaxDollars: number;
  readonly autoTopupMinDollars: number;
  /** Balance ceiling in credits; 0 = no cap. */
  readonly maxAccountCredits: number;
}

export const DEFAULT_PRICING: PricingSettings = {
  creditsPerDollar: 10_000,
  purchaseMinDollars: 1,
  purchaseMaxDollars: 1_000,
  autoTopupMinDollars: 10,
  maxAccountCredits: 10_000 * 10_000,
};

/**
 * `auto_topup.max_threshold_credits`: the highest balance at which an automatic top-up may
 * trigger — the cap minus the smallest top-up, so the top-up always fits under the cap. Absent
 * when there is no cap.
 */
export function maxAutoTopupThreshold(settings: PricingSettings): number | undefined {
  if (settings.maxAccountCredits === 0) return undefined;
  return Math.max(0, settings.maxAccountCredits - settings.autoTopupMinDollars * settings.creditsPerDollar);
}

export function pricingResponse(settings: PricingSettings, models: readonly CatalogModel[]): PricingResponse {
  const threshold = maxAutoTopupThreshold(settings);
  return {
    settings: {
      credits_per_dollar: settings.creditsPerDollar,
      purchase: { min_dollars: settings.purchaseMinDollars, max_dollars: settings.purchaseMaxDollars },
      auto_topup: { min_dollars: settings.autoTopupMinDollars, ...(threshold !== undefined ? { max_threshold_credits: threshold } : {}) },
      max_account_credits: settings.maxAccountCredits,
    },
    models: models.map((m) => ({
      id: m.id,
      name: m.name,
      rate: { amount_per_sec: m.rateCreditsPerSecond, unit: 'credits', denomination: 'second' },
    })),
  };
}
