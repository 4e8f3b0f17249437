/**
 * A `text/event-stream` response that stays open: the route hands `open` a writer and gets back
 * what to undo when the reader goes away (it disconnects, or the stream is closed from here).
 * A comment every 15 s keeps idle streams alive through proxies; `X-Accel-Buffering: no` asks
 * nginx-style proxies not to buffer it.
 */

import { ArclightError } from '../../protocol/errors.ts';
import { formatServerSentEvent, SSE_CONTENT_TYPE, SSE_KEEP_ALIVE, type ServerSentEvent } from '../../protocol/server-sent-events.ts';

const KEEP_ALIVE_MS = 15_000;

export interface EventStreamWriter {
  send(event: ServerSentEvent): void;
  /** Ends the stream (the reader sees it close). */
  close(): void;
}

export function eventStreamResponse(signal: AbortSignal | undefined, open: (writer: EventStreamWriter) => () => void): Response {
  const encoder = new TextEncoder();
  let finish: (() => void) | undefined;
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      let done = false;
      let cleanup: (() => void) | undefined;
      const keepAlive = setInterval(() => write(SSE_KEEP_ALIVE), KEEP_ALIVE_MS);
      keepAlive.unref();
      const write = (text: string): void => {
        if (done) return;
        try {
          controller.enqueue(encoder.encode(text));
        } catch {
          finish?.();
        }
      };
      finish = () => {
        if (done) return;
        done = true;
        clearInterval(keepAlive);
        cleanup?.();
        signal?.removeEventListener('abort', onAbort);
        try {
          controller.close();
        } catch {
          // already closed or cancelled
        }
      };
      const onAbort = (): void => finish?.();
      signal?.addEventListener('abort', onAbort);
      cleanup = open({ send: (event) => write(formatServerSentEvent(event)), close: () => finish?.() });
      // `open` may have closed the stream at once (a finished session's log).
      if (done) cleanup();
    },
    cancel() {
      finish?.();
    },
  });
  return new Response(body, {
    status: 200,
    headers: {
      'content-type': `${SSE_CONTENT_TYPE}; charset=utf-8`,
      'cache-control': 'no-cache, no-transform',
      'x-accel-buffering': 'no',
    },
  });
}

/**
 * Where a reader resumes: the `Last-Event-ID` header (an automatic reconnect) wins over the
 * `after` query parameter; both are a sequence number, 0 (the default) meaning from the start.
 */
export function resumePoint(lastEventId: string | undefined, after: string | undefined): number {
  if (lastEventId !== undefined && lastEventId !== '') return sequenceNumber(lastEventId, 'Last-Event-ID');
  if (after !== undefined) return sequenceNumber(after, '/after');
  return 0;
}

export function sequenceNumber(text: string, field: string): number {
  if (!/^\d{1,15}$/.test(text))
    throw new ArclightError('invalid_request', `${field.replace(/^\//, '')} must be a sequence number (a whole number, 0 or more).`, {
      field,
    });
  return Number(text);
}
