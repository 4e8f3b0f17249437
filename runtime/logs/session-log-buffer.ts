/**
 * One session's log: the newest lines, bounded by count and by bytes (whichever bound is hit
 * first drops the oldest lines, which are counted), numbered 1, 2, 3, … so a reader can page
 * and resume without gaps or repeats, and watched by live readers (the SSE stream).
 */

import type { JsonObject } from '../../protocol/json-schema.ts';
import type { SessionLogLevel, SessionLogLine, SessionLogPage, SessionLogSource } from '../../protocol/session-logs.ts';

export interface SessionLogLimits {
  /** Lines kept; default 10,000. */
  readonly maxLines?: number;
  /** Bytes kept (each line counted as its JSON); default 10 MB. */
  readonly maxBytes?: number;
}

export const DEFAULT_SESSION_LOG_LIMITS = { maxLines: 10_000, maxBytes: 10 * 1024 * 1024 } as const;

/** The longest message kept; a longer one is cut (a model must not fill the buffer with one line). */
const MAX_MESSAGE_CHARS = 4096;

export interface SessionLogEntry {
  readonly level: SessionLogLevel;
  readonly source: SessionLogSource;
  readonly message: string;
  readonly fields?: JsonObject;
}

export type SessionLogListener = (line: SessionLogLine) => void;

export class SessionLogBuffer {
  readonly #maxLines: number;
  readonly #maxBytes: number;
  readonly #now: () => number;
  /** Kept lines, oldest first, from `#head` on (a moving head makes dropping O(1)). */
  #lines: Array<{ line: SessionLogLine; bytes: number }> = [];
  #head = 0;
  #bytes = 0;
  #lastSeq = 0;
  #dropped = 0;
  #endReason: string | undefined;
  readonly #listeners = new Set<SessionLogListener>();
  readonly #endListeners = new Set<(reason: string) => void>();

  constructor(limits: SessionLogLimits = {}, now: () => number = Date.now) {
    this.#maxLines = limits.maxLines ?? DEFAULT_SESSION_LOG_LIMITS.maxLines;
    this.#maxBytes = limits.maxBytes ?? DEFAULT_SESSION_LOG_LIMITS.maxBytes;
    if (!(this.#maxLines >= 1 && this.#maxBytes >= 1)) throw new RangeError('session log limits must be at least 1');
    this.#now = now;
  }

  /** Lines dropped to keep the bounds, since the session started. */
  get dropped(): number {
    return this.#dropped;
  }

  get size(): number {
    return this.#lines.length - this.#head;
  }

  get bytes(): number {
    return this.#bytes;
  }

  get lastSeq(): number {
    return this.#lastSeq;
  }

  /** Live readers following it now (open streams). */
  get readers(): number {
    return this.#listeners.size;
  }

  /** Set once the session has ended: no line is added after that. */
  get endReason(): string | undefined {
    return this.#endReason;
  }

  append(entry: SessionLogEntry): SessionLogLine | undefined {
    if (this.#endReason !== undefined) return undefined;
    const message = entry.message.length > MAX_MESSAGE_CHARS ? `${entry.message.slice(0, MAX_MESSAGE_CHARS)}…` : entry.message;
    const line: SessionLogLine = {
      seq: ++this.#lastSeq,
      time: this.#now(),
      level: entry.level,
      source: entry.source,
      message,
      ...(entry.fields && Object.keys(entry.fields).length > 0 ? { fields: entry.fields } : {}),
    };
    const bytes = Buffer.byteLength(JSON.stringify(line));
    this.#lines.push({ line, bytes });
    this.#bytes += bytes;
    // The newest line always stays, even alone over the byte bound: a reader sees it was written.
    while (this.size > 1 && (this.size > this.#maxLines || this.#bytes > this.#maxBytes)) this.#dropOldest();
    if (this.#head > 1024 && this.#head * 2 > this.#lines.length) {
      this.#lines = this.#lines.slice(this.#head);
      this.#head = 0;
    }
    for (const listener of [...this.#listeners]) listener(line);
    return line;
  }

  /** Lines with seq > `after`, oldest first, at most `limit`. */
  page(after: number, limit: number): SessionLogPage {
    const firstKept = this.size > 0 ? this.#lines[this.#head]!.line.seq : this.#lastSeq + 1;
    const from = Math.max(after + 1, firstKept);
    const lines: SessionLogLine[] = [];
    for (let i = this.#head + (from - firstKept); i < this.#lines.length && lines.length < limit; i++) lines.push(this.#lines[i]!.line);
    return {
      lines,
      next: lines.length > 0 ? lines[lines.length - 1]!.seq : after,
      dropped: this.#dropped,
      missed: Math.max(0, firstKept - (after + 1)),
      live: this.#endReason === undefined,
    };
  }

  /** Calls `listener` with every line appended from now on; returns the unsubscriber. */
  subscribe(listener: SessionLogListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Calls `listener` once when the session ends (at once if it has). */
  onEnd(listener: (reason: string) => void): () => void {
    if (this.#endReason !== undefined) {
      listener(this.#endReason);
      return () => {};
    }
    this.#endListeners.add(listener);
    return () => this.#endListeners.delete(listener);
  }

  /** The session ended: the log is complete; live readers are told and let go. */
  end(reason: string): void {
    if (this.#endReason !== undefined) return;
    this.#endReason = reason;
    this.#listeners.clear();
    for (const listener of [...this.#endListeners]) listener(reason);
    this.#endListeners.clear();
  }

  #dropOldest(): void {
    const oldest = this.#lines[this.#head++]!;
    this.#bytes -= oldest.bytes;
    this.#dropped++;
  }
}
