/**
 * Time-limited TURN credentials in coturn's REST-API shared-secret scheme (coturn
 * `use-auth-secret` + `static-auth-secret`; draft-uberti-behave-turn-rest):
 *
 *   username   = `<unix expiry seconds>:<opaque id>`
 *   credential = base64(HMAC-SHA1(secret, username))
 *
 * The TURN server holds the same secret, recomputes the credential from the username it is
 * given, and refuses it once the expiry has passed. The runtime hands these out per request from
 * `GET /sessions/{sid}/transport/webrtc/ice_servers`; the secret itself never leaves the process.
 */

import { createHmac, randomUUID } from 'node:crypto';
import type { IceServerEntry } from '../../../protocol/transport.ts';

/** `RuntimeOptions.ice.turn`: a coturn (or compatible) server shared with the runtime by secret. */
export interface TurnOptions {
  /**
   * The TURN server's URLs as clients should use them, e.g.
   * `['turn:turn.example.com:3478?transport=udp', 'turn:turn.example.com:3478?transport=tcp']`
   * (`turns:` for TLS). Every URL gets the same credentials.
   */
  readonly urls: readonly string[];
  /** The secret configured as coturn's `static-auth-secret`. Never sent to clients. */
  readonly secret: string;
  /** How long each issued credential stays valid. Default 3600 (one hour). */
  readonly ttlSeconds?: number;
}

export const DEFAULT_TURN_TTL_SECONDS = 3600;

/** The username and password of one credential (coturn's REST-API scheme). */
export interface TurnCredential {
  readonly username: string;
  readonly password: string;
}

/** base64(HMAC-SHA1(secret, username)): what coturn computes for a `use-auth-secret` username. */
export function turnPassword(secret: string, username: string): string {
  return createHmac('sha1', secret).update(username, 'utf8').digest('base64');
}

/** A credential valid until `expiresAtSeconds` (unix seconds) for the opaque `id`. */
export function turnCredential(secret: string, expiresAtSeconds: number, id: string): TurnCredential {
  const username = `${expiresAtSeconds}:${id}`;
  return { username, password: turnPassword(secret, username) };
}

/** What the opaque part of a username may be: the session id when it looks like one (coturn logs it). */
const OPAQUE_ID = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * Issues a fresh TURN entry per request. Checks the options at construction, so a runtime with a
 * bad TURN configuration fails at start rather than at a client's first request.
 */
export class TurnCredentialIssuer {
  readonly #urls: readonly string[];
  readonly #secret: string;
  readonly #ttlSeconds: number;
  readonly #now: () => number;

  /** `now`: milliseconds since the epoch (tests move it). */
  constructor(options: TurnOptions, now: () => number = Date.now) {
    if (!Array.isArray(options.urls) || options.urls.length === 0) {
      throw new TypeError('ice.turn.urls: give at least one TURN URL, e.g. "turn:turn.example.com:3478"');
    }
    for (const url of options.urls) {
      if (typeof url !== 'string' || !/^turns?:[^\s]+$/.test(url)) {
        throw new TypeError(`ice.turn.urls: "${String(url)}" is not a turn: or turns: URL`);
      }
    }
    if (typeof options.secret !== 'string' || options.secret === '') {
      throw new TypeError('ice.turn.secret: the shared secret (coturn static-auth-secret) is required');
    }
    const ttl = options.ttlSeconds ?? DEFAULT_TURN_TTL_SECONDS;
    if (!Number.isInteger(ttl) || ttl <= 0) {
      throw new TypeError(`ice.turn.ttlSeconds must be a positive whole number of seconds; got ${String(options.ttlSeconds)}`);
    }
    this.#urls = [...options.urls];
    this.#secret = options.secret;
    this.#ttlSeconds = ttl;
    this.#now = now;
  }

  get ttlSeconds(): number {
    return this.#ttlSeconds;
  }

  /**
   * An ICE server entry for the TURN URLs with a credential expiring `ttlSeconds` from now. The
   * username's opaque part is `id` (the session id, so coturn's logs and per-user quota name the
   * session) when it is a plain token, otherwise a random UUID.
   */
  issue(id?: string): IceServerEntry {
    const expires = Math.floor(this.#now() / 1000) + this.#ttlSeconds;
    const opaque = id !== undefined && OPAQUE_ID.test(id) ? id : randomUUID();
    return { uris: [...this.#urls], credentials: turnCredential(this.#secret, expires, opaque) };
  }
}
