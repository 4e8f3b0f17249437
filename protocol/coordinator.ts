/**
 * REST bodies of the coordinator (the hosted service): `POST /tokens`, `GET /pricing`.
 * docs/coordinator.md describes the rules in words.
 */

/**
 * Header carrying the deployment's shared runtime secret, on every call between a runtime and
 * its coordinator (registration, heartbeats, session start/end, relayed transport calls).
 */
export const RUNTIME_SECRET_HEADER = 'Arclight-Runtime-Secret';

/** Header carrying the API key on `POST /tokens`. */
export const API_KEY_HEADER = 'Service-API-Key';

/** `expires_after` when omitted, seconds. */
export const DEFAULT_TOKEN_LIFETIME_SECONDS = 3600;
/** `expires_after` at or above this is clamped to it (silently: the response is still 200). */
export const MAX_TOKEN_LIFETIME_SECONDS = 21_600;
/** `constraints.max_sessions` bounds and default. */
export const MAX_SESSIONS_RANGE = { min: 1, max: 500, default: 5 } as const;
/** `constraints.max_session_duration_seconds` bounds. */
export const SESSION_DURATION_RANGE = { min: 1, max: 86_400 } as const;

/**
 * What every client of a session is told when it reaches its maximum duration (counted from
 * `ready`). One text for both enforcers — the coordinator's housekeeping and a hosted runtime's
 * own deadline — so a client sees one behaviour whichever of them gets there first.
 */
export function maxDurationReason(maxDurationSeconds: number): string {
  return `The session reached its maximum duration (${maxDurationSeconds} s).`;
}

/** One RFC 9396 authorization_details entry; `session` is the only type. */
export interface SessionAuthorizationDetail {
  readonly type: 'session';
  readonly resources: {
    readonly models: { readonly match: readonly string[] };
    readonly sessions?: { readonly bind: readonly string[] };
  };
  readonly constraints?: {
    readonly max_sessions?: number;
    readonly max_session_duration_seconds?: number;
  };
}

export interface TokenRequest {
  /** One entry, or an array of one (RFC 9396 form). Omitted: an unscoped token. */
  readonly authorization_details?: SessionAuthorizationDetail | readonly SessionAuthorizationDetail[];
  /** Seconds; default 3600; values ≥ 21600 are clamped to 21600. */
  readonly expires_after?: number;
}

/** The echoed entry: defaults resolved, `max_sessions` always present. */
export interface ResolvedSessionAuthorizationDetail extends SessionAuthorizationDetail {
  readonly constraints: {
    readonly max_sessions: number;
    readonly max_session_duration_seconds?: number;
  };
}

export interface TokenResponse {
  /** The JWT to send as `Authorization: Bearer <token>`. */
  readonly token: string;
  readonly token_type: 'Bearer';
  /** Unix epoch seconds: the real expiry (read it: clamping is silent). */
  readonly expires_at: number;
  /** Always an array (RFC 9396 form), whichever form the request used; absent for an unscoped token. */
  readonly authorization_details?: readonly ResolvedSessionAuthorizationDetail[];
}

export interface PricingResponse {
  readonly settings: {
    readonly credits_per_dollar: number;
    readonly purchase: { readonly min_dollars: number; readonly max_dollars: number };
    readonly auto_topup: { readonly min_dollars: number; readonly max_threshold_credits?: number };
    /** 0: no cap. */
    readonly max_account_credits: number;
  };
  readonly models?: ReadonlyArray<{
    readonly id: string;
    readonly name: string;
    readonly rate: { readonly amount_per_sec: number; readonly unit: 'credits'; readonly denomination: 'second' };
  }>;
}

/** `POST /platform/purchases` (header `Idempotency-Key` optional): whole US dollars, within `settings.purchase`. */
export interface PurchaseRequest {
  readonly dollars: number;
}

/**
 * `POST /platform/dashboard/sign-in` and `GET /platform/dashboard/session`: who is signed in to the
 * account dashboard (the session itself is the `arclight_dashboard` cookie, HttpOnly).
 */
export interface DashboardSessionBody {
  readonly account: { readonly id: string; readonly name: string };
  /** `api_key`: signed in with an API key (`key_id`); `link`: with an operator's sign-in link. */
  readonly method: 'api_key' | 'link';
  readonly key_id: string | null;
  /** Milliseconds since the epoch: when it began, when it ends at the latest, and when it ends unless used. */
  readonly created_at: number;
  readonly expires_at: number;
  readonly idle_expires_at: number;
  /** What every change made with the cookie must carry in the `X-Arclight-CSRF` header. */
  readonly csrf_token: string;
}

/** A purchase of credits, as the platform API shows it (`/platform/purchases…`). */
export interface PurchaseBody {
  readonly id: string;
  /**
   * `manual`: bought through `POST /platform/purchases`; `auto_topup`: made by the automatic top-up;
   * `operator`: recorded by an operator (`arclight admin buy-credits`, paid outside the coordinator).
   */
  readonly kind: 'manual' | 'auto_topup' | 'operator';
  /** `pending` → `confirmed` (credits granted) or `failed`; `refunded` once refunds cover what was paid. */
  readonly status: 'pending' | 'confirmed' | 'failed' | 'refunded';
  readonly dollars: number;
  readonly credits: number;
  /** The payment provider's name, and its id for the payment once it gave one. */
  readonly provider: string;
  readonly provider_ref: string | null;
  /** Where the buyer completes a pending payment, when the provider needs that. */
  readonly checkout_url: string | null;
  /** Why the payment failed. */
  readonly failure: string | null;
  /** The purchased grant (see `GET /platform/balance`), once confirmed. */
  readonly grant_id: string | null;
  readonly refunded_cents: number;
  /** Milliseconds since the epoch. */
  readonly created_at: number;
  readonly updated_at: number;
  readonly confirmed_at: number | null;
}

/** `PUT /platform/auto-topup`: both fields required. */
export interface AutoTopupRequest {
  /** Top up when a charge leaves the balance below this many credits (1 to `settings.auto_topup.max_threshold_credits`). */
  readonly threshold_credits: number;
  /** Whole US dollars per top-up: at least `settings.auto_topup.min_dollars`, at most `settings.purchase.max_dollars`. */
  readonly amount_dollars: number;
}

/** `GET/PUT/DELETE /platform/auto-topup`. */
export interface AutoTopupBody {
  readonly enabled: boolean;
  readonly threshold_credits: number | null;
  readonly amount_dollars: number | null;
  /**
   * True: the next charge that leaves the balance below the threshold makes a top-up. False once
   * one was made (or tried) — until credits bring the balance back to the threshold, or the
   * settings are saved again.
   */
  readonly armed: boolean;
  readonly updated_at: number | null;
  /** The account's latest automatic top-up, whatever its status (a failed one says why). */
  readonly last_topup: PurchaseBody | null;
}
