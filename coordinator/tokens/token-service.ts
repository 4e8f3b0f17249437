/**
 * Mints and verifies the JWTs that clients present as bearer tokens.
 *
 * The JWT says who and until when (`sub` = account, `jti` = token id, `exp`, `iss`, `aud`, and
 * `scp`: `session` or `unscoped`), signed ES256 with a `kid` from the keyring. What a token may
 * do — its models, max_sessions, its bound set — lives in the database under its id, so the
 * bound set can grow as the token creates sessions and never appears in claims.
 */

import { randomUUID } from 'node:crypto';
import { SignJWT, errors as joseErrors, jwtVerify, type JWTHeaderParameters } from 'jose';
import type { Kysely } from 'kysely';
import { ArclightError } from '../../protocol/errors.ts';
import type { ResolvedSessionAuthorizationDetail, TokenResponse } from '../../protocol/coordinator.ts';
import type { ModelCatalog } from '../models/model-catalog.ts';
import type { CoordinatorDatabase } from '../storage/schema.ts';
import { TOKEN_ALGORITHM, type SigningKeyring } from './signing-keyring.ts';
import { VerifiedTokenCache } from './verified-token-cache.ts';
import { resolveMaxSessions, type ParsedTokenRequest } from './token-request.ts';

export interface TokenServiceOptions {
  /** `iss` of every token; verification requires it. */
  readonly issuer: string;
  /** `aud` of every token; verification requires it. */
  readonly audience: string;
  /** Milliseconds since the epoch; tests move it. */
  readonly now?: () => number;
}

/** A verified bearer token and what its record says it may do. */
export interface AuthenticatedToken {
  readonly tokenId: string;
  readonly accountId: string;
  /** The API key it was minted with (it may have been rotated since; revoked, the token is refused). */
  readonly apiKeyId: string;
  readonly scoped: boolean;
  /** Model slugs a scoped token may use; undefined when unscoped (every visible model). */
  readonly models: readonly string[] | undefined;
  readonly maxSessions: number | undefined;
  readonly maxSessionDurationSeconds: number | undefined;
  readonly expiresAt: number;
}

/** The claims a verified signature vouches for. */
interface VerifiedClaims {
  readonly jti: string;
  readonly sub: string;
  /** Seconds since the epoch. */
  readonly exp: number;
  /** The key that signed it: a cached verdict holds only while that key is not retired. */
  readonly kid: string;
}

/**
 * Longest bearer token read. Ours are ~0.5 KB (the bound set lives in the database, never in
 * claims); anything much longer is not ours, and is refused before decoding or verifying it.
 */
export const MAX_TOKEN_LENGTH = 4096;

/** Most tokens whose signatures stay remembered at once (~0.2 KB each; expired ones go sooner). */
const VERIFIED_CACHE_ENTRIES = 10_000;

/**
 * One message for every refused model or bind id, so a caller cannot tell an unknown session
 * from a foreign or closed one (or a private model from a missing one).
 */
const NOT_AVAILABLE = 'A model or session named in authorization_details is not available to this API key.';

export class TokenService {
  readonly #db: Kysely<CoordinatorDatabase>;
  readonly #keyring: SigningKeyring;
  readonly #catalog: ModelCatalog;
  readonly #options: TokenServiceOptions;
  readonly #now: () => number;
  readonly #verifiedClaims: VerifiedTokenCache<VerifiedClaims>;

  constructor(db: Kysely<CoordinatorDatabase>, keyring: SigningKeyring, catalog: ModelCatalog, options: TokenServiceOptions) {
    this.#db = db;
    this.#keyring = keyring;
    this.#catalog = catalog;
    this.#options = options;
    this.#now = options.now ?? Date.now;
    this.#verifiedClaims = new VerifiedTokenCache({ capacity: VERIFIED_CACHE_ENTRIES, now: this.#now });
  }

