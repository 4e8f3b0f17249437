/**
 * Where money comes from: a `PaymentProvider` turns a purchase into a payment and tells the
 * coordinator how it ended — at once (the checkout's answer) or later (a signed webhook). The
 * coordinator owns everything else: bounds, the balance ceiling, the purchase's record, the grant,
 * idempotency (coordinator/billing/purchases.ts). A real provider (Stripe, say) plugs in by
 * implementing this interface; the built-in `TestPaymentProvider` confirms at once, so the whole
 * flow runs offline (tests, local development).
 *
 * Webhooks are Stripe-shaped: the provider signs `<timestamp>.<raw body>` with HMAC-SHA256 under a
 * secret shared with the coordinator and sends `Arclight-Signature: t=<unix seconds>,v1=<hex>`
 * (several `v1=` while a secret is rotated); a signature that is missing, malformed, wrong, or
 * whose timestamp is more than five minutes away from the coordinator's clock is refused — a
 * captured webhook cannot be replayed later, and one replayed within the window changes nothing
 * (the purchase is confirmed once, a refund is taken once: both are keyed by the provider's ids).
 */

import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { ArclightError } from '../../protocol/errors.ts';
import type { PurchaseKind } from '../storage/schema.ts';

export type { PurchaseKind };

/** What the coordinator asks a provider to charge. */
export interface CheckoutRequest {
  /**
   * The coordinator's purchase id: **the idempotency key of the payment**. Asked twice with the
   * same id (a retry after a timeout, a crashed replica's claim picked up by housekeeping), a
   * provider must answer with the same payment, never charge again (Stripe: `Idempotency-Key`).
   * Providers should echo it in their webhooks (Stripe: metadata), so a webhook that arrives
   * before the checkout's answer finds its purchase.
   */
  readonly purchaseId: string;
  readonly accountId: string;
  /** `manual` (a buyer at `POST /platform/purchases`) or `auto_topup` (nobody there: charge the saved method). */
  readonly kind: PurchaseKind;
  /** Whole US dollars (1–1,000 by default). */
  readonly dollars: number;
  /** The same amount in cents, as providers count it. */
  readonly amountCents: number;
  /** The credits it buys. */
  readonly credits: number;
  /** For the buyer's statement: "Arclight credits: 100,000 (10 USD)". */
  readonly description: string;
}

export interface CheckoutResult {
  /** The provider's id for the payment (Stripe: the PaymentIntent id). Unique per provider. */
  readonly providerRef: string;
  /**
   * `confirmed`: paid, the credits are granted now. `pending`: the outcome comes by webhook (the
   * buyer completes `checkoutUrl`, or the provider is still processing). `failed`: declined.
   */
  readonly status: 'confirmed' | 'pending' | 'failed';
  readonly checkoutUrl?: string;
  /** Why it failed, for people (shown on the purchase). */
  readonly failure?: string;
}

/** A verified webhook, in the coordinator's terms. */
export type PaymentEvent =
  | { readonly type: 'payment_succeeded'; readonly eventId: string; readonly providerRef: string; readonly purchaseId?: string }
  | {
      readonly type: 'payment_failed';
      readonly eventId: string;
      readonly providerRef: string;
      readonly purchaseId?: string;
      readonly failure: string;
    }
  | {
      readonly type: 'refund';
      readonly eventId: string;
      /** The refunded payment. */
      readonly providerRef: string;
      /** The provider's id of this refund: a refund is applied once per id. */
      readonly refundRef: string;
      /** This refund's amount (not a running total), in cents. */
      readonly amountCents: number;
    }
  /** Anything else the provider sends (providers send many kinds): acknowledged, ignored. */
  | { readonly type: 'other'; readonly eventId: string; readonly name: string };

export interface PaymentProvider {
  /** Stored on each purchase (`provider`); provider refs are unique per name. */
  readonly name: string;
  /** Starts (and for saved payment methods, usually completes) the payment. Throwing = no answer: the purchase stays pending and is asked again later with the same id. */
  createCheckout(request: CheckoutRequest): Promise<CheckoutResult>;
  /**
   * Checks a webhook's signature over the raw body and reads it. Throws ArclightError
   * `webhook_signature_invalid` when the signature does not verify (`now`: ms since the epoch,
   * the coordinator's clock), `invalid_json` / `invalid_request` when a signed body is not an event.
   */
  verifyWebhook(rawBody: string, header: (name: string) => string | undefined, now: number): PaymentEvent;
}

