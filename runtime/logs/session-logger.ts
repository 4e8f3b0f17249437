/**
 * A Logger that also keeps what it writes in a session's log: the session's own logger (and
 * every child of it — its connections, tracks, receivers) feeds the `runtime` lines, the model's
 * `session.log` the `model` lines. Debug lines go to the process log only: they are the
 * runtime's detail for its operators, not the session owner's story.
 *
 * Runtime lines lose any field whose name says it holds a credential: runtime code does not log
 * tokens, and this makes sure a future line cannot hand one to whoever reads the session's log.
 * The model's fields are its own and are kept as written.
 */

import type { JsonObject, JsonValue } from '../../protocol/json-schema.ts';
import type { SessionLogLevel, SessionLogSource } from '../../protocol/session-logs.ts';
import { toLoggable, type Logger } from '../../server-kit/log.ts';
import type { SessionLogBuffer } from './session-log-buffer.ts';

const CREDENTIAL_FIELD = /token|secret|password|signature|authorization|credential|api[-_]?key/i;
export const REDACTED = '[redacted]';

export function sessionLogger(
  base: Logger,
  buffer: SessionLogBuffer,
  source: SessionLogSource,
  bindings: Record<string, unknown> = {},
): Logger {
  const keep = (level: SessionLogLevel, message: string, fields: Record<string, unknown> | undefined): void => {
    const all = { ...bindings, ...fields };
    const json = toJsonFields(all, source === 'runtime');
    buffer.append({ level, source, message, ...(json ? { fields: json } : {}) });
  };
  return {
    debug: (message, fields) => base.debug(message, fields),
    info: (message, fields) => {
      base.info(message, fields);
      keep('info', message, fields);
    },
    warn: (message, fields) => {
      base.warn(message, fields);
      keep('warn', message, fields);
    },
    error: (message, fields) => {
      base.error(message, fields);
      keep('error', message, fields);
    },
    child: (more) => sessionLogger(base.child(more), buffer, source, { ...bindings, ...more }),
  };
}

/** Fields as JSON (Errors with name, message and stack; the unserializable noted), or undefined for none. */
function toJsonFields(fields: Record<string, unknown>, redact: boolean): JsonObject | undefined {
  const entries = Object.entries(fields);
  if (entries.length === 0) return undefined;
  const out: JsonObject = {};
  for (const [key, value] of entries) {
    if (redact && CREDENTIAL_FIELD.test(key)) {
      out[key] = REDACTED;
      continue;
    }
    try {
      const text = JSON.stringify(toLoggable(value));
      out[key] = text === undefined ? null : (JSON.parse(text) as JsonValue);
    } catch {
      out[key] = '[not serializable]';
    }
  }
  return out;
}
