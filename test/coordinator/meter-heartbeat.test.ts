/**
 * The meter bills a running session only up to its runtime's last heartbeat, on SQLite and
 * PostgreSQL: while heartbeats arrive, billing follows them (at most one interval behind, nothing
 * lost); when the runtime dies, the seconds between its last heartbeat and the reaping are never
 * charged, and the reaped session is billed exactly ⌊ended_at − ready_at⌋ seconds.
 *
 * The coordinator runs on a manual clock; the runtime is a registry row the test heartbeats for
 * (no runtime process: what is under test is the meter's reading of the heartbeat, and the
 * end-to-end SIGKILL of a real runtime is test/e2e/multi-host.browser.test.ts).
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCoordinator, type Coordinator } from '../../coordinator/index.ts';
import { ENGINES, freshDatabase } from './storage-engines.ts';

const START = Date.UTC(2026, 10, 26, 12, 0, 0);
const HEARTBEAT_MS = 5_000;
const RATE = 5;

describe.each(ENGINES)('meter and runtime heartbeats on %s', (engine) => {
  let coordinator: Coordinator;
  let now = START;
  let modelId = '';

  beforeAll(async () => {
    coordinator = await startCoordinator({
      database: await freshDatabase(engine),
      port: 0,
      now: () => now,
      meterFlushMs: 0,
      heartbeatIntervalMs: HEARTBEAT_MS,
    });
    modelId = (await coordinator.catalog.add('pattern', RATE)).id;
  });
  afterAll(async () => coordinator?.close());

  /** A ready session of a fresh account, served by a freshly registered runtime `runtimeId`. */
  const readySessionOn = async (runtimeId: string) => {
    const account = await coordinator.accounts.create(`Account of ${runtimeId}`);
    await coordinator.ledger.grantPromotional(account.id, 1_000_000);
    const { key } = await coordinator.apiKeys.create(account.id);
    const minted = await fetch(`${coordinator.url}/tokens`, {
      method: 'POST',
      headers: { 'Service-API-Key': key, 'content-type': 'application/json' },
      body: JSON.stringify({ authorization_details: [{ type: 'session', resources: { models: { match: ['pattern'] } } }] }),
    });
    const { token } = (await minted.json()) as { token: string };
    const created = await fetch(`${coordinator.url}/sessions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: { name: 'pattern' } }),
    });
    expect(created.status).toBe(200);
    const sessionId = ((await created.json()) as { session_id: string }).session_id;
    // Registered after the session was created, so POST /sessions placed nothing on it (the URL
    // is never called); the assignment is written as placement would.
    await coordinator.registry.register({
      id: runtimeId,
      url: 'http://127.0.0.1:9',
      modelId,
      slots: 1,
      capabilities: { protocol_version: '1.0', tracks: [] },
    });
    await coordinator.storage.db.updateTable('sessions').set({ runtime_id: runtimeId }).where('id', '=', sessionId).execute();
    await coordinator.sessions.markReady(sessionId);
    return { sessionId, accountId: account.id, readyAt: now };
  };
  const billed = async (sessionId: string) => {
    const ticks = await coordinator.storage.db.selectFrom('meter_ticks').select('seconds').where('session_id', '=', sessionId).execute();
    return ticks.reduce((sum, tick) => sum + Number(tick.seconds), 0);
  };
  const row = (sessionId: string) =>
    coordinator.storage.db.selectFrom('sessions').selectAll().where('id', '=', sessionId).executeTakeFirstOrThrow();

  it("bills a running session up to its runtime's last heartbeat, and catches up at the next one", async () => {
    now = START;
    const { sessionId, readyAt } = await readySessionOn(`alive-${engine}`);
    now = readyAt + 4_000;
    await coordinator.registry.heartbeat(`alive-${engine}`, false);
    now = readyAt + 8_700; // the next heartbeat is due at +9 s
    await coordinator.meter.flush();
    expect(await billed(sessionId)).toBe(4); // up to the heartbeat at +4 s, not to now
    now = readyAt + 9_000;
    await coordinator.registry.heartbeat(`alive-${engine}`, false);
    now = readyAt + 9_300;
    await coordinator.meter.flush();
    expect(await billed(sessionId)).toBe(9); // every second is charged once the heartbeat vouches for it
    expect(Number((await row(sessionId)).billed_seconds)).toBe(9);
  });

  it('a runtime that dies: its session is billed exactly to its last heartbeat, none of the stale window', async () => {
    now = START + 60_000;
    const { sessionId, readyAt } = await readySessionOn(`dead-${engine}`);
    for (let t = HEARTBEAT_MS; t <= 20_000; t += HEARTBEAT_MS) {
      now = readyAt + t;
      await coordinator.registry.heartbeat(`dead-${engine}`, false);
      await coordinator.meter.flush();
    }
    const lastHeartbeat = now; // +20 s; then it dies
    // Flushes during the stale window (three missed heartbeats) charge nothing past the heartbeat.
    for (let t = 1_000; t < 3 * HEARTBEAT_MS; t += 1_000) {
      now = lastHeartbeat + t;
      await coordinator.meter.flush();
      expect(await billed(sessionId), `${t} ms after the last heartbeat`).toBe(20);
    }
    now = lastHeartbeat + 3 * HEARTBEAT_MS + 500;
    expect(await coordinator.registry.reapStale()).toContain(sessionId); // (with the first test's, also silent by now)
    await coordinator.meter.flush();
    const ended = await row(sessionId);
    expect(ended).toMatchObject({ status: 'ended', ended_at: lastHeartbeat });
    expect(await billed(sessionId)).toBe(Math.floor((ended.ended_at! - ended.ready_at!) / 1000));
    expect(await billed(sessionId)).toBe(20);
  });

  it('a session with no runtime row (not yet placed when it became ready, e.g. in a store test) bills to now', async () => {
    now = START + 120_000;
    const account = await coordinator.accounts.create('Unplaced');
    await coordinator.ledger.grantPromotional(account.id, 1_000);
    const { key } = await coordinator.apiKeys.create(account.id);
    const minted = await fetch(`${coordinator.url}/tokens`, {
      method: 'POST',
      headers: { 'Service-API-Key': key, 'content-type': 'application/json' },
      body: JSON.stringify({}),
    });
    const { token } = (await minted.json()) as { token: string };
    const created = await fetch(`${coordinator.url}/sessions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: { name: 'pattern' } }),
    });
    const { session_id: sessionId } = (await created.json()) as { session_id: string };
    await coordinator.sessions.markReady(sessionId);
    now += 7_400;
    await coordinator.meter.flush();
    expect(await billed(sessionId)).toBe(7);
  });
});
