/**
 * `asError()`: whatever a failed operation threw, as the `ArclightError` the client reports. Its
 * own errors pass through; an abort (the client's disconnect() cancelling a request) is
 * `connection_failed`; anything else gets the code the caller names for its operation.
 */

import { ArclightError } from '../protocol/errors.ts';

export function asError(error: unknown, code: string): ArclightError {
  if (error instanceof ArclightError) return error;
  if ((error as Error)?.name === 'AbortError') return new ArclightError('connection_failed', 'Aborted by disconnect().', { cause: error });
  return new ArclightError(code, (error as Error)?.message ?? String(error), { cause: error });
}
