/**
 * The client's side of session logs: `getSessionLogs()` pages (the current session's, else the
 * last one this client was in, else a named one), and the live `log` event — a SessionLogFollower
 * that runs only while the client is ready and someone listens, and resumes after the last line
 * delivered when the client comes back to the same session.
 */

import { ArclightError } from '../protocol/errors.ts';
import type { SessionLogPage } from '../protocol/session-logs.ts';
import type { EmitClientEvent } from './client-types.ts';
import type { ConnectionView } from './session-connection.ts';
import { fetchSessionLogs, SessionLogFollower, type SessionLogQuery } from './session-logs.ts';

export class SessionLogFeed {
  readonly #connection: ConnectionView;
  readonly #emit: EmitClientEvent;
  /** Whether anyone listens for `log` now. */
  readonly #listened: () => boolean;
  #follower: SessionLogFollower | undefined;

  constructor(connection: ConnectionView, emit: EmitClientEvent, listened: () => boolean) {
    this.#connection = connection;
    this.#emit = emit;
    this.#listened = listened;
  }

  async page(query: SessionLogQuery & { readonly sessionId?: string }): Promise<SessionLogPage> {
    const sessionId = query.sessionId ?? this.#connection.sessionId ?? this.#connection.lastSessionId;
    if (sessionId === undefined)
      throw new ArclightError('invalid_request', 'getSessionLogs() needs a session: connect first, or pass sessionId.');
    return fetchSessionLogs(
      { baseUrl: this.#connection.baseUrl, sessionId, token: this.#connection.token },
      {
        ...(query.after !== undefined ? { after: query.after } : {}),
        ...(query.limit !== undefined ? { limit: query.limit } : {}),
      },
    );
  }

  /** Nobody listens any more: let the stream go (a new listener resumes after the last line). */
  unheard(): void {
    this.#follower?.stop();
  }

  /** Follows the session's log while the client is ready and someone listens for `log`. */
  follow(): void {
    const status = this.#connection.status;
    if (status !== 'ready' || !this.#listened()) {
      if (status === 'disconnected') this.#follower?.stop();
      return;
    }
    const sessionId = this.#connection.sessionId;
    const previous = this.#follower;
    if (sessionId === undefined || (previous?.sessionId === sessionId && !previous.stopped)) return;
    previous?.stop();
    // Back in the same session after a reconnect: carry on after the last line delivered.
    const after = previous?.sessionId === sessionId ? previous.lastSeq : 0;
    this.#follower = new SessionLogFollower({
      baseUrl: this.#connection.baseUrl,
      sessionId,
      token: this.#connection.token,
      after,
      onLine: (line) => this.#emit('log', line),
    });
  }
}
