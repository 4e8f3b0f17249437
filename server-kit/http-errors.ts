/**
 * The one HTTP error writer of the runtime and the coordinator: every failure leaves as
 * `{code, message}` JSON with the status its code maps to (protocol/errors.ts), with the headers
 * that status promises; anything unexpected is `internal_error`, its detail logged, never sent.
 */

import type { Context, ErrorHandler, NotFoundHandler } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { ArclightError } from '../protocol/errors.ts';

/** Where an unexpected failure's detail goes (a logger's `error`). */
export type ErrorLogger = (message: string, fields: Record<string, unknown>) => void;

export function errorResponse(c: Context, error: ArclightError): Response {
  if (error.status === 401) c.header('WWW-Authenticate', 'Bearer');
  if (error.retryAfterSeconds !== undefined) c.header('Retry-After', String(Math.max(1, Math.ceil(error.retryAfterSeconds))));
  // A body refused for its size may be partly unread: the connection cannot carry another
  // request, so say so — a client that reused it would see its next request cut off.
  if (error.code === 'payload_too_large') c.header('Connection', 'close');
  return c.json(error.toBody(), (error.status ?? 500) as ContentfulStatusCode);
}

/** `server` names the process in the message a client gets ("The runtime failed …"). */
export function createErrorHandler(logError: ErrorLogger, server: 'runtime' | 'coordinator'): ErrorHandler {
  return (error, c) => {
    if (error instanceof ArclightError) return errorResponse(c, error);
    logError('request failed', { error, method: c.req.method, path: c.req.path });
    return errorResponse(c, new ArclightError('internal_error', `The ${server} failed to handle the request.`));
  };
}

export const notFound: NotFoundHandler = (c) => errorResponse(c, new ArclightError('not_found', `No route ${c.req.method} ${c.req.path}.`));
