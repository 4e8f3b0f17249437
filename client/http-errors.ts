/**
 * A failed HTTP answer from a runtime or the coordinator as an `ArclightError`: the body's
 * `{code, message, field}` when it has one (docs/errors.md), else a code inferred from the status,
 * and `Retry-After` (seconds) for quota refusals. Shared by the session calls and `mintToken`.
 */

import { ArclightError, type ErrorBody } from '../protocol/errors.ts';

export async function errorFromResponse(response: Response): Promise<ArclightError> {
  let body: Partial<ErrorBody> = {};
  try {
    body = (await response.json()) as Partial<ErrorBody>;
  } catch {
    // not JSON: fall through to a generic error
  }
  const code = typeof body.code === 'string' ? body.code : codeForStatus(response.status);
  const message = typeof body.message === 'string' ? body.message : `HTTP ${response.status} ${response.statusText}`;
  const retryAfter = Number(response.headers.get('retry-after') ?? NaN);
  return new ArclightError(code, message, {
    status: response.status,
    ...(typeof body.field === 'string' ? { field: body.field } : {}),
    ...(Number.isFinite(retryAfter) && retryAfter >= 0 ? { retryAfterSeconds: retryAfter } : {}),
  });
}

function codeForStatus(status: number): string {
  switch (status) {
    case 401:
      return 'unauthorized';
    case 402:
      return 'payment_required';
    case 403:
      return 'forbidden';
    case 404:
      return 'not_found';
    case 409:
      return 'session_conflict';
    case 410:
      return 'session_ended';
    case 426:
      return 'unsupported_version';
    case 429:
      return 'rate_limited';
    case 501:
      return 'version_not_implemented';
    default:
      return status >= 500 ? 'internal_error' : 'invalid_request';
  }
}
