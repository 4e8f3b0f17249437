/**
 * The error taxonomy shared by every Arclight wire: HTTP bodies and data-channel failures.
 *
 * A code is stable once released: clients branch on it. The message is for people and may
 * change. Each code has one HTTP status (when it travels over HTTP) and one `retryable` verdict.
 * docs/errors.md lists them with what a client should do.
 */

export const ERROR_CODES = {
  // Request shape
  invalid_json: { status: 400, retryable: false, summary: 'The body is not valid JSON.' },
  invalid_request: { status: 400, retryable: false, summary: 'The body or a parameter breaks the schema.' },
  payload_too_large: { status: 413, retryable: false, summary: 'The body or message exceeds the size limit.' },
  unsupported_media_type: { status: 415, retryable: false, summary: 'The file type is not accepted here.' },
  url_expired: { status: 403, retryable: false, summary: 'A presigned URL has expired; request a new one.' },
  not_found: { status: 404, retryable: false, summary: 'No such route.' },
  method_not_allowed: { status: 405, retryable: false, summary: 'The route exists but not with this method.' },
  unsupported_version: { status: 426, retryable: false, summary: 'The client protocol version is older than the server accepts.' },
  version_not_implemented: {
    status: 501,
    retryable: false,
    summary: 'The client asks for a protocol version newer than the server implements.',
  },
  // Sessions and connections
  session_not_found: { status: 404, retryable: false, summary: 'No open session has this id.' },
  session_conflict: { status: 409, retryable: true, summary: 'A session is already open with live connections on this runtime.' },
  session_ended: { status: 410, retryable: false, summary: 'The session has ended.' },
  connection_not_found: { status: 404, retryable: false, summary: 'No connection with this id is registered for the session.' },
  connection_closed: { status: 410, retryable: false, summary: 'The connection was closed for good; register a new one.' },
  invalid_sdp: { status: 400, retryable: false, summary: 'The SDP offer could not be parsed or negotiated.' },
  model_not_ready: { status: 503, retryable: true, summary: 'The model is still loading or failed to load.' },
  model_load_failed: {
    status: 503,
    retryable: true,
    summary: "The model's module failed to import, its definition is invalid, or its load() threw (arclight dev shows where).",
  },
  // Credentials and permissions (the coordinator)
  unauthorized: { status: 401, retryable: false, summary: 'No valid API key or token was presented.' },
  token_expired: { status: 401, retryable: false, summary: 'The token has expired; mint a new one.' },
  token_revoked: {
    status: 401,
    retryable: false,
    summary: 'The API key that minted the token was revoked; mint a new token with an active key.',
  },
  forbidden: { status: 403, retryable: false, summary: 'The credentials do not allow this (a model, session or API outside their scope).' },
  insufficient_credits: { status: 402, retryable: false, summary: 'The account is out of credits.' },
  billing_cap_reached: { status: 402, retryable: false, summary: 'The account has spent its monthly billing cap.' },
  token_exhausted: { status: 403, retryable: false, summary: 'The token has created as many sessions as its max_sessions allows.' },
  too_many_sessions: { status: 429, retryable: true, summary: 'The account has as many sessions open as its concurrency quota allows.' },
  session_rate_limited: {
    status: 429,
    retryable: true,
    summary: 'The account created too many sessions of this model in the last minute.',
  },
  idempotency_conflict: {
    status: 409,
    retryable: false,
    summary: 'The Idempotency-Key was already used for another request (another token or model; another purchase amount).',
  },
  api_key_not_found: {
    status: 404,
    retryable: false,
    summary: "The account has no API key with this id (unknown and other accounts' ids alike).",
  },
  api_key_revoked: { status: 409, retryable: false, summary: 'The API key is revoked; a revoked key cannot be rotated.' },
  last_api_key: { status: 409, retryable: false, summary: "Revoking the account's only active API key would lock it out of the API." },
  too_many_api_keys: { status: 409, retryable: false, summary: 'The account holds as many active API keys as it may.' },
  // Purchases and automatic top-up (the coordinator)
  payment_failed: { status: 402, retryable: false, summary: 'The payment provider declined or failed the payment; nothing was granted.' },
  balance_ceiling_exceeded: {
    status: 409,
    retryable: false,
    summary: "The purchase would take the balance past the account's ceiling (max_account_credits).",
  },
  purchase_not_found: {
    status: 404,
    retryable: false,
    summary: "The account has no purchase with this id (unknown and other accounts' ids alike).",
  },
  payments_not_configured: {
    status: 501,
    retryable: false,
    summary: 'This coordinator has no payment provider: purchases and automatic top-up are off.',
  },
  webhook_signature_invalid: {
    status: 400,
    retryable: false,
    summary: "A payment webhook's signature is missing, malformed, wrong or outside the tolerance window.",
  },
  // The account dashboard's sign-in (the coordinator)
  sign_in_link_invalid: {
    status: 401,
    retryable: false,
    summary: 'A dashboard sign-in link was used already, has expired or was never issued.',
  },
  csrf_check_failed: {
    status: 403,
    retryable: false,
    summary:
      "A state-changing request authenticated by the dashboard cookie lacks the session's X-Arclight-CSRF header or comes from another site.",
  },
  // Data-channel commands
  invalid_message: { status: 400, retryable: false, summary: 'A data-channel message is not a valid envelope.' },
  message_too_large: { status: 413, retryable: false, summary: 'A data-channel message exceeds the size limit.' },
  unknown_command: { status: 404, retryable: false, summary: 'The model has no command with this name.' },
  invalid_params: { status: 422, retryable: false, summary: 'Command parameters break the command schema.' },
  unknown_track: { status: 404, retryable: false, summary: 'The model has no track with this name and direction.' },
  track_busy: { status: 409, retryable: true, summary: 'Another connection publishes this input track.' },
  not_ready: { status: 409, retryable: true, summary: 'The operation needs status ready.' },
  recording_error: {
    status: 409,
    retryable: true,
    summary: 'A clip or recording could not be made (invalid input, nothing recorded, timeout, disconnection).',
  },
  recording_gone: {
    status: 410,
    retryable: false,
    summary: 'The recording is no longer kept (more than five minutes after its session ended).',
  },
  logs_gone: {
    status: 410,
    retryable: false,
    summary: "The session's log is no longer kept (more than five minutes after its session ended).",
  },
  moderation_rejected: {
    status: 422,
    retryable: false,
    summary: "The runtime's moderator refused the command's text; the handler did not run.",
  },
  // Client-side
  unsupported: { status: 501, retryable: false, summary: 'This client or platform lacks a feature the operation needs.' },
  timeout: { status: 504, retryable: true, summary: 'No answer arrived in time (a command reply, an SDP answer, the connection).' },
  connection_failed: { status: 502, retryable: true, summary: 'The WebRTC connection could not be established or was lost.' },
  payment_required: {
    status: 402,
    retryable: false,
    summary: 'Client side: an HTTP 402 whose body names no code (e.g. from a proxy); the cause is unknown.',
  },
  rate_limited: {
    status: 429,
    retryable: true,
    summary: 'Client side: an HTTP 429 whose body names no code (e.g. from a proxy); Retry-After, when sent, says when to retry.',
  },
  // Everything else
  unavailable: { status: 503, retryable: true, summary: 'A dependency is down (the coordinator cannot reach its database).' },
  internal_error: { status: 500, retryable: true, summary: 'An unexpected failure; details are in the server log only.' },
} as const satisfies Record<string, { status: number; retryable: boolean; summary: string }>;

