/**
 * Several coordinator processes on one database (what a deployment with replicas runs — on
 * PostgreSQL, or on one host's SQLite file with `--workers`): 1,000 concurrent `POST /sessions`,
 * spread over them, on one token with max_sessions k admit exactly k; and across many tokens the
 * account's concurrency quota is never exceeded. What makes this hold is the admission
 * transaction's lock — the account's row on PostgreSQL, the write lock taken at BEGIN IMMEDIATE on
 * SQLite (without it, both processes see the same free capacity and both insert, or one fails).
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCoordinator } from '../../coordinator/index.ts';
import { freePort, killProcess, startCoordinatorProcess, type CoordinatorProcess } from '../support/coordinator-process.ts';
import { ENGINES, freshDatabase, type Engine } from './storage-engines.ts';

const REQUESTS = 1_000;

/** Two independent processes on each engine; and one `--workers 2` coordinator on SQLite (one URL). */
const SETUPS: ReadonlyArray<{ name: string; engine: Engine; workers: boolean }> = [
  ...ENGINES.map((engine) => ({ name: `two processes on ${engine}`, engine, workers: false })),
  { name: 'arclight coordinator --workers 2 on sqlite', engine: 'sqlite', workers: true },
];

describe.each(SETUPS)('$name', ({ engine, workers }) => {
  let replicas: CoordinatorProcess[] = [];
  let key: string;
  let quotaKey: string;

  beforeAll(async () => {
    const database = await freshDatabase(engine);
    const seed = await startCoordinator({ database, port: 0, meterFlushMs: 0 });
    await seed.catalog.add('pattern', 5);
    const roomy = await seed.accounts.create('Roomy', { concurrentSessions: 10_000, sessionsPerMinute: 10_000 });
    await seed.ledger.grantPromotional(roomy.id, 1_000_000);
    ({ key } = await seed.apiKeys.create(roomy.id));
    const quota = await seed.accounts.create('Quota', { concurrentSessions: 5, sessionsPerMinute: 10_000 });
    await seed.ledger.grantPromotional(quota.id, 1_000_000);
    ({ key: quotaKey } = await seed.apiKeys.create(quota.id));
    await seed.close();
    replicas = workers
      ? [await startCoordinatorProcess({ database, port: await freePort(), extraArgs: ['--workers', '2'] })]
      : await Promise.all([0, 1].map(async () => startCoordinatorProcess({ database, port: await freePort() })));
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
  /** `tokens[i % n]` to the replicas in turn, all at once; the statuses. */
  const stampede = async (tokens: readonly string[]): Promise<number[]> =>
    Promise.all(
      Array.from({ length: REQUESTS }, (_, i) =>
        fetch(`${replicas[i % replicas.length]!.url}/sessions`, {
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
