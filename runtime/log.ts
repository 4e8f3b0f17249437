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
    process.stderr.write(line + '\n');
  };
  return {
    debug: (m, f) => write('debug', m, f),
    info: (m, f) => write('info', m, f),
    warn: (m, f) => write('warn', m, f),
    error: (m, f) => write('error', m, f),
    child: (more) => createLogger({ ...bindings, ...more }, level),
  };
}
