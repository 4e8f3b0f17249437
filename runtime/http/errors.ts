/**
 * HTTP failure handling: every error leaves as `{code, message}` JSON with the status its code
 * maps to. Unexpected exceptions become `internal_error` and their detail stays in the log.
 */

import type { Context, ErrorHandler, NotFoundHandler } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { ArclightError } from '../../protocol/errors.ts';
import type { Logger } from '../log.ts';

export function errorResponse(c: Context, error: ArclightError): Response {
  // A body refused for its size may be partly unread: the connection cannot carry another
  // request, so say so — a client that reused it would see its next request cut off.
  const headers = error.code === 'payload_too_large' ? { connection: 'close' } : undefined;
  return c.json(error.toBody(), (error.status ?? 500) as ContentfulStatusCode, headers);
}

export function createErrorHandler(log: Logger): ErrorHandler {
  return (error, c) => {
    if (error instanceof ArclightError) return errorResponse(c, error);
    log.error('request failed', { error, method: c.req.method, path: c.req.path });
    return errorResponse(c, new ArclightError('internal_error', 'The runtime failed to handle the request.'));
  };
}

export const notFound: NotFoundHandler = (c) =>
  errorResponse(c, new ArclightError('not_found', `No route ${c.req.method} ${c.req.path}.`));
