/**
 * Request bodies the coordinator reads: JSON within a size limit, with no NUL in any text
 * (PostgreSQL's text cannot hold one). Failures are `ArclightError`s for the shared HTTP error writer.
 */

import type { Context } from 'hono';
import { ArclightError } from '../../protocol/errors.ts';
import { readBodyText } from '../../server-kit/body-limit.ts';

/** Bodies above this are refused while reading, never buffered whole (a token request is a few hundred bytes). */
export const MAX_BODY_BYTES = 64 * 1024;

/** The body as parsed JSON; an empty body reads as `{}`. */
export async function readJson(c: Context): Promise<unknown> {
  const text = await readBodyText(c.req.raw, MAX_BODY_BYTES);
  if (text.trim() === '') return {};
  let value: unknown;
  try {
    value = JSON.parse(text) as unknown;
  } catch (error) {
    throw new ArclightError('invalid_json', `The body is not valid JSON: ${(error as Error).message}`);
  }
  // No text the coordinator stores or looks up may hold a NUL: PostgreSQL's text cannot, and one
  // reaching a query would be a 500 there (SQLite would store or miss it silently).
  if (text.includes('\\u0000') || text.includes('\u0000')) {
    const field = nulField(value, '');
    if (field !== undefined)
      throw new ArclightError('invalid_request', 'Text in the body may not contain the NUL character (U+0000).', { field });
  }
  return value;
}

/** Whether a request path, decoded, holds a NUL. */
export function hasNul(path: string): boolean {
  if (!path.includes('%00') && !path.includes('\u0000')) return false;
  try {
    return decodeURIComponent(path).includes('\u0000');
  } catch {
    return path.includes('\u0000');
  }
}

/** The JSON pointer of the first string (or key) holding a NUL, or undefined. */
function nulField(value: unknown, pointer: string): string | undefined {
  if (typeof value === 'string') return value.includes('\u0000') ? pointer : undefined;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = nulField(value[i], `${pointer}/${i}`);
      if (found !== undefined) return found;
    }
    return undefined;
  }
  if (typeof value === 'object' && value !== null) {
    for (const [key, item] of Object.entries(value)) {
      const at = `${pointer}/${key.replace(/~/g, '~0').replace(/\//g, '~1')}`;
      if (key.includes('\u0000')) return at;
      const found = nulField(item, at);
      if (found !== undefined) return found;
    }
  }
  return undefined;
}