/** The webhook signature header (Stripe's is `Stripe-Signature`; same format). */
export const WEBHOOK_SIGNATURE_HEADER = 'Arclight-Signature';
/** How far a webhook's signed timestamp may be from the coordinator's clock, either way. */
export const WEBHOOK_TOLERANCE_SECONDS = 300;

function hmacHex(secret: string, timestamp: number, rawBody: string): string {
  return createHmac('sha256', secret).update(`${timestamp}.${rawBody}`, 'utf8').digest('hex');
}

/** `t=<timestamp>,v1=<hex HMAC-SHA256 of "<timestamp>.<rawBody>">`: what a provider sends. */
export function signWebhook(rawBody: string, secret: string, timestampSeconds: number): string {
  return `t=${timestampSeconds},v1=${hmacHex(secret, timestampSeconds, rawBody)}`;
}

const invalidSignature = (message: string) => new ArclightError('webhook_signature_invalid', message, { field: WEBHOOK_SIGNATURE_HEADER });

/**
 * Verifies a `t=…,v1=…` header against any of `secrets` (more than one while rotating), in
 * constant time per candidate; throws `webhook_signature_invalid` saying what is wrong.
 */
export function verifyWebhookSignature(
  rawBody: string,
  header: string | undefined,
  secrets: readonly string[],
  nowMs: number,
  toleranceSeconds = WEBHOOK_TOLERANCE_SECONDS,
): void {
  if (header === undefined || header.trim() === '') throw invalidSignature(`The ${WEBHOOK_SIGNATURE_HEADER} header is missing.`);
  let timestamp: number | undefined;
  const signatures: string[] = [];
  for (const part of header.split(',')) {
    const eq = part.indexOf('=');
    if (eq < 0) throw invalidSignature(`The ${WEBHOOK_SIGNATURE_HEADER} header is malformed (expected t=<unix seconds>,v1=<hex>).`);
    const key = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (key === 't') {
      if (!/^\d{1,12}$/.test(value)) throw invalidSignature('The signature timestamp t must be Unix seconds.');
      timestamp = Number(value);
    } else if (key === 'v1' && /^[0-9a-f]{64}$/i.test(value)) {
      signatures.push(value.toLowerCase());
    }
    // Other schemes (v0, …) are ignored, as Stripe's are.
  }
  if (timestamp === undefined || signatures.length === 0)
    throw invalidSignature(`The ${WEBHOOK_SIGNATURE_HEADER} header needs t=<unix seconds> and at least one v1=<hex SHA-256 HMAC>.`);
  if (Math.abs(nowMs / 1000 - timestamp) > toleranceSeconds) {
    throw invalidSignature(
      `The signature's timestamp is more than ${toleranceSeconds} s from the coordinator's clock (a replayed or delayed webhook).`,
    );
  }
  for (const secret of secrets) {
    const expected = Buffer.from(hmacHex(secret, timestamp, rawBody), 'hex');
    if (signatures.some((s) => timingSafeEqual(Buffer.from(s, 'hex'), expected))) return;
  }
  throw invalidSignature('No signature in the header matches the body.');
}

/**
 * The coordinator's own webhook body (what the test provider sends; a provider without its own
 * format may send it too):
 *
 *   {"id": "evt_…", "type": "payment.succeeded", "data": {"provider_ref": "…", "purchase_id"?: "…"}}
 *   {"id": "evt_…", "type": "payment.failed",    "data": {"provider_ref": "…", "purchase_id"?: "…", "failure"?: "…"}}
 *   {"id": "evt_…", "type": "refund.created",    "data": {"provider_ref": "…", "refund_id": "…", "amount_cents": 500}}
 *
 * Any other `type` is acknowledged and ignored.
 */
