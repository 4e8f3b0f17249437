/**
 * Structured logging on pino: one JSON object per line on stderr (`time` ISO, `level` as a word,
 * `msg`, then bindings and fields), so operators can ship it as is; a readable text line instead
 * when stderr is a terminal (log-format.ts). `ARCLIGHT_LOG=debug|info|warn|error|silent` sets the
 * level (default info; tests use warn); `ARCLIGHT_LOG_FORMAT=json|text` overrides the format.
 * Records written inside a log context (log-context.ts: a session's work) carry its fields.
 *
 * The `Logger` interface is ours, message first and fields second (pino takes them the other
 * way round): runtime and coordinator code, and apps passing their own logger, see only it.
 */

import type { Writable } from 'node:stream';
import { pino, type Logger as PinoLogger } from 'pino';
import { logContextFields, runWithLogContext, type LogContext } from './log-context.ts';
import { formatTextRecord, logStyleFor, type LogFormat } from './log-format.ts';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent';
const LEVELS: readonly LogLevel[] = ['debug', 'info', 'warn', 'error', 'silent'];

export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
  child(bindings: Record<string, unknown>): Logger;
}

function levelFromEnv(): LogLevel {
  const value = process.env['ARCLIGHT_LOG'];
  return LEVELS.find((level) => level === value) ?? 'info';
}

/** Serializes an Error with its stack and cause; plain values pass through. */
export function toLoggable(value: unknown): unknown {
  if (value instanceof Error) {
    return { name: value.name, message: value.message, stack: value.stack, cause: toLoggable(value.cause) };
  }
  return value;
}

/**
 * Standard streams whose reader is gone (a closed log pipe, a parent that died): a write fails
 * with EPIPE, emitted as an 'error' event. Without a listener that is an uncaught exception, which
 * the runtime's process guard (model/author-code.ts) logs — to the same broken stderr, failing
 * again: a loop at 100 % CPU that never lets SIGTERM through. So each stream gets a listener, and
 * a stream that failed is written no more: the process keeps serving, without its log.
 */
const brokenStreams = new WeakSet<Writable>();
function guardStream(stream: Writable): void {
  if (stream.listeners('error').includes(markBroken)) return;
  stream.on('error', markBroken);
}
function markBroken(this: Writable): void {
  brokenStreams.add(this);
}

/** Writes to stdout or stderr (or another stream) unless it has failed before (then drops it). Never throws. */
export function writeStandardStream(stream: Writable, text: string): void {
  guardStream(stream);
  if (brokenStreams.has(stream) || stream.destroyed) return;
  try {
    stream.write(text);
  } catch {
    brokenStreams.add(stream);
  }
}

/** Where a logger writes, and how (createLoggerTo); createLogger decides it from stderr. */
export interface LogDestination {
  /** Default: `process.stderr`, looked up at each write (tests swap its `write`). */
  readonly stream?: Writable;
  readonly format?: LogFormat;
  /** ANSI colours in the text format. */
  readonly colour?: boolean;
}

/** The process logger: on stderr, as text on a terminal and JSON otherwise (log-format.ts). */
export function createLogger(bindings: Record<string, unknown> = {}, level: LogLevel = levelFromEnv()): Logger {
  return createLoggerTo(logStyleFor(process.stderr.isTTY === true), bindings, level);
}

/** A logger writing to `destination` (createLogger's, with the stream and the style chosen by the caller). */
export function createLoggerTo(
  destination: LogDestination,
  bindings: Record<string, unknown> = {},
  level: LogLevel = levelFromEnv(),
): Logger {
  const text = destination.format === 'text';
  const colour = destination.colour === true;
  // Called by pino synchronously, in the log call: lines keep their order with other output.
  const sink = {
    write(line: string): void {
      writeStandardStream(destination.stream ?? process.stderr, text ? asText(line, colour) : line);
    },
  };
  const root = pino(
    {
      level,
      base: undefined, // no pid, no hostname
      timestamp: pino.stdTimeFunctions.isoTime,
      serializers: {}, // Errors are serialized by `formatters.log` whatever their key, not pino's `err` alone
      formatters: {
        level: (label) => ({ level: label }),
        log: loggableFields,
      },
      // The log context's fields (log-context.ts); the record's own (bindings, fields) win: pino
      // assigns them over the mixin's.
      mixin: () => ({ ...logContextFields() }),
    },
    sink,
  );
  return bound(root, bindings);
}

/**
 * A Logger writing through `root` with `bindings` on every record. Bindings are merged into each
 * record here rather than made pino child bindings: a field of the same name then replaces its
 * binding (the record has the key once), as a record's fields always have.
 */
function bound(root: PinoLogger, bindings: Record<string, unknown>): Logger {
  const at =
    (level: Exclude<LogLevel, 'silent'>) =>
    (message: string, fields?: Record<string, unknown>): void => {
      if (!root.isLevelEnabled(level)) return;
      try {
        root[level]({ ...bindings, ...fields }, message);
      } catch {
        // Fields pino cannot serialize (a throwing getter or toJSON): the line is still written, saying so.
        root[level]({ note: 'fields not serializable' }, message);
      }
    };
  return {
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    child: (more) => bound(root, { ...bindings, ...more }),
  };
}

/** Errors among the values as toLoggable has them, whatever their key. */
function loggableFields(fields: Record<string, unknown> | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(fields ?? {})) out[key] = toLoggable(value);
  return out;
}

/** pino's JSON line as the text line (log-format.ts); a line that is somehow not JSON goes out as it is. */
function asText(line: string, colour: boolean): string {
  try {
    return formatTextRecord(JSON.parse(line) as Record<string, unknown>, colour);
  } catch {
    return line;
  }
}

/**
 * `log`, writing each record inside `context`: for a logger owned by the thing the context
 * describes (a session's own), so that its records are stamped even when written from outside
 * that thing's work — a timer, a peer's callback. Children keep the context.
 */
export function withLogContext(log: Logger, context: LogContext): Logger {
  return {
    debug: (message, fields) => runWithLogContext(context, () => log.debug(message, fields)),
    info: (message, fields) => runWithLogContext(context, () => log.info(message, fields)),
    warn: (message, fields) => runWithLogContext(context, () => log.warn(message, fields)),
    error: (message, fields) => runWithLogContext(context, () => log.error(message, fields)),
    child: (bindings) => withLogContext(log.child(bindings), context),
  };
}
