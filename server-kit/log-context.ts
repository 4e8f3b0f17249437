/**
 * Fields that every log record written during a piece of work carries, whoever writes it: a
 * session enters its context (`session`, `phase`) where it runs model code and handlers, and the
 * records the command router, the Python worker group, a recorder or the model's own
 * `session.log` write meanwhile are stamped with it — including through `await`s and timers
 * started inside, which is what AsyncLocalStorage carries and an explicit logger argument cannot.
 *
 * The loggers of log.ts read the context in a pino `mixin` (`logContextFields`); log.ts's
 * `withLogContext` gives a logger that enters one for each record. Fields written
 * explicitly (a logger's bindings, a record's own fields) win over the context's.
 */

import { AsyncLocalStorage } from 'node:async_hooks';

export type LogContextFields = Readonly<Record<string, unknown>>;

/**
 * The fields, or a function giving them at the moment of each record: a session's `phase` is
 * what it is when the line is written, not when the context was entered.
 */
export type LogContext = LogContextFields | (() => LogContextFields);

/** The current context, already merged with the ones it is nested in (inner fields win). */
const storage = new AsyncLocalStorage<() => LogContextFields>();

const read = (context: LogContext): LogContextFields => (typeof context === 'function' ? context() : context);

/** Runs `fn` (and whatever it starts) with `context` stamped on its log records; returns what `fn` returns. */
export function runWithLogContext<T>(context: LogContext, fn: () => T): T {
  const outer = storage.getStore();
  const merged = outer ? (): LogContextFields => ({ ...outer(), ...read(context) }) : (): LogContextFields => read(context);
  return storage.run(merged, fn);
}

/** The fields of the current context; empty outside any. Never throws (a failing getter gives none). */
export function logContextFields(): LogContextFields {
  const current = storage.getStore();
  if (!current) return {};
  try {
    return current();
  } catch {
    return {};
  }
}