/** A code defined by Arclight. Models may add their own codes through `CommandError`. */
export type ErrorCode = keyof typeof ERROR_CODES;

/**
 * Codes of warnings: conditions an app should hear about that stop nothing (the client emits
 * them as `warning` events). Stable like error codes; docs/errors.md lists them too.
 */
export const WARNING_CODES = {
  schema_drift: { summary: "The runtime's model has another schema hash than the one the app's types were generated from." },
} as const satisfies Record<string, { summary: string }>;

export type WarningCode = keyof typeof WARNING_CODES;

/** The JSON body of every failed HTTP request. */
export interface ErrorBody {
  readonly code: ErrorCode | (string & {});
  readonly message: string;
  /** For `invalid_request`/`invalid_params`: the JSON pointer of the offending field, e.g. `/value`. */
  readonly field?: string;
}

export function isErrorCode(value: string): value is ErrorCode {
  return Object.hasOwn(ERROR_CODES, value);
}

export function httpStatusOf(code: string): number {
  return isErrorCode(code) ? ERROR_CODES[code].status : 500;
}

/**
 * The one error type that crosses Arclight's boundaries. Thrown by the client library, and used
 * inside the runtime to turn a failure into an HTTP body or a data-channel failure.
 */
export class ArclightError extends Error {
  override readonly name = 'ArclightError';
  readonly code: ErrorCode | (string & {});
  readonly retryable: boolean;
  readonly field: string | undefined;
  /** The HTTP status when the error came from (or will go to) an HTTP response. */
  readonly status: number | undefined;
  /** When to try again, in seconds (HTTP `Retry-After`), for rate and quota refusals. */
  readonly retryAfterSeconds: number | undefined;

  constructor(
    code: ErrorCode | (string & {}),
    message: string,
    options: { cause?: unknown; field?: string; status?: number; retryable?: boolean; retryAfterSeconds?: number } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.field = options.field;
    this.retryAfterSeconds = options.retryAfterSeconds;
    this.status = options.status ?? (isErrorCode(code) ? ERROR_CODES[code].status : undefined);
    this.retryable = options.retryable ?? (isErrorCode(code) ? ERROR_CODES[code].retryable : false);
  }

  toBody(): ErrorBody {
    return this.field === undefined
      ? { code: this.code, message: this.message }
      : { code: this.code, message: this.message, field: this.field };
  }
}
