/**
 * Session logs and the runtime event stream: what `GET /sessions/{id}/logs`,
 * `GET /sessions/{id}/logs/stream` and `GET /events` carry (docs/protocol.md "Session logs",
 * "Runtime events").
 */

import type { JsonObject } from './json-schema.ts';

/** `model`: the model wrote it (`session.log`); `runtime`: the runtime's own account of the session. */
export type SessionLogSource = 'model' | 'runtime';
export type SessionLogLevel = 'debug' | 'info' | 'warn' | 'error';

export interface SessionLogLine {
  /** 1, 2, 3, … per session, with no gaps; lines dropped from the buffer keep their numbers. */
  readonly seq: number;
  /** Unix epoch milliseconds, the runtime's clock. */
  readonly time: number;
  readonly level: SessionLogLevel;
  readonly source: SessionLogSource;
  readonly message: string;
  readonly fields?: JsonObject;
}

/** `GET /sessions/{id}/logs?after=<seq>&limit=<n>`. */
export interface SessionLogPage {
  /** Lines with `seq > after`, oldest first, at most `limit`. */
  readonly lines: readonly SessionLogLine[];
  /** Pass as `after` for the next page: the last line's seq (or `after` when there were none). */
  readonly next: number;
  /** Lines the bounded buffer has dropped since the session started (the oldest go first). */
  readonly dropped: number;
  /** Of those, lines after `after` that are gone: a reader that fell behind missed these. */
  readonly missed: number;
  /** False once every line is in: the session has ended, so no more will come. */
  readonly live: boolean;
}

/** Defaults of `GET /sessions/{id}/logs`: `limit` from 1 to 1,000, 200 when absent. */
export const SESSION_LOG_PAGE_LIMIT = { default: 200, max: 1000 } as const;

/**
 * SSE event types on `GET /sessions/{id}/logs/stream`: `log` (data: a SessionLogLine; `id` its
 * seq), `dropped` (data `{missed}`: lines the reader skipped because the buffer no longer had
 * them), `end` (data `{reason}`: the session ended; the stream closes after it).
 */
export type SessionLogStreamEvent = 'log' | 'dropped' | 'end';

/**
 * Why a model could not be loaded (its module failed to import, its definition is invalid, or its
 * `load()` threw), with where in the author's files when that is known (`line`/`column` 1-based).
 * `code` is always `model_load_failed` (docs/errors.md).
 */
export interface ModelLoadErrorInfo {
  readonly code: 'model_load_failed';
  readonly message: string;
  readonly file?: string;
  readonly line?: number;
  readonly column?: number;
  /** A few lines of the file around `line`, the offending one marked with `>`. */
  readonly frame?: string;
}

/** Every runtime event: its stream sequence number, time, type and the type's payload. */
export type RuntimeEvent = { readonly seq: number; readonly time: number } & RuntimeEventBody;

export type RuntimeEventBody =
  | {
      readonly type: 'model_load';
      readonly phase: 'loading' | 'loaded' | 'failed';
      readonly elapsed_seconds: number;
      /** What the model's `load` last reported through `progress(fraction, message?)`: 0–1. */
      readonly progress?: number;
      readonly message?: string;
      /** `failed`: why, and where in the model's files (see ModelLoadErrorInfo). */
      readonly error?: ModelLoadErrorInfo;
    }
  /** A new version of the model is serving (`Runtime.reloadModel`, `arclight dev`); `version` counts from 1. */
  | { readonly type: 'model_reloaded'; readonly version: number; readonly sessions_kept: boolean }
  | {
      readonly type: 'encoder_backends';
      readonly selection: readonly { readonly codec: string; readonly backend: string | null; readonly hardware: boolean }[];
    }
  | { readonly type: 'session_opened'; readonly session_id: string }
  | { readonly type: 'session_ended'; readonly session_id: string; readonly reason: string }
  | { readonly type: 'connection_opened'; readonly session_id: string; readonly connection_id: number }
  | { readonly type: 'connection_ready'; readonly session_id: string; readonly connection_id: number }
  | { readonly type: 'connection_lost'; readonly session_id: string; readonly connection_id: number }
  | {
      readonly type: 'encoder_opened';
      readonly session_id: string;
      readonly track: string;
      readonly codec: string;
      readonly backend: string;
      readonly hardware: boolean;
    }
  | {
      readonly type: 'encoder_failed';
      readonly session_id: string;
      readonly track: string;
      readonly codec: string;
      readonly backend: string;
      readonly phase: 'open' | 'encode';
      /** `restart`: a fresh encoder of the same backend; `fallback`: the backend was demoted process-wide. */
      readonly action: 'restart' | 'fallback';
      readonly reason?: string;
    }
  | {
      readonly type: 'recording_segment';
      readonly session_id: string;
      readonly track: string;
      readonly sequence: number;
      readonly duration_ms: number;
      /** Whose encode it holds: the live H.264 stream's (`live`, no second encode) or the recorder's own. */
      readonly encoder: 'live' | 'own';
    };

export type RuntimeEventType = RuntimeEventBody['type'];
