/**
 * The control protocol between the runtime and a Python worker: JSON lines over a Unix domain
 * socket (a socketpair handed to the worker as fd 4). Frame bytes never travel here — a step
 * names the ring slots its input frames lie in and the slots it may write its output into, and
 * the reply names the slots it wrote, with their size and format. One request at a time per
 * worker: the runtime sends the next only after the reply (so every output slot is free when a
 * step begins). Mirror: python/arclight_worker/_worker.py.
 */

import type { JsonValue } from '../../protocol/json-schema.ts';

export const WORKER_PROTOCOL_VERSION = 1;

export type WorkerPixelFormat = 'rgb' | 'rgba' | 'i420';

/** A frame in a ring slot, as a step names it. */
export interface SlotFrame {
  readonly slot: number;
  readonly width: number;
  readonly height: number;
  readonly format: WorkerPixelFormat;
}

/** A command as the worker declares it (`@model.command`). */
export interface DeclaredCommand {
  readonly description?: string;
  readonly params?: { readonly [keyword: string]: unknown };
  readonly reply_type?: string;
}

export interface ModelDescription {
  readonly commands: Readonly<Record<string, DeclaredCommand>>;
  readonly has_generate: boolean;
}

// Runtime → worker (each carries an `id` the reply repeats).
export type WorkerRequest =
  | { readonly type: 'session_start'; readonly session: string }
  | { readonly type: 'session_end'; readonly session: string; readonly reason: string }
  | { readonly type: 'command'; readonly session: string; readonly name: string; readonly params: JsonValue }
  | {
      readonly type: 'step';
      readonly session: string;
      readonly index: number;
      readonly width: number;
      readonly height: number;
      /** Input frames by track, already written into their slots. */
      readonly inputs: Readonly<Record<string, SlotFrame>>;
      /** The slots this rank may write (empty for a non-leader in leader mode). */
      readonly outputs: readonly number[];
      /** Ranks write disjoint row slices of the same frame. */
      readonly slices: boolean;
    };

// Worker → runtime.
export type WorkerMessage =
  | {
      readonly type: 'hello';
      readonly protocol: number;
      readonly pid: number;
      readonly rank: number;
      readonly python: string;
      readonly numpy: string;
    }
  | { readonly type: 'progress'; readonly fraction: number; readonly message?: string | null }
  | ({ readonly type: 'ready' } & ModelDescription)
  | { readonly type: 'fatal'; readonly message: string; readonly traceback?: string }
  | { readonly type: 'heartbeat' }
  | {
      readonly type: 'reply';
      readonly id: number;
      readonly ok: true;
      readonly result?: JsonValue;
      readonly frames?: readonly SlotFrame[];
      readonly metadata?: JsonValue;
    }
  | { readonly type: 'reply'; readonly id: number; readonly ok: false; readonly error: WorkerFailure }
  | {
      readonly type: 'log';
      readonly session: string;
      readonly level: 'info' | 'warn' | 'error';
      readonly message: string;
      readonly fields?: Record<string, unknown>;
    }
  | { readonly type: 'broadcast'; readonly session: string; readonly message_type: string; readonly data?: JsonValue };

export interface WorkerFailure {
  readonly message: string;
  /** Set when the model raised `CommandError(code, message)`. */
  readonly code?: string;
  readonly command_error?: boolean;
  readonly traceback?: string;
}

export type WorkerReply = Extract<WorkerMessage, { type: 'reply' }>;
export type SuccessfulReply = Extract<WorkerReply, { ok: true }>;

const TYPES = new Set(['hello', 'progress', 'ready', 'fatal', 'heartbeat', 'reply', 'log', 'broadcast']);

/** Parses one line from a worker; undefined when it is not a message of this protocol. */
export function parseWorkerMessage(line: string): WorkerMessage | undefined {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const type = (value as { type?: unknown }).type;
  if (typeof type !== 'string' || !TYPES.has(type)) return undefined;
  if (type === 'reply' && typeof (value as { id?: unknown }).id !== 'number') return undefined;
  return value as WorkerMessage;
}
