/**
 * Idle keep-alive connections held longer than clients' and load balancers' own idle timeouts
 * (undici 4 s, typical LBs 60 s), so it is always the client that closes one. With Node's 5 s a
 * server could close a connection just as a client sent its next request on it, and that request
 * failed with "other side closed" (seen once in 50,000 racing POST /sessions to the coordinator).
 */

import type { Server } from 'node:http';

const KEEP_ALIVE_TIMEOUT_MS = 65_000;

export function outlastClientIdleTimeouts(server: Server): void {
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
  server.headersTimeout = KEEP_ALIVE_TIMEOUT_MS + 1_000;
}
