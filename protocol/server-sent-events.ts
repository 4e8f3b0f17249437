/**
 * Server-sent events (the `text/event-stream` format of the HTML standard), both ends: the
 * runtime formats its session-log and runtime-event streams with `formatServerSentEvent`, and the
 * client reads them with `ServerSentEventParser` over `fetch` — not `EventSource`, which cannot
 * send the `Authorization` header a hosted session needs.
 */

export interface ServerSentEvent {
  /** The event type (`event:`); absent means the standard's default, `message`. */
  readonly event?: string;
  /** `id:` — what a reconnecting reader sends back as `Last-Event-ID`. */
  readonly id?: string;
  readonly data: string;
}

export const SSE_CONTENT_TYPE = 'text/event-stream';

/** One event, terminated by the blank line; multi-line data becomes several `data:` lines. */
export function formatServerSentEvent(event: ServerSentEvent): string {
  let text = '';
  // A newline inside the type or id would end the field early and let data forge fields.
  if (event.event !== undefined) text += `event: ${event.event.replace(/[\r\n]/g, ' ')}\n`;
  if (event.id !== undefined) text += `id: ${event.id.replace(/[\r\n]/g, ' ')}\n`;
  for (const line of event.data.split(/\r\n|\r|\n/)) text += `data: ${line}\n`;
  return text + '\n';
}

/** A comment line: readers ignore it; it keeps proxies from closing an idle stream. */
export const SSE_KEEP_ALIVE = ': keep-alive\n\n';

/**
 * Incremental parser: feed it text as it arrives (chunks split anywhere, even inside a CRLF) and
 * it returns the events completed so far. Comments and unknown fields are skipped, as the
 * standard says; `retry:` is ignored (the client has its own reconnect policy).
 */
export class ServerSentEventParser {
  #buffer = '';
  #event: string | undefined;
  #id: string | undefined;
  #data: string[] = [];
  /** A chunk ended in `\r`: a `\n` starting the next chunk belongs to that line ending. */
  #pendingCr = false;

  push(chunk: string): ServerSentEvent[] {
    if (this.#pendingCr && chunk.startsWith('\n')) chunk = chunk.slice(1);
    this.#pendingCr = chunk.endsWith('\r');
    this.#buffer += chunk;
    const events: ServerSentEvent[] = [];
    const lines = this.#buffer.split(/\r\n|\r|\n/);
    this.#buffer = lines.pop() ?? '';
    for (const line of lines) {
      if (line === '') {
        if (this.#data.length > 0) {
          events.push({
            ...(this.#event !== undefined ? { event: this.#event } : {}),
            ...(this.#id !== undefined ? { id: this.#id } : {}),
            data: this.#data.join('\n'),
          });
        }
        this.#event = undefined;
        this.#data = [];
        continue;
      }
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon === -1 ? line : line.slice(0, colon);
      let value = colon === -1 ? '' : line.slice(colon + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'event') this.#event = value;
      else if (field === 'data') this.#data.push(value);
      else if (field === 'id' && !value.includes('\0')) this.#id = value;
    }
    return events;
  }
}
