/**
 * `Authorization: Bearer <credential>` on the session interface: a token minted by
 * `POST /tokens`, or — only where the spec allows it, from a server — the API key itself.
 */

import type { Context } from 'hono';
import { ArclightError } from '../../protocol/errors.ts';
import { API_KEY_PREFIX, type ApiKeyStore } from '../accounts/api-keys.ts';
import type { SessionActor } from '../sessions/session-store.ts';
import type { TokenService } from '../tokens/token-service.ts';

export interface BearerAuthenticator {
  /** The caller, from a token; or from an API key when `allowApiKey`. 401 otherwise. */
  actor(c: Context, options?: { allowApiKey?: boolean }): Promise<SessionActor>;
}

export function createBearerAuthenticator(tokens: TokenService, apiKeys: ApiKeyStore): BearerAuthenticator {
  return {
    async actor(c, options = {}) {
      const header = c.req.header('authorization') ?? '';
      const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
      if (!match) throw new ArclightError('unauthorized', 'Send a token as Authorization: Bearer <token> (mint one with POST /tokens).');
      const credential = match[1]!;
      if (credential.startsWith(API_KEY_PREFIX)) {
        if (!options.allowApiKey) throw new ArclightError('forbidden', 'An API key is not accepted here; use a token from POST /tokens.');
        const owner = await apiKeys.authenticate(credential);
        if (!owner) throw new ArclightError('unauthorized', 'The API key is not valid (unknown, revoked or malformed).');
        return { kind: 'api_key', accountId: owner.accountId, keyId: owner.keyId };
      }
      return { kind: 'token', token: await tokens.verify(credential) };
    },
  };
}
