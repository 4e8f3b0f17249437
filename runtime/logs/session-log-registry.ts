/**
 * Every session's log on this runtime, by session id: begun with the session, complete when it
 * ends, readable for the same window as its recording (five minutes, on the same injectable
 * clock) and then dropped — after which reading it answers 410 `logs_gone`, as recordings answer
 * `recording_gone`.
 */

import { ArclightError } from '../../protocol/errors.ts';
import { RECORDING_RETENTION_MS } from '../recording/recording-registry.ts';
import { SessionLogBuffer, type SessionLogLimits } from './session-log-buffer.ts';

export interface SessionLogSettings extends SessionLogLimits {
  /** How long a finished session's log stays readable; default the recordings' five minutes. */
  readonly retainAfterEndMs?: number;
  /** Milliseconds since the epoch (line times and the window); tests move it. */
  readonly now?: () => number;
}

interface Entry {
  readonly buffer: SessionLogBuffer;
  endedAt?: number;
  removal?: NodeJS.Timeout;
}

/** Ended sessions remembered as gone (410, not 404); the oldest are forgotten past this many. */
const MAX_GONE_REMEMBERED = 1000;

export class SessionLogRegistry {
  readonly #settings: SessionLogSettings;
  readonly #now: () => number;
  readonly #entries = new Map<string, Entry>();
  readonly #gone = new Set<string>();

  constructor(settings: SessionLogSettings = {}) {
    this.#settings = settings;
    this.#now = settings.now ?? Date.now;
  }

  get #retainMs(): number {
    return this.#settings.retainAfterEndMs ?? RECORDING_RETENTION_MS;
  }

  /** A new session's log (a session id reused by the coordinator starts afresh). */
  begin(sessionId: string): SessionLogBuffer {
    const previous = this.#entries.get(sessionId);
    if (previous) clearTimeout(previous.removal);
    this.#gone.delete(sessionId);
    const buffer = new SessionLogBuffer(this.#settings, this.#now);
    this.#entries.set(sessionId, { buffer });
    return buffer;
  }

  /** The session ended: its log is complete and kept for the window. */
  ended(sessionId: string, reason: string): void {
    const entry = this.#entries.get(sessionId);
    if (!entry || entry.endedAt !== undefined) return;
    entry.endedAt = this.#now();
    entry.buffer.end(reason);
    // Frees the memory; reads between the window's end and this timer are refused by the clock check.
    entry.removal = setTimeout(() => this.#remove(sessionId), this.#retainMs);
    entry.removal.unref();
  }

  /** The session's log: 404 `session_not_found` for an id never seen, 410 `logs_gone` after the window. */
  get(sessionId: string): SessionLogBuffer {
    const entry = this.#entries.get(sessionId);
    if (this.#gone.has(sessionId) || (entry?.endedAt !== undefined && this.#now() - entry.endedAt > this.#retainMs)) {
      throw new ArclightError('logs_gone', 'Session logs are kept five minutes after their session ends; this one is gone.');
    }
    if (!entry) throw new ArclightError('session_not_found', `No session on this runtime has id "${sessionId}".`);
    return entry.buffer;
  }

  close(): void {
    for (const [sessionId, entry] of this.#entries) {
      clearTimeout(entry.removal);
      entry.buffer.end('shutdown');
      this.#entries.delete(sessionId);
    }
  }

  #remove(sessionId: string): void {
    this.#entries.delete(sessionId);
    this.#gone.add(sessionId);
    if (this.#gone.size > MAX_GONE_REMEMBERED) this.#gone.delete(this.#gone.values().next().value as string);
  }
}
