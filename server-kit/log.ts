/**
 * Structured logging: one JSON object per line on stderr, so operators can ship it as is.
 * `ARCLIGHT_LOG=debug|info|warn|error|silent` sets the level (default info; tests use warn).
 */

export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent';
const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
  child(bindings: Record<string, unknown>): Logger;
}

function levelFromEnv(): LogLevel {
  const value = process.env['ARCLIGHT_LOG'];
  return value && value in ORDER ? (value as LogLevel) : 'info';
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
const brokenStreams = new WeakSet<NodeJS.WriteStream>();
function guardStream(stream: NodeJS.WriteStream): void {
  if (stream.listeners('error').includes(markBroken)) return;
  stream.on('error', markBroken);
}
function markBroken(this: NodeJS.WriteStream): void {
  brokenStreams.add(this);
}

/** Writes to stdout or stderr unless it has failed before (then drops it). Never throws. */
export function writeStandardStream(stream: NodeJS.WriteStream, text: string): void {
  guardStream(stream);
  if (brokenStreams.has(stream) || stream.destroyed) return;
  try {
    stream.write(text);
  } catch {
    brokenStreams.add(stream);
  }
}

export function createLogger(bindings: Record<string, unknown> = {}, level: LogLevel = levelFromEnv()): Logger {
  const write = (at: LogLevel, message: string, fields?: Record<string, unknown>): void => {
    if (ORDER[at] < ORDER[level]) return;
    const record: Record<string, unknown> = { time: new Date().toISOString(), level: at, msg: message, ...bindings };
    if (fields) for (const [key, value] of Object.entries(fields)) record[key] = toLoggable(value);
    let line: string;
    try {
      line = JSON.stringify(record);
    } catch {
      line = JSON.stringify({ time: record['time'], level: at, msg: message, note: 'fields not serializable' });
    }
    writeStandardStream(process.stderr, line + '\n');
  };
  return {
    debug: (m, f) => write('debug', m, f),
    info: (m, f) => write('info', m, f),
    warn: (m, f) => write('warn', m, f),
    error: (m, f) => write('error', m, f),
    child: (more) => createLogger({ ...bindings, ...more }, level),
  };
}
