/**
 * The presigned-URL signer on its own: a URL is good for exactly the method, path and expiry it
 * was signed with, under the key that signed it; the expiry is inside the signature, so moving
 * it (to extend a URL) makes the URL forged, not expired; and a genuine URL expires on the clock
 * given, at its expiry second.
 */

import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { requireSignature, UrlSigner } from './url-signer.ts';

const PATH = '/sessions/s1/uploads/u1';

/** The `expires` and `signature` of a signed `path?query`. */
function query(signed: string): { path: string; expires: string; signature: string } {
  const url = new URL(signed, 'http://runtime.test');
  return { path: url.pathname, expires: url.searchParams.get('expires')!, signature: url.searchParams.get('signature')! };
}

describe('UrlSigner', () => {
  const key = randomBytes(32);
  let now = 1_700_000_000_000;
  const signer = new UrlSigner({ key, now: () => now });
  const expiresAt = now + 5 * 60_000;

  it('accepts its own URL for the method and path it signed, until the expiry', () => {
    const { path, expires, signature } = query(signer.sign('GET', PATH, expiresAt));
    expect(path).toBe(PATH);
    expect(Number(expires)).toBe(Math.floor(expiresAt / 1000));
    expect(signer.check('GET', PATH, expires, signature)).toBe('valid');
  });

  it('binds the method and the path: a GET URL does not PUT, nor open another path', () => {
    const { expires, signature } = query(signer.sign('GET', PATH, expiresAt));
    expect(signer.check('PUT', PATH, expires, signature)).toBe('forged');
    expect(signer.check('GET', '/sessions/s1/uploads/u2', expires, signature)).toBe('forged');
    expect(signer.check('GET', '/sessions/s2/uploads/u1', expires, signature)).toBe('forged');
  });

  it('keeps the expiry inside the signature: a moved expiry is a forgery, whichever way', () => {
    const { expires, signature } = query(signer.sign('PUT', PATH, expiresAt));
    expect(signer.check('PUT', PATH, String(Number(expires) + 3600), signature)).toBe('forged');
    expect(signer.check('PUT', PATH, String(Number(expires) - 1), signature)).toBe('forged');
  });

  it('refuses forged signatures: another key, a flipped digit, junk, or none', () => {
    const { expires, signature } = query(signer.sign('GET', PATH, expiresAt));
    const otherKey = new UrlSigner({ now: () => now });
    expect(otherKey.check('GET', PATH, expires, signature)).toBe('forged');
    const flipped = (signature[0] === '0' ? '1' : '0') + signature.slice(1);
    expect(signer.check('GET', PATH, expires, flipped)).toBe('forged');
    expect(signer.check('GET', PATH, expires, signature.slice(2))).toBe('forged'); // too short
    expect(signer.check('GET', PATH, expires, 'zz'.repeat(32))).toBe('forged'); // not hex
    expect(signer.check('GET', PATH, 'soon', signature)).toBe('forged');
    expect(signer.check('GET', PATH, undefined, signature)).toBe('forged');
    expect(signer.check('GET', PATH, expires, undefined)).toBe('forged');
  });

  it('expires a genuine URL at its expiry second on the given clock', () => {
    const { expires, signature } = query(signer.sign('GET', PATH, expiresAt));
    const saved = now;
    try {
      now = Number(expires) * 1000 - 1;
      expect(signer.check('GET', PATH, expires, signature)).toBe('valid');
      now = Number(expires) * 1000;
      expect(signer.check('GET', PATH, expires, signature)).toBe('expired');
      // A forged URL stays forged after its claimed expiry: "expired" is told only of genuine ones.
      expect(signer.check('PUT', PATH, expires, signature)).toBe('forged');
    } finally {
      now = saved;
    }
  });

  it('requireSignature answers 403 forbidden or 403 url_expired', () => {
    const url = new URL(signer.sign('PUT', PATH, expiresAt), 'http://runtime.test');
    expect(() => requireSignature(signer, 'PUT', url)).not.toThrow();
    expect(() => requireSignature(signer, 'GET', url)).toThrow(expect.objectContaining({ code: 'forbidden', status: 403 }));
    const saved = now;
    try {
      now = expiresAt + 1_000;
      expect(() => requireSignature(signer, 'PUT', url)).toThrow(expect.objectContaining({ code: 'url_expired', status: 403 }));
    } finally {
      now = saved;
    }
  });
});
