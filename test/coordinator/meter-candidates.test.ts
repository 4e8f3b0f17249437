/**
 * The meter's candidates on SQLite and PostgreSQL: an ended session is done once its whole seconds
 * up to its end are billed — a flush no longer locks its account. (The candidate query read
 * `billed_seconds < ended_at − ready_at / 1000`: Kysely adds no parentheses, so every ended session
 * below its maximum duration stayed a candidate for good, and every flush locked the accounts of
 * all of them; and SQLite divided by the bound 1000 as a REAL, so an end between two whole seconds
 * would have kept it one too.)
 */

import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startCoordinator, type Coordinator } from '../../coordinator/index.ts';
import { ENGINES, freshDatabase } from './storage-engines.ts';

const START = Date.UTC(2026, 10, 22, 12, 0, 0);

describe.each(ENGINES)('meter candidates on %s', (engine) => {
  let coordinator: Coordinator;
  let now = START;

  beforeAll(async () => {
    coordinator = await startCoordinator({
      database: await freshDatabase(engine),
      port: 0,
      now: () => now,
      meterFlushMs: 0,
      signupCredits: 0,
    });
    await coordinator.catalog.add('pattern', 5);
  });
  afterAll(async () => coordinator?.close());

  it('an ended session billed to its last whole second is no longer a candidate', async () => {
    const account = await coordinator.accounts.create('Fractional', {}, now);
    await coordinator.ledger.grantPromotional(account.id, 10_000);
    const { key } = await coordinator.apiKeys.create(account.id, { now });
    const minted = await fetch(`${coordinator.url}/tokens`, { method: 'POST', headers: { 'Service-API-Key': key } });
    const { token } = (await minted.json()) as { token: string };
    const created = await fetch(`${coordinator.url}/sessions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: { name: 'pattern' } }),
    });
    const { session_id: sessionId } = (await created.json()) as { session_id: string };
    await coordinator.sessions.markReady(sessionId);
    now = START + 10_900;
    const ended = await fetch(`${coordinator.url}/sessions/${sessionId}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${key}` },
    });
    expect(ended.status).toBe(200);
    expect((await coordinator.sessions.get(sessionId))?.billed_seconds).toBe(10);
    // A flush locks (and charges) the accounts of its candidates: this one is not among them any more.
    const locked = vi.spyOn(coordinator.ledger, 'lockAccount');
    try {
      now = START + 60_000;
      await coordinator.meter.flush();
      expect(locked.mock.calls.map(([, id]) => id)).not.toContain(account.id);
      expect((await coordinator.sessions.get(sessionId))?.billed_seconds).toBe(10);
    } finally {
      locked.mockRestore();
    }
  });
});
