/** Session bodies of the local runtime (`/start_session`, `/stop_session`, `GET /sessions/{id}`). */

import type { Capabilities } from './capabilities.ts';

/**
 * Lifecycle words of a session record. `ACTIVE` is the only state in which transport calls are
 * accepted; `CLOSED` is terminal (2.9.0 treats `CLOSED`/`INACTIVE` as terminal too).
 */
export type SessionState = 'ACTIVE' | 'CLOSED';

export interface ClientInfo {
  readonly sdk_version: string;
  readonly sdk_type: string;
}

/** `POST /start_session` body. 2.9.0 sends `{}`; every field is optional. */
export interface StartSessionRequest {
  readonly extra_args?: Record<string, unknown>;
  readonly client_info?: ClientInfo;
}

/** `POST /stop_session` body (optional; 2.9.0 sends none). */
export interface StopSessionRequest {
  readonly session_id?: string;
  /** Human-readable reason, delivered to every client before its connection closes. ≤ 64 chars. */
  readonly reason?: string;
}

/** The session record returned by `/start_session` and `GET /sessions/{id}`. */
export interface SessionResponse {
  readonly session_id: string;
  readonly state: SessionState;
  /** Which deployment serves the session; `local` for a runtime in local mode. */
  readonly cluster: string;
  readonly model: { readonly name: string; readonly version?: string };
  readonly server_info: { readonly server_version: string };
  readonly selected_transport: { readonly protocol: 'webrtc'; readonly version: string };
  readonly capabilities: Capabilities;
  /** Arclight extension: when the session was created, Unix epoch milliseconds. */
  readonly created_at?: number;
  /** Arclight extension: ids of the session's live connections. */
  readonly connections?: readonly number[];
  /** Arclight extension: the session's video latency mode (see LatencyMode). */
  readonly latency_mode?: 'realtime' | 'smooth';
}

export interface StopSessionResponse {
  readonly session_id: string;
  readonly state: 'CLOSED';
}
