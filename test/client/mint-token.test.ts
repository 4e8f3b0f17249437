/**
 * `mintToken` (arclight/client/server) against a real coordinator on 127.0.0.1 (SQLite): the
 * request it sends (scoped and unscoped), `expiresAt` in milliseconds, and every refusal mapped
 * to an `ArclightError` carrying the coordinator's code, message, status and field.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ArclightError, mintToken } from 'arclight/client/server';
import { startCoordinator, type Coordinator } from '../../coordinator/index.ts';
import { createLogger } from '../../server-kit/log.ts';
import { freshDatabase } from '../coordinator/storage-engines.ts';

describe('mintToken', () => {
  let coordinator: Coordinator;
  let apiKey: string;
  let revokedKey: string;

  beforeAll(async () => {
    coordinator = await startCoordinator({
      database: await freshDatabase('sqlite'),
      port: 0,
      meterFlushMs: 0,
      logger: createLogger({ test: 'mint-token' }, 'warn'),
    });
    await coordinator.catalog.add('pattern', 5);
    const account = await coordinator.accounts.create('Acme');
    ({ key: apiKey } = await coordinator.apiKeys.create(account.id));
    const revoked = await coordinator.apiKeys.create(account.id);
    await coordinator.apiKeys.revoke(revoked.record.id);
    revokedKey = revoked.key;
  });
  afterAll(async () => {
    await coordinator?.close();
  });

  /** The rejection of `promise`, which must be an ArclightError. */
  async function refusal(promise: Promise<unknown>): Promise<ArclightError> {
    const error = await promise.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ArclightError);
    return error as ArclightError;
  }

  it('mints a session-scoped token: the RFC 9396 entry echoed with defaults, expiresAt in ms', async () => {
    const before = Date.now();
    const minted = await mintToken({
      coordinatorUrl: `${coordinator.url}/`,
      apiKey,
      models: ['pattern'],
      maxSessionDurationSeconds: 600,
      expiresAfter: 120,
    });
    expect(minted.token.split('.')).toHaveLength(3); // a JWT
    expect(minted.expiresAt).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000 + 120_000);
    expect(minted.expiresAt).toBeLessThanOrEqual(Date.now() + 121_000);
    expect(minted.authorizationDetails).toEqual([
      {
        type: 'session',
        resources: { models: { match: ['pattern'] } },
        constraints: { max_sessions: 5, max_session_duration_seconds: 600 },
      },
    ]);
    const verified = await coordinator.tokens.verify(minted.token);
    expect(verified).toBeDefined();
  });

  it('mints an unscoped token when no scope is asked for', async () => {
    const minted = await mintToken({ coordinatorUrl: coordinator.url, apiKey });
    expect(minted.authorizationDetails).toBeUndefined();
    expect(minted.expiresAt - Date.now()).toBeGreaterThan(3_590_000); // the default hour
  });

  it('maps a bad or revoked key to unauthorized (401)', async () => {
    for (const key of ['rk_not-a-key', revokedKey, 'no-prefix']) {
      const error = await refusal(mintToken({ coordinatorUrl: coordinator.url, apiKey: key, models: ['pattern'] }));
      expect(error.code).toBe('unauthorized');
      expect(error.status).toBe(401);
      expect(error.retryable).toBe(false);
      expect(error.message).toMatch(/API key/);
    }
  });

  it("maps a model out of reach to forbidden and a bad bound to invalid_request with the coordinator's field", async () => {
    const forbidden = await refusal(mintToken({ coordinatorUrl: coordinator.url, apiKey, models: ['no-such-model'] }));
    expect(forbidden.code).toBe('forbidden');
    expect(forbidden.status).toBe(403);
    const invalid = await refusal(mintToken({ coordinatorUrl: coordinator.url, apiKey, models: ['pattern'], maxSessions: 0 }));
    expect(invalid.code).toBe('invalid_request');
    expect(invalid.status).toBe(400);
    expect(invalid.field).toBe('/authorization_details/0/constraints/max_sessions');
  });

  it('throws TypeError for scope without models, and connection_failed when nothing listens', async () => {
    await expect(mintToken({ coordinatorUrl: coordinator.url, apiKey, bind: ['x'] })).rejects.toBeInstanceOf(TypeError);
    const gone = await startCoordinator({ database: ':memory:', port: 0, meterFlushMs: 0, logger: createLogger({}, 'silent') });
    const url = gone.url;
    await gone.close();
    const error = await refusal(mintToken({ coordinatorUrl: url, apiKey, models: ['pattern'] }));
    expect(error.code).toBe('connection_failed');
    expect(error.retryable).toBe(true);
  });
});
