/**
 * Request bodies read with a ceiling, for the runtime and the coordinator alike: a declared
 * Content-Length above it is refused before a byte is read, and a body without one (chunked,
 * or one that never ends) is read only up to the ceiling, then refused — never buffered whole.
 */

import { ArclightError } from '../../protocol/errors.ts';

/**
 * JSON text is UTF-8 (RFC 8259 §8.1). A lenient decoder turns bad bytes inside a string value
 * into U+FFFD, so a name or reason the sender never wrote would be accepted and stored; refusing
 * them is the only answer that does not guess. `ignoreBOM` keeps a byte-order mark in the text,
 * where JSON.parse refuses it, as before.
 */
const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

export async function readBodyText(request: Request, maxBytes: number): Promise<string> {
  const declared = request.headers.get('content-length');
  if (declared !== null && Number(declared) > maxBytes) {
    throw new ArclightError('payload_too_large', `The body is ${declared} bytes; the limit is ${maxBytes}.`);
  }
  if (!request.body) return '';
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > maxBytes) {
      reader.cancel().catch(() => {});
      throw new ArclightError('payload_too_large', `The body exceeds ${maxBytes} bytes.`);
    }
    chunks.push(value);
  }
  try {
    return UTF8.decode(Buffer.concat(chunks));
  } catch {
    throw new ArclightError('invalid_json', 'The body is not valid UTF-8.');
  }
}
