/**
 * A session's log (docs/protocol.md "Session logs"), paged and live:
 *
 *   GET /sessions/{sid}/logs?after=<seq>&limit=<n>   200 SessionLogPage
 *   GET /sessions/{sid}/logs/stream?after=<seq>      text/event-stream: `log`, `dropped`, `end`
 *
 * Local mode: open, like the other local session routes. Hosted mode: behind the runtime secret
 * (`/sessions/*`), reached through the coordinator, which checks the session's token. Readable
 * while the session runs and five minutes after it ends; then 410 `logs_gone`.
 */

import { Hono } from 'hono';
import { SESSION_LOG_PAGE_LIMIT, type SessionLogLine } from '../../protocol/session-logs.ts';
import type { SessionLogRegistry } from '../logs/session-log-registry.ts';
import { eventStreamResponse, resumePoint, sequenceNumber } from './event-stream-response.ts';

/** Lines replayed per read of the buffer when a stream starts behind. */
const REPLAY_CHUNK = 1000;

export function sessionLogRoutes(logs: SessionLogRegistry): Hono {
  const app = new Hono();

  app.get('/sessions/:sid/logs', (c) => {
    const buffer = logs.get(c.req.param('sid'));
    const after = sequenceNumber(c.req.query('after') ?? '0', '/after');
    const limitText = c.req.query('limit');
    const limit = limitText === undefined ? SESSION_LOG_PAGE_LIMIT.default : sequenceNumber(limitText, '/limit');
    return c.json(buffer.page(after, Math.max(1, Math.min(limit, SESSION_LOG_PAGE_LIMIT.max))), 200, { 'cache-control': 'no-store' });
  });

  app.get('/sessions/:sid/logs/stream', (c) => {
    const buffer = logs.get(c.req.param('sid'));
    const after = resumePoint(c.req.header('last-event-id'), c.req.query('after'));
    return eventStreamResponse(c.req.raw.signal, (writer) => {
      const sendLine = (line: SessionLogLine): void => writer.send({ event: 'log', id: String(line.seq), data: JSON.stringify(line) });
      // Replay what is kept after the resume point, then follow: both run in this one turn of
      // the event loop, so no line falls between them.
      let page = buffer.page(after, REPLAY_CHUNK);
      if (page.missed > 0) writer.send({ event: 'dropped', data: JSON.stringify({ missed: page.missed }) });
      while (page.lines.length > 0) {
        for (const line of page.lines) sendLine(line);
        page = buffer.page(page.next, REPLAY_CHUNK);
      }
      const unsubscribe = buffer.subscribe(sendLine);
      const unEnd = buffer.onEnd((reason) => {
        writer.send({ event: 'end', data: JSON.stringify({ reason }) });
        writer.close();
      });
      return () => {
        unsubscribe();
        unEnd();
      };
    });
  });

  return app;
}
