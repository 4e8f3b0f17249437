/**
 * `GET /events?after=<seq>` — the runtime's state changes as server-sent events (docs/protocol.md
 * "Runtime events"): each event's `event:` is its type, `id:` its sequence number, `data:` the
 * RuntimeEvent as JSON. A reader that resumes (`Last-Event-ID`, or `after`) first gets what is
 * kept after that point — with `event: dropped` `{missed}` if some of it is no longer kept.
 *
 * Like `/metrics`, it is open on a local runtime; a hosted runtime requires the runtime secret.
 */

import { Hono } from 'hono';
import type { RuntimeEvent } from '../../protocol/session-logs.ts';
import type { RuntimeEventLog } from '../events/runtime-event-log.ts';
import { eventStreamResponse, resumePoint } from './event-stream-response.ts';

export function eventRoutes(events: RuntimeEventLog): Hono {
  const app = new Hono();
  app.get('/events', (c) => {
    const after = resumePoint(c.req.header('last-event-id'), c.req.query('after'));
    return eventStreamResponse(c.req.raw.signal, (writer) => {
      const send = (event: RuntimeEvent): void => writer.send({ event: event.type, id: String(event.seq), data: JSON.stringify(event) });
      const { events: kept, missed } = events.since(after);
      if (missed > 0) writer.send({ event: 'dropped', data: JSON.stringify({ missed }) });
      for (const event of kept) send(event);
      return events.subscribe(send);
    });
  });
  return app;
}
