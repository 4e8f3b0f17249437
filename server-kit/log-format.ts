/**
 * How log records look: JSON lines for pipelines (what log shippers take as is), or, for a person
 * watching a terminal, one short line per record — `HH:MM:SS.mmm LEVEL message key=value
 * key="a b"` — with an error's stack on the indented lines below it, coloured when the terminal is
 * one. Our own small formatter rather than pino-pretty: that one runs in a worker thread, and a
 * log line must be on the terminal before the next line of other output, not some time later.
 */

export type LogFormat = 'json' | 'text';

export interface LogStyle {
  readonly format: LogFormat;
  /** ANSI colours (text only). */
  readonly colour: boolean;
}

/**
 * The style for a stream: text on a terminal, JSON otherwise; `ARCLIGHT_LOG_FORMAT=json|text`
 * overrides either way (text into a file or a pipe: a developer piping to `less`). Colours only
 * on a terminal, and not with `NO_COLOR` set (no-color.org).
 */
export function logStyleFor(isTTY: boolean, env: NodeJS.ProcessEnv = process.env): LogStyle {
  const asked = env['ARCLIGHT_LOG_FORMAT'];
  const format: LogFormat = asked === 'json' || asked === 'text' ? asked : isTTY ? 'text' : 'json';
  return { format, colour: format === 'text' && isTTY && !env['NO_COLOR'] };
}

const RESET = '\u001b[0m';
const DIM = '\u001b[2m';
const LEVEL_COLOUR: Readonly<Record<string, string>> = {
  debug: '\u001b[90m', // grey
  info: '\u001b[32m', // green
  warn: '\u001b[33m', // yellow
  error: '\u001b[31m', // red
};

/** Keys of the record itself, shown in their own places rather than as `key=value`. */
const RECORD_KEYS = new Set(['time', 'level', 'msg']);

/**
 * One record (a parsed JSON line of log.ts: `time`, `level`, `msg`, then bindings and fields) as
 * a text line, newline-terminated, with any error's stack on the lines after it.
 */
export function formatTextRecord(record: Readonly<Record<string, unknown>>, colour: boolean): string {
  const paint = (code: string, text: string): string => (colour && code ? `${code}${text}${RESET}` : text);
  const level = String(record['level'] ?? 'info');
  const parts = [
    paint(DIM, clockTime(record['time'])),
    paint(LEVEL_COLOUR[level] ?? '', level.toUpperCase().padEnd(5)),
    String(record['msg'] ?? ''),
  ];
  const stacks: string[] = [];
  for (const [key, value] of Object.entries(record)) {
    if (RECORD_KEYS.has(key) || value === undefined) continue;
    if (isSerializedError(value)) {
      parts.push(`${paint(DIM, `${key}=`)}${textValue(value.message)}`);
      stacks.push(...errorLines(value));
    } else {
      parts.push(`${paint(DIM, `${key}=`)}${textValue(value)}`);
    }
  }
  const tail = stacks.map((line) => `    ${paint(DIM, line)}\n`).join('');
  return `${parts.join(' ')}\n${tail}`;
}

/** `HH:MM:SS.mmm` in local time: the reader's own clock, the date being the day they are watching. */
function clockTime(iso: unknown): string {
  const parsed = typeof iso === 'string' ? new Date(iso) : new Date();
  const at = Number.isNaN(parsed.getTime()) ? new Date() : parsed;
  const two = (n: number): string => String(n).padStart(2, '0');
  return `${two(at.getHours())}:${two(at.getMinutes())}:${two(at.getSeconds())}.${String(at.getMilliseconds()).padStart(3, '0')}`;
}

/** A value as logfmt has it: bare when it is one word, quoted (JSON escapes) when not; objects as JSON. */
function textValue(value: unknown): string {
  if (typeof value === 'string') return /^[^\s"=\\\u0000-\u001f\u007f]+$/.test(value) ? value : JSON.stringify(value);
  if (value === null || typeof value !== 'object') return String(value);
  return JSON.stringify(value);
}

/** An Error as log.ts's toLoggable writes it: `{ name, message, stack, cause }`. */
interface SerializedError {
  readonly name?: unknown;
  readonly message: string;
  readonly stack?: unknown;
  readonly cause?: unknown;
}

function isSerializedError(value: unknown): value is SerializedError {
  if (typeof value !== 'object' || value === null) return false;
  const candidate = value as Record<string, unknown>;
  return typeof candidate['message'] === 'string' && (typeof candidate['stack'] === 'string' || typeof candidate['name'] === 'string');
}

/** The stack (or `name: message` without one), then each cause's, a few levels down at most. */
function errorLines(error: SerializedError, depth = 0): string[] {
  const own = typeof error.stack === 'string' ? error.stack : `${String(error.name ?? 'Error')}: ${error.message}`;
  const lines = own.split('\n').map((line) => line.trimEnd());
  if (depth > 0) lines[0] = `caused by: ${lines[0]!.trimStart()}`;
  if (depth < 4 && isSerializedError(error.cause)) lines.push(...errorLines(error.cause, depth + 1));
  return lines;
}