export function parseWebhookEvent(rawBody: string): PaymentEvent {
  let body: unknown;
  try {
    body = JSON.parse(rawBody);
  } catch (error) {
    throw new ArclightError('invalid_json', `The webhook body is not valid JSON: ${(error as Error).message}`);
  }
  const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
  const text = (v: unknown, field: string, max = 255): string => {
    if (typeof v !== 'string' || v.length === 0 || v.length > max)
      throw new ArclightError('invalid_request', `${field} must be a string of 1 to ${max} characters.`, { field });
    return v;
  };
  if (!isObject(body))
    throw new ArclightError('invalid_request', 'The webhook body must be a JSON object {id, type, data}.', { field: '' });
  const eventId = text(body['id'], '/id');
  const type = text(body['type'], '/type');
  if (!['payment.succeeded', 'payment.failed', 'refund.created'].includes(type)) return { type: 'other', eventId, name: type };
  const data = body['data'];
  if (!isObject(data)) throw new ArclightError('invalid_request', 'data must be an object.', { field: '/data' });
  const providerRef = text(data['provider_ref'], '/data/provider_ref');
  const purchaseId = data['purchase_id'] === undefined ? undefined : text(data['purchase_id'], '/data/purchase_id');
  if (type === 'payment.succeeded')
    return { type: 'payment_succeeded', eventId, providerRef, ...(purchaseId === undefined ? {} : { purchaseId }) };
  if (type === 'payment.failed') {
    const failure = data['failure'] === undefined ? 'The payment failed.' : text(data['failure'], '/data/failure', 1000);
    return { type: 'payment_failed', eventId, providerRef, failure, ...(purchaseId === undefined ? {} : { purchaseId }) };
  }
  const amountCents = data['amount_cents'];
  if (!Number.isSafeInteger(amountCents) || (amountCents as number) < 1) {
    throw new ArclightError('invalid_request', 'amount_cents must be a positive whole number of cents.', { field: '/data/amount_cents' });
  }
  return {
    type: 'refund',
    eventId,
    providerRef,
    refundRef: text(data['refund_id'], '/data/refund_id'),
    amountCents: amountCents as number,
  };
}

export interface TestPaymentProviderOptions {
  /** Signs and verifies its webhooks; default a random secret (then only `signedEvent` can make one). */
  readonly webhookSecret?: string;
  /** `confirm` (default): paid at once. `pending`: the outcome comes by webhook. `fail`: declined. */
  readonly mode?: 'confirm' | 'pending' | 'fail';
  /** A purchase of exactly this many dollars is declined whatever the mode (default 402); 0 = none. */
  readonly declineDollars?: number;
}

/**
 * The built-in provider: no network, no money. It confirms at once (the whole flow runs offline),
 * or — `mode` — leaves payments pending for a webhook, or declines them; a purchase of
 * `declineDollars` (402 by default, after HTTP's Payment Required) is always declined, so a failed
 * payment can be tried through the API of a running coordinator too. Idempotent by purchase id, as
 * the interface asks: its ref is `test_<purchase id>`. **It grants credits for nothing**: it is
 * for tests and local development, and the coordinator warns when it is on.
 */
export class TestPaymentProvider implements PaymentProvider {
  readonly name = 'test';
  readonly webhookSecret: string;
  /** Switchable while running (tests). */
  mode: 'confirm' | 'pending' | 'fail';
  readonly declineDollars: number;
  /** The checkouts asked of it, oldest first (tests count them); the last 10,000 are kept. */
  readonly checkouts: CheckoutRequest[] = [];

  constructor(options: TestPaymentProviderOptions = {}) {
    this.webhookSecret = options.webhookSecret ?? randomBytes(32).toString('base64url');
    this.mode = options.mode ?? 'confirm';
    this.declineDollars = options.declineDollars ?? 402;
  }

  async createCheckout(request: CheckoutRequest): Promise<CheckoutResult> {
    this.checkouts.push(request);
    if (this.checkouts.length > 10_000) this.checkouts.shift();
    const providerRef = `test_${request.purchaseId}`;
    if (this.mode === 'fail' || request.dollars === this.declineDollars) {
      return { providerRef, status: 'failed', failure: 'card_declined: the test payment provider declined the payment.' };
    }
    if (this.mode === 'pending') return { providerRef, status: 'pending', checkoutUrl: `https://checkout.invalid/test/${providerRef}` };
    return { providerRef, status: 'confirmed' };
  }

  verifyWebhook(rawBody: string, header: (name: string) => string | undefined, now: number): PaymentEvent {
    verifyWebhookSignature(rawBody, header(WEBHOOK_SIGNATURE_HEADER), [this.webhookSecret], now);
    return parseWebhookEvent(rawBody);
  }

  /** A webhook as this provider would send it: the body and its signature header, signed at `nowMs`. */
  signedEvent(
    event: { id?: string; type: string; data: Record<string, unknown> },
    nowMs: number,
  ): { body: string; headers: Record<string, string> } {
    const body = JSON.stringify({ id: event.id ?? `evt_${randomBytes(8).toString('hex')}`, type: event.type, data: event.data });
    return {
      body,
      headers: {
        'content-type': 'application/json',
        [WEBHOOK_SIGNATURE_HEADER]: signWebhook(body, this.webhookSecret, Math.floor(nowMs / 1000)),
      },
    };
  }
}