  async mint(key: { keyId: string; accountId: string }, request: ParsedTokenRequest): Promise<TokenResponse> {
    const now = this.#now();
    const expiresAtSeconds = Math.floor(now / 1000) + request.lifetimeSeconds;
    const tokenId = randomUUID();
    const { grant } = request;
    let detail: ResolvedSessionAuthorizationDetail | undefined;
    if (grant) {
      const visible = await this.#catalog.visibleTo(key.accountId, grant.models);
      if (visible.size !== grant.models.length) throw new ArclightError('forbidden', NOT_AVAILABLE);
      if (grant.bind.length > 0) {
        const open = await this.#db
          .selectFrom('sessions')
          .select('id')
          .where('id', 'in', [...grant.bind])
          .where('account_id', '=', key.accountId)
          .where('status', '!=', 'ended')
          .where(
            'model_id',
            'in',
            [...visible.values()].map((m) => m.id),
          )
          .execute();
        if (open.length !== grant.bind.length) throw new ArclightError('forbidden', NOT_AVAILABLE);
      }
      const maxSessions = resolveMaxSessions(grant);
      detail = {
        type: 'session',
        resources: { models: { match: grant.models }, ...(grant.bind.length > 0 ? { sessions: { bind: grant.bind } } : {}) },
        constraints: {
          max_sessions: maxSessions,
          ...(grant.maxSessionDurationSeconds !== undefined ? { max_session_duration_seconds: grant.maxSessionDurationSeconds } : {}),
        },
      };
    }
    const record = {
      id: tokenId,
      account_id: key.accountId,
      api_key_id: key.keyId,
      scoped: grant ? 1 : 0,
      models: grant ? JSON.stringify(grant.models) : null,
      max_sessions: detail ? detail.constraints.max_sessions : null,
      bound_sessions: grant ? grant.bind.length : 0,
      max_session_duration_seconds: grant?.maxSessionDurationSeconds ?? null,
      created_at: now,
      expires_at: expiresAtSeconds * 1000,
    };
    if (grant && grant.bind.length > 0) {
      // The token and its bindings appear together or not at all.
      await this.#db.transaction().execute(async (tx) => {
        await tx.insertInto('tokens').values(record).execute();
        await tx
          .insertInto('token_bindings')
          .values(grant.bind.map((sessionId) => ({ token_id: tokenId, session_id: sessionId })))
          .execute();
      });
    } else {
      await this.#db.insertInto('tokens').values(record).execute(); // one statement: no transaction needed
    }
    const signing = await this.#keyring.current();
    const header: JWTHeaderParameters = { alg: TOKEN_ALGORITHM, kid: signing.kid, typ: 'JWT' };
    const token = await new SignJWT({ scp: grant ? 'session' : 'unscoped' })
      .setProtectedHeader(header)
      .setIssuer(this.#options.issuer)
      .setAudience(this.#options.audience)
      .setSubject(key.accountId)
      .setJti(tokenId)
      .setIssuedAt(Math.floor(now / 1000))
      .setExpirationTime(expiresAtSeconds)
      .sign(signing.privateKey);
    return { token, token_type: 'Bearer', expires_at: expiresAtSeconds, ...(detail ? { authorization_details: [detail] } : {}) };
  }

  /**
   * Verifies signature, issuer, audience and expiry, then loads the token's record — with the
   * state of the API key that minted it, in the same read: a token of a revoked key is refused
   * (401 `token_revoked`) from the moment the revocation commits, on every replica. A rotated
   * key's tokens are not: rotation leaves what was minted before alone (spec: API key).
   */
  async verify(jwt: string): Promise<AuthenticatedToken> {
    if (jwt.length > MAX_TOKEN_LENGTH) throw new ArclightError('unauthorized', 'The bearer token is not valid.');
    let claims = this.#verifiedClaims.get(jwt);
    if (claims && !(await this.#keyring.verifies(claims.kid))) {
      this.#verifiedClaims.delete(jwt); // its signing key was retired
      claims = undefined;
    }
    claims ??= await this.#verifySignature(jwt);
    if (claims.exp * 1000 <= this.#now()) {
      this.#verifiedClaims.delete(jwt);
      throw new ArclightError('token_expired', 'The token has expired; mint a new one with POST /tokens.');
    }
    const row = await this.#db
      .selectFrom('tokens')
      .innerJoin('api_keys', 'api_keys.id', 'tokens.api_key_id')
      .selectAll('tokens')
      .select('api_keys.tokens_revoked_at as key_tokens_revoked_at')
      .where('tokens.id', '=', claims.jti)
      .executeTakeFirst();
    if (!row || row.account_id !== claims.sub) throw new ArclightError('unauthorized', 'The bearer token is not valid.');
    if (row.key_tokens_revoked_at !== null) {
      throw new ArclightError(
        'token_revoked',
        'The API key this token was minted with has been revoked; mint a new token with an active key.',
      );
    }
    return {
      tokenId: row.id,
      accountId: row.account_id,
      apiKeyId: row.api_key_id,
      scoped: row.scoped === 1,
      models: row.models === null ? undefined : (JSON.parse(row.models) as string[]),
      maxSessions: row.max_sessions ?? undefined,
      maxSessionDurationSeconds: row.max_session_duration_seconds ?? undefined,
      expiresAt: row.expires_at,
    };
  }

  /**
   * The signature check (jose), remembered per token string: a browser presents one token many
   * times (session polling, SDP, ICE), and the same string verifies the same way as long as its
   * key verifies — so an entry holds until the token expires (checked on every use) or its key is
   * retired (checked on every use against the keyring's copy). Bounded; the oldest entries go first.
   */
  async #verifySignature(jwt: string): Promise<VerifiedClaims> {
    let payload;
    let protectedHeader;
    /** The keyring failing (the database), as opposed to the token: not the caller's fault, so not a 401. */
    let lookupFailure: { error: unknown } | undefined;
    try {
      ({ payload, protectedHeader } = await jwtVerify(
        jwt,
        async (header) => {
          let key;
          try {
            key = header.kid ? await this.#keyring.publicKey(header.kid) : undefined;
          } catch (error) {
            lookupFailure = { error };
            throw error;
          }
          if (!key) throw new ArclightError('unauthorized', 'The token was not issued by this service.');
          return key;
        },
        {
          algorithms: [TOKEN_ALGORITHM],
          // Only access tokens we issue (typ JWT) are accepted, not other JWTs signed by the same key.
          typ: 'JWT',
          issuer: this.#options.issuer,
          audience: this.#options.audience,
          requiredClaims: ['exp', 'iat', 'jti', 'sub'],
          currentDate: new Date(this.#now()),
        },
      ));
    } catch (error) {
      if (lookupFailure) throw lookupFailure.error;
      if (error instanceof joseErrors.JWTExpired)
        throw new ArclightError('token_expired', 'The token has expired; mint a new one with POST /tokens.');
      if (error instanceof ArclightError) throw error;
      throw new ArclightError('unauthorized', 'The bearer token is not valid.', { cause: error });
    }
    const claims: VerifiedClaims = { jti: payload.jti!, sub: payload.sub!, exp: payload.exp!, kid: protectedHeader.kid! };
    this.#verifiedClaims.set(jwt, claims);
    return claims;
  }
}
