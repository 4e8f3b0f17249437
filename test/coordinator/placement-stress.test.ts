/**
 * Placement exactly once (issue 20 part 1), on SQLite and on real PostgreSQL: three coordinator
 * processes on one database, six stub runtimes with two slots each heartbeating every 100–200 ms
 * to random replicas, and 500 sessions created through random replicas. Sessions end three ways,
 * interleaved: the runtime ends most itself after a short life (POST …/ended to a random replica),
 * the client ends some (DELETE /sessions/:id, whether placed yet or not), and every placement pass
 * — POST /sessions, each heartbeat and end (onCapacity), housekeeping every 200 ms on every
 * replica — races the others for the same waiting sessions.
 *
 * The stub runtimes record what a real one would suffer: a start for a session already open on
 * it (a second placement), a session started on two runtimes, and a start arriving while all its
 * slots are still held (the coordinator filled a slot before the runtime had let it go). All
 * three must be 0, every session placed must have been started exactly once, and none may be left
 * waiting.
 */

import { afterAll, describe, expect, it } from 'vitest';
import { startCoordinator, type Coordinator } from '../../coordinator/index.ts';
import { freePort, killProcess, startCoordinatorProcess, type CoordinatorProcess } from '../support/coordinator-process.ts';
import { between, newObservations, pick, sleep, StubRuntime } from '../support/stub-runtime.ts';
import { ENGINES, freshDatabase } from './storage-engines.ts';

const SECRET = 'placement-stress-secret';
const REPLICAS = 3;
const RUNTIMES = 6;
const SLOTS = 2;
const SESSIONS = 500;
const CLIENT_CONCURRENCY = 24;

describe.each(ENGINES)('placement on %s: three replicas, six runtimes, 500 sessions', (engine) => {
  let seed: Coordinator | undefined;
  const replicas: CoordinatorProcess[] = [];
  const runtimes: StubRuntime[] = [];

  afterAll(async () => {
    for (const runtime of runtimes) await runtime.stop();
    for (const replica of replicas) await killProcess(replica.child);
    await seed?.close();
  });

  it('starts every session once, on one runtime, never into a held slot', async () => {
    const database = await freshDatabase(engine);
    // The seed sets up the catalog and an account, then only reads (no housekeeping, no HTTP use).
    seed = await startCoordinator({ database, port: 0, meterFlushMs: 0 });
    await seed.catalog.add('pattern', 5);
    const account = await seed.accounts.create('Stress', { concurrentSessions: 10_000, sessionsPerMinute: 10_000 });
    await seed.ledger.grantPromotional(account.id, 1_000_000);
    const { key } = await seed.apiKeys.create(account.id);
    // Runtimes are declared gone after 3 s of silence: they heartbeat every 100–200 ms.
    const ports = [];
    for (let i = 0; i < REPLICAS; i++) ports.push(await freePort());
    replicas.push(
      ...(await Promise.all(
        ports.map((port) =>
          startCoordinatorProcess({
            database,
            port,
            runtimeSecret: SECRET,
            extraArgs: ['--meter-flush-ms', '200', '--heartbeat-ms', '1000'],
          }),
        ),
      )),
    );
    const urls = replicas.map((r) => r.url);
    const minted = await fetch(`${urls[0]}/tokens`, { method: 'POST', headers: { 'Service-API-Key': key } });
    const { token } = (await minted.json()) as { token: string };
    const observed = newObservations();
    for (let i = 0; i < RUNTIMES; i++) {
      // Three quarters of its sessions end here after a short life; the rest wait for their client.
      const runtime = new StubRuntime({
        id: `stub-${i}`,
        replicas: () => urls,
        secret: SECRET,
        slots: SLOTS,
        observed,
        selfEndShare: 0.75,
        lifeMs: [20, 250],
      });
      runtimes.push(runtime);
      await runtime.start();
    }

    // The clients: SESSIONS creations through random replicas, CLIENT_CONCURRENCY at a time; a
    // quarter are ended by their client a moment later, placed or not.
    const created: string[] = [];
    let next = 0;
    const client = async () => {
      while (next < SESSIONS) {
        next++;
        const response = await fetch(`${pick(urls)}/sessions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: { name: 'pattern' } }),
        });
        const { session_id: sessionId } = (await response.json()) as { session_id: string };
        expect(response.status, JSON.stringify(sessionId)).toBe(200);
        created.push(sessionId);
        if (Math.random() < 0.25) {
          await sleep(between(0, 200));
          const ended = await fetch(`${pick(urls)}/sessions/${sessionId}`, {
            method: 'DELETE',
            headers: { authorization: `Bearer ${token}` },
          });
          await ended.arrayBuffer();
        }
      }
    };
    await Promise.all(Array.from({ length: CLIENT_CONCURRENCY }, client));

    // Sessions nobody ends (the stub keeps a quarter of those it starts until their client's
    // DELETE, which only a quarter send) would hold slots for good: end every session still open
    // once all were created, as their clients would in the end, and let placement drain the rest.
    const db = seed.storage.db;
    const openSessions = async () => await db.selectFrom('sessions').select(['id', 'runtime_id']).where('status', '!=', 'ended').execute();
    const deadline = Date.now() + 240_000;
    for (;;) {
      const open = await openSessions();
      if (open.length === 0) break;
      if (Date.now() > deadline) throw new Error(`${open.length} sessions still open after 240 s`);
      // Placed sessions the runtime keeps: their client ends them.
      for (const session of open.filter((s) => s.runtime_id !== null)) {
        await (
          await fetch(`${pick(urls)}/sessions/${session.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${token}` } })
        ).arrayBuffer();
      }
      await sleep(500);
    }

    const placed = await db.selectFrom('sessions').select(['id', 'runtime_id']).where('runtime_id', 'is not', null).execute();
    const twice = [...observed.starts].filter(([, n]) => n > 1);
    const onTwo = [...observed.startedOn].filter(([, on]) => on.size > 1);
    const report = {
      created: created.length,
      placed: placed.length,
      started: observed.starts.size,
      startedMoreThanOnce: twice.length,
      onTwoRuntimes: onTwo.length,
      duplicateStarts: observed.duplicateStarts,
      occupiedStarts: observed.occupiedStarts,
      declaredGone: observed.declaredGone,
    };
    console.log(`[placement-stress ${engine}] ${JSON.stringify(report)}`);
    expect(created).toHaveLength(SESSIONS);
    expect(report).toMatchObject({ startedMoreThanOnce: 0, onTwoRuntimes: 0, duplicateStarts: 0, occupiedStarts: 0 });
    // Every session placed was started, on the runtime it was placed on; none started unplaced.
    for (const session of placed) expect([...(observed.startedOn.get(session.id) ?? [])], session.id).toEqual([session.runtime_id]);
    expect(observed.starts.size).toBe(placed.length);
    // Most sessions were placed (the rest were ended by their client while still waiting).
    expect(placed.length).toBeGreaterThan(SESSIONS / 2);
  }, 300_000);
});
