/**
 * Reading a session's log (docs/client.md "Session logs"): one page at a time
 * (`GET /sessions/{id}/logs`), or followed live (`GET /sessions/{id}/logs/stream`, server-sent
 * events read over `fetch`, because `EventSource` cannot send the bearer token a hosted session
 * needs). The follower resumes where it stopped after a dropped stream, so no line is seen twice.
 */

import { ArclightError } from '../protocol/errors.ts';
import { ServerSentEventParser } from '../protocol/server-sent-events.ts';
import type { SessionLogLine, SessionLogPage } from '../protocol/session-logs.ts';
import { errorFromResponse } from './http-errors.ts';
import { resolveToken, type TokenSource } from './token.ts';

export interface SessionLogQuery {
  /** Lines after this sequence number (a page's `next`); default 0, from the start. */
  readonly after?: number;
  /** At most this many (1–1,000; the server's default is 200). */
  readonly limit?: number;
}

export interface SessionLogTarget {
  /** The runtime (local mode) or the coordinator (hosted). */
  readonly baseUrl: string;
  readonly sessionId: string;
  /** Hosted mode's JWT (local mode: none). */
  readonly token: TokenSource | undefined;
}

function logsUrl(target: SessionLogTarget, suffix: string): string {
  return `${target.baseUrl}/sessions/${encodeURIComponent(target.sessionId)}/logs${suffix}`;
}

async function authHeaders(target: SessionLogTarget): Promise<Record<string, string>> {
  const token = await resolveToken(target.token);
  return token === undefined ? {} : { Authorization: `Bearer ${token}` };
}

export async function fetchSessionLogs(
  target: SessionLogTarget,
  query: SessionLogQuery = {},
  signal?: AbortSignal,
): Promise<SessionLogPage> {
  const params = new URLSearchParams();
  if (query.after !== undefined) params.set('after', String(query.after));
  if (query.limit !== undefined) params.set('limit', String(query.limit));
  const search = params.size > 0 ? `?${params}` : '';
  let response: Response;
  try {
    response = await fetch(logsUrl(target, search), { headers: await authHeaders(target), ...(signal ? { signal } : {}) });
  } catch (error) {
    throw new ArclightError('connection_failed', `The session log could not be read: ${(error as Error).message}`, { cause: error });
  }
  if (!response.ok) throw await errorFromResponse(response);
  return (await response.json()) as SessionLogPage;
}

export interface SessionLogFollowerOptions extends SessionLogTarget {
  /** Start after this sequence number; default 0 (every line still kept). */
  readonly after?: number;
  readonly onLine: (line: SessionLogLine) => void;
  /** Lines the follower could not get (the bounded buffer dropped them first). */
  readonly onMissed?: (missed: number) => void;
  /** The session ended: its log is complete. */
  readonly onEnd?: (reason: string) => void;
  /** The stream failed for good (refused: 403, 404, 410); a dropped stream is resumed instead. */
  readonly onError?: (error: ArclightError) => void;
}

/** A dropped stream is resumed after this long (with jitter), up to this many times in a row. */
const RESUME_DELAY_MS = 500;
const MAX_RESUMES = 20;

export class SessionLogFollower {
  readonly #options: SessionLogFollowerOptions;
  readonly #abort = new AbortController();
  #lastSeq: number;

  constructor(options: SessionLogFollowerOptions) {
    this.#options = options;
    this.#lastSeq = options.after ?? 0;
    void this.#run();
  }

  get sessionId(): string {
    return this.#options.sessionId;
  }

  /** The last line delivered (resume point). */
  get lastSeq(): number {
    return this.#lastSeq;
  }

  get stopped(): boolean {
    return this.#abort.signal.aborted;
  }

  stop(): void {
    this.#abort.abort();
  }

  async #run(): Promise<void> {
    let failures = 0;
    while (!this.#abort.signal.aborted) {
      try {
        const ended = await this.#follow();
        if (ended) return;
        failures = 0;
      } catch (error) {
        if (this.#abort.signal.aborted) return;
        const e =
          error instanceof ArclightError
            ? error
            : new ArclightError('connection_failed', (error as Error)?.message ?? String(error), { cause: error });
        // A refusal will not change by asking again; a network drop or a 5xx may.
        if ((e.status !== undefined && e.status < 500) || ++failures > MAX_RESUMES) {
          this.#options.onError?.(e);
          return;
        }
      }
      await new Promise((resolve) => setTimeout(resolve, RESUME_DELAY_MS * (0.5 + Math.random())));
    }
  }

  /** One stream, read to its end; true when the session's log is complete. */
  async #follow(): Promise<boolean> {
    const response = await fetch(logsUrl(this.#options, '/stream'), {
      headers: { ...(await authHeaders(this.#options)), Accept: 'text/event-stream', 'Last-Event-ID': String(this.#lastSeq) },
      signal: this.#abort.signal,
    });
    if (!response.ok) throw await errorFromResponse(response);
    if (!response.body) throw new ArclightError('connection_failed', 'The session log stream has no body.');
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    const parser = new ServerSentEventParser();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return false;
        for (const event of parser.push(value)) {
          if (event.event === 'log') {
            const line = JSON.parse(event.data) as SessionLogLine;
            if (line.seq <= this.#lastSeq) continue;
            this.#lastSeq = line.seq;
            this.#options.onLine(line);
          } else if (event.event === 'dropped') {
            this.#options.onMissed?.((JSON.parse(event.data) as { missed: number }).missed);
          } else if (event.event === 'end') {
            this.#options.onEnd?.((JSON.parse(event.data) as { reason: string }).reason);
            return true;
          }
        }
      }
    } finally {
      reader.cancel().catch(() => {});
    }
  }
}
