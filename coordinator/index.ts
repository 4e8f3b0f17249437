/**
 * The coordinator: the hosted service's control plane — API keys, tokens, (next) sessions, GPU
 * assignment, limits and billing — over SQLite or PostgreSQL. See docs/coordinator.md.
 */

export { startCoordinator, type Coordinator, type CoordinatorOptions } from './coordinator.ts';
export type { Logger } from '../server-kit/log.ts';
export { DEFAULT_QUOTAS, DEFAULT_SIGNUP_CREDITS, type Account, type AccountQuotas } from './accounts/account-store.ts';
export { API_KEY_PREFIX, type ApiKeyRecord, type IssuedApiKey } from './accounts/api-keys.ts';
export type { CatalogModel } from './models/model-catalog.ts';
export { DEFAULT_PRICING, type PricingSettings } from './pricing/pricing.ts';
export {
  TestPaymentProvider,
  WEBHOOK_SIGNATURE_HEADER,
  WEBHOOK_TOLERANCE_SECONDS,
  parseWebhookEvent,
  signWebhook,
  verifyWebhookSignature,
  type CheckoutRequest,
  type CheckoutResult,
  type PaymentEvent,
  type PaymentProvider,
  type PurchaseKind,
  type TestPaymentProviderOptions,
} from './billing/payment-provider.ts';
export type { AuthenticatedToken } from './tokens/token-service.ts';
