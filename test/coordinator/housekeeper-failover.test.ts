/**
 * One housekeeper among replicas, with failover (issue 20 part 2), on real PostgreSQL: three
 * coordinator processes flushing every 200 ms, a stub runtime holding three ready sessions. Only
 * the lease holder flushes the meter (its `arclight_coordinator_meter_ticks_total` rises, the
 * others' stay at 0). The holder is SIGKILLed mid-run; another replica takes the lease once it has
 * lapsed — never before — and billing goes on. At the end every session is billed exactly
 * ⌊ended − ready⌋ seconds in contiguous ticks: nothing charged twice, nothing lost.
 */

import { afterAll, describe, expect, it } from 'vitest';
import { startCoordinator, type Coordinator } from '../../coordinator/index.ts';
import { HOUSEKEEPING_LEASE } from '../../coordinator/housekeeping/housekeeper-lease.ts';
import { freePort, killProcess, startCoordinatorProcess, type CoordinatorProcess } from '../support/coordinator-process.ts';
import { newObservations, sleep, StubRuntime } from '../support/stub-runtime.ts';
import { waitUntil } from '../support/video-probe.ts';
import { freshDatabase } from './storage-engines.ts';

const SECRET = 'failover-secret';
const FLUSH_MS = 200;
const RATE = 5;
const SESSIONS = 3;

/** A replica's meter ticks written, from its /metrics. */
async function ticksWritten(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('arclight_coordinator_meter_ticks_total '));
  return line ? Number(line.split(' ')[1]) : 0;
}

describe('housekeeping on three replicas over PostgreSQL', () => {
  let seed: Coordinator | undefined;
  let replicas: CoordinatorProcess[] = [];
  let runtime: StubRuntime | undefined;

  afterAll(async () => {
    await runtime?.stop();
    for (const replica of replicas) await killProcess(replica.child);
    await seed?.close();
  });

  it('runs on the lease holder only; when it is killed another takes over after the lease lapses, and billing loses and doubles nothing', async () => {
    const database = await freshDatabase('postgres');
    seed = await startCoordinator({ database, port: 0, meterFlushMs: 0 });
    await seed.catalog.add('pattern', RATE);
    const account = await seed.accounts.create('Failover', { concurrentSessions: 10, sessionsPerMinute: 100 });
    await seed.ledger.grantPromotional(account.id, 1_000_000);
    const { key } = await seed.apiKeys.create(account.id);
    const ports = [await freePort(), await freePort(), await freePort()];
    replicas = await Promise.all(
      ports.map((port) =>
        startCoordinatorProcess({
          database,
          port,
          runtimeSecret: SECRET,
          extraArgs: ['--meter-flush-ms', String(FLUSH_MS), '--heartbeat-ms', '1000'],
        }),
      ),
    );
    const live = () => replicas.filter((r) => r.child.exitCode === null && r.child.signalCode === null).map((r) => r.url);
    runtime = new StubRuntime({
      id: 'gpu-a',
      replicas: live,
      secret: SECRET,
      slots: SESSIONS,
      observed: newObservations(),
      reportReady: true,
    });
    await runtime.start();
    const { token } = (await (
      await fetch(`${replicas[0]!.url}/tokens`, { method: 'POST', headers: { 'Service-API-Key': key } })
    ).json()) as { token: string };
    for (let i = 0; i < SESSIONS; i++) {
      const created = await fetch(`${replicas[i]!.url}/sessions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: { name: 'pattern' } }),
      });
      expect(created.status).toBe(200);
    }
    const db = seed.storage.db;
    const sessions = () => db.selectFrom('sessions').selectAll().orderBy('created_at').execute();
    const lease = () => db.selectFrom('leases').selectAll().where('name', '=', HOUSEKEEPING_LEASE).executeTakeFirstOrThrow();
    await waitUntil(
      async () => (await sessions()).every((s) => s.status === 'ready' && Number(s.billed_seconds) >= 1),
      30_000,
      'every session ready and billed',
    );

    // One holder; only it writes ticks.
    const before = await lease();
    const holder = replicas.find((r) => before.holder.includes(`:${r.child.pid}:`));
    expect(holder, `lease holder ${before.holder}`).toBeDefined();
    const ticks = await Promise.all(replicas.map((r) => ticksWritten(r.url)));
    for (const [i, replica] of replicas.entries()) {
      if (replica === holder) expect(ticks[i], 'the holder flushes').toBeGreaterThan(0);
      else expect(ticks[i], `replica ${i} is not the holder and flushes nothing`).toBe(0);
    }

    // Kill the holder between flushes.
    await sleep(FLUSH_MS * 0.4);
    const billedAtKill = (await sessions()).map((s) => Number(s.billed_seconds));
    const lastRenewal = (await lease()).expires_at;
    await killProcess(holder!.child);
    const killedAt = Date.now();
    let after = await lease();
    await waitUntil(async () => (after = await lease()).holder !== before.holder, 20_000, 'another replica to take the lease');
    const takeoverMs = Number(after.acquired_at) - killedAt;
    // Never taken while the dead holder's last renewal was still valid.
    expect(Number(after.acquired_at)).toBeGreaterThanOrEqual(Number(lastRenewal));
    // Billing goes on under the new holder.
    await waitUntil(
      async () => (await sessions()).every((s, i) => Number(s.billed_seconds) >= billedAtKill[i]! + 2),
      30_000,
      'billing to go on after the takeover',
    );

    // End them through a live replica; the final charge happens at once.
    for (const session of await sessions()) {
      const ended = await fetch(`${live()[0]}/sessions/${session.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${token}` } });
      expect(ended.status).toBe(200);
    }
    await sleep(FLUSH_MS * 3); // any flush in flight has landed
    for (const session of await sessions()) {
      const whole = Math.floor((session.ended_at! - session.ready_at!) / 1000);
      expect(Number(session.billed_seconds), session.id).toBe(whole);
      const rows = await db.selectFrom('meter_ticks').selectAll().where('session_id', '=', session.id).orderBy('seq').execute();
      let next = 0;
      for (const tick of rows) {
        expect(Number(tick.seq)).toBe(next); // contiguous: nothing twice, nothing skipped
        expect(Number(tick.credits)).toBe(Number(tick.seconds) * RATE);
        next += Number(tick.seconds);
      }
      expect(next).toBe(whole);
    }
    expect(await seed.ledger.reconcile()).toEqual([]);
    console.log(
      `[housekeeper-failover] lease lapsed ${Number(lastRenewal) - killedAt} ms after the kill (ttl ${FLUSH_MS * 1.5} ms); ` +
        `taken over ${takeoverMs} ms after the kill (bound: ttl + half a flush = ${FLUSH_MS * 2} ms on a quiet machine)`,
    );
  }, 120_000);
});
