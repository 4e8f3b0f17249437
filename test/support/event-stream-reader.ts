/** Reads a server-sent-events response in a test: every event, as it arrives, until stopped. */

import { ServerSentEventParser, type ServerSentEvent } from '../../protocol/server-sent-events.ts';
import type { RuntimeEvent } from '../../protocol/session-logs.ts';

export interface EventStreamReader {
  readonly events: Array<ServerSentEvent & { readonly receivedAt: number }>;
  /** Resolves when the server ends the stream (or the reader is stopped). */
  readonly closed: Promise<void>;
  stop(): void;
}

export async function readEventStream(
  url: string,
  headers: Record<string, string> = {},
): Promise<EventStreamReader & { readonly status: number }> {
  const abort = new AbortController();
  const response = await fetch(url, { headers: { accept: 'text/event-stream', ...headers }, signal: abort.signal });
  const events: Array<ServerSentEvent & { receivedAt: number }> = [];
  const closed = (async () => {
    if (!response.ok || !response.body) return;
    const parser = new ServerSentEventParser();
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        for (const event of parser.push(value)) events.push({ ...event, receivedAt: Date.now() });
      }
    } catch {
      // stopped
    }
  })();
  return { status: response.status, events, closed, stop: () => abort.abort() };
}

/** The runtime's `/events` stream in a test, each event parsed (every `data:` but `dropped`'s is a RuntimeEvent). */
export interface RuntimeEventReader {
  /** The events received so far, in order. */
  all(): RuntimeEvent[];
  /** Those of one session. */
  ofSession(sessionId: string): RuntimeEvent[];
  stop(): void;
}

export async function readRuntimeEvents(runtimeUrl: string, headers: Record<string, string> = {}): Promise<RuntimeEventReader> {
  const reader = await readEventStream(`${runtimeUrl}/events`, headers);
  if (reader.status !== 200) throw new Error(`GET /events answered ${reader.status}`);
  const all = (): RuntimeEvent[] => reader.events.filter((e) => e.event !== 'dropped').map((e) => JSON.parse(e.data) as RuntimeEvent);
  return { all, ofSession: (sessionId) => all().filter((e) => 'session_id' in e && e.session_id === sessionId), stop: reader.stop };
}
