/**
 * Presigned URLs: `<path>?expires=<unix s>&signature=<hex>`, where the signature is an HMAC-SHA256
 * over the method, the path and the expiry. Whoever holds the URL may do that one thing until
 * then; changing the path, the method or the expiry breaks the signature, so a URL can be neither
 * forged nor extended. The key is the runtime's (random per process: uploads live and die with
 * its sessions), so only the runtime that issued a URL honours it.
 */

import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { ArclightError } from '../../protocol/errors.ts';

export type SignatureCheck = 'valid' | 'expired' | 'forged';

export class UrlSigner {
  readonly #key: Buffer;
  readonly #now: () => number;

  constructor(options: { key?: Buffer; now?: () => number } = {}) {
    this.#key = options.key ?? randomBytes(32);
    this.#now = options.now ?? Date.now;
  }

  /** `path` with the query that lets `method` on it until `expiresAt` (ms since the epoch). */
  sign(method: 'GET' | 'PUT', path: string, expiresAt: number): string {
    const expires = Math.floor(expiresAt / 1000);
    return `${path}?expires=${expires}&signature=${this.#mac(method, path, expires).toString('hex')}`;
  }

  /** Checks a request's `expires` and `signature` query values against its method and path. */
  check(method: string, path: string, expires: string | undefined, signature: string | undefined): SignatureCheck {
    if (expires === undefined || signature === undefined || !/^\d{1,12}$/.test(expires) || !/^[0-9a-f]{64}$/.test(signature))
      return 'forged';
    const expected = this.#mac(method, path, Number(expires));
    if (!timingSafeEqual(expected, Buffer.from(signature, 'hex'))) return 'forged';
    // Checked after the signature, so an expired URL is told apart only when it was genuine.
    return Number(expires) * 1000 <= this.#now() ? 'expired' : 'valid';
  }

  #mac(method: string, path: string, expires: number): Buffer {
    return createHmac('sha256', this.#key).update(`${method}\n${path}\n${expires}`).digest();
  }
}

/** Throws the HTTP answer for a request URL that is not validly signed for `method`: 403 forbidden or url_expired. */
export function requireSignature(signer: UrlSigner, method: 'GET' | 'PUT', url: URL): void {
  const verdict = signer.check(
    method,
    url.pathname,
    url.searchParams.get('expires') ?? undefined,
    url.searchParams.get('signature') ?? undefined,
  );
  if (verdict === 'expired') throw new ArclightError('url_expired', 'This presigned URL has expired; request a new one.');
  if (verdict === 'forged') throw new ArclightError('forbidden', 'This URL is not a valid presigned URL.');
}
