/**
 * Two coordinator processes on one PostgreSQL (what a deployment with replicas runs): 1,000
 * concurrent `POST /sessions`, spread over both, on one token with max_sessions k admit exactly
 * k; and across many tokens the account's concurrency quota is never exceeded. The admission
 * transaction's account lock is what makes this hold (without it, both replicas see the same
 * free capacity and both insert).
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCoordinator } from '../../coordinator/index.ts';
import { freePort, killProcess, startCoordinatorProcess, type CoordinatorProcess } from '../support/coordinator-process.ts';
import { freshDatabase } from './storage-engines.ts';

const REQUESTS = 1_000;

describe('two coordinator processes on one PostgreSQL', () => {
  let replicas: CoordinatorProcess[] = [];
  let key: string;
  let quotaKey: string;

  beforeAll(async () => {
    const database = await freshDatabase('postgres');
    const seed = await startCoordinator({ database, port: 0, meterFlushMs: 0 });
    await seed.catalog.add('pattern', 5);
    const roomy = await seed.accounts.create('Roomy', { concurrentSessions: 10_000, sessionsPerMinute: 10_000 });
    await seed.ledger.grantPromotional(roomy.id, 1_000_000);
    ({ key } = await seed.apiKeys.create(roomy.id));
    const quota = await seed.accounts.create('Quota', { concurrentSessions: 5, sessionsPerMinute: 10_000 });
    await seed.ledger.grantPromotional(quota.id, 1_000_000);
    ({ key: quotaKey } = await seed.apiKeys.create(quota.id));
    await seed.close();
    replicas = await Promise.all([0, 1].map(async () => startCoordinatorProcess({ database, port: await freePort() })));
  }, 60_000);
  afterAll(async () => {
    for (const replica of replicas) await killProcess(replica.child);
  });

  const mint = async (apiKey: string, maxSessions: number): Promise<string> => {
    const response = await fetch(`${replicas[0]!.url}/tokens`, {
      method: 'POST',
      headers: { 'Service-API-Key': apiKey, 'content-type': 'application/json' },
      body: JSON.stringify({ authorization_details: [{ type: 'session', resources: { models: { match: ['pattern'] } }, constraints: { max_sessions: maxSessions } }] }),
    });
    return ((await response.json()) as { token: string }).token;
  };
  /** `tokens[i % n]` to replica `i % 2`, all at once; the statuses. */
  const stampede = async (tokens: readonly string[]): Promise<number[]> =>
    Promise.all(
      Array.from({ length: REQUESTS }, (_, i) =>
        fetch(`${replicas[i % 2]!.url}/sessions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${tokens[i % tokens.length]}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: { name: 'pattern' } }),
        }).then(async (r) => (await r.arrayBuffer(), r.status)),
      ),
    );

  it('admit exactly max_sessions of 1,000 concurrent creations on one token', async () => {
    const statuses = await stampede([await mint(key, 7)]);
    expect(statuses.filter((s) => s === 200)).toHaveLength(7);
    expect(statuses.filter((s) => s !== 200 && s !== 403)).toEqual([]);
  }, 60_000);

  it("never admit past the account's concurrency quota (5), whatever the tokens", async () => {
    const tokens = await Promise.all(Array.from({ length: 20 }, () => mint(quotaKey, 100)));
    const statuses = await stampede(tokens);
    expect(statuses.filter((s) => s === 200)).toHaveLength(5);
    expect(statuses.filter((s) => s !== 200 && s !== 429)).toEqual([]);
  }, 60_000);
});
