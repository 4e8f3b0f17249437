/**
 * The coordinator's Prometheus metrics (GET /metrics): its HTTP traffic by route, the background
 * housekeeping (reaping, placement, the meter) and, read from the database at scrape time, the
 * fleet it sees — open sessions by status, runtimes by state. Each replica exports its own traffic
 * and housekeeping; the database-backed gauges are the same on every replica (sum them with max()).
 */

import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Kysely } from 'kysely';
import type { CoordinatorDatabase } from './storage/schema.ts';

/**
 * A scrape-time read, or undefined when the database does not answer: the gauge is then left out
 * and the rest of the exposition (the traffic counters, the /health 503s among them) still goes
 * out, which is what an operator needs during an outage.
 */
async function readOrNothing<T>(read: () => Promise<T>): Promise<T | undefined> {
  try {
    return await read();
  } catch {
    return undefined;
  }
}

/** Node's process metrics (prom-client's defaults: `process_*`, `nodejs_*`) come under this prefix. */
const PROCESS_METRICS_PREFIX = 'arclight_coordinator_';

/** Whether `name` is one of Node's process metrics rather than one this file declares. */
export function isProcessMetric(name: string): boolean {
  return /^arclight_coordinator_(process|nodejs)_/.test(name);
}

export class CoordinatorMetrics {
  readonly registry = new Registry();

  readonly requests = new Counter({
    name: 'arclight_coordinator_http_requests_total',
    help: 'HTTP requests answered, by method, route pattern and status',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [this.registry],
  });
  readonly requestDuration = new Histogram({
    name: 'arclight_coordinator_http_request_duration_seconds',
    help: 'Time to answer an HTTP request, by method and route pattern',
    labelNames: ['method', 'route'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [this.registry],
  });
  readonly housekeepingDuration = new Histogram({
    name: 'arclight_coordinator_housekeeping_duration_seconds',
    help: 'One housekeeping pass: reaping silent runtimes, ending expired sessions, placing waiting ones, the meter flush',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  readonly housekeeper = new Gauge({
    name: 'arclight_coordinator_housekeeper',
    help: '1 while this replica holds the housekeeping lease (reaping, placement sweeps, the meter flush run here), else 0',
    registers: [this.registry],
  });
  readonly meterTicks = new Counter({
    name: 'arclight_coordinator_meter_ticks_total',
    help: 'Per-session meter charges written by this replica',
    registers: [this.registry],
  });
  readonly sessionsReaped = new Counter({
    name: 'arclight_coordinator_sessions_reaped_total',
    help: 'Sessions ended because their runtime stopped heartbeating',
    registers: [this.registry],
  });

  constructor(db: Kysely<CoordinatorDatabase>) {
    // The process itself (heap, RSS, event-loop lag, GC), as the runtime exports it: a soak or an
    // operator can then tell a growing live heap from an allocator that has not given memory back.
    collectDefaultMetrics({ register: this.registry, prefix: PROCESS_METRICS_PREFIX });
    const registry = this.registry;
    new Gauge({
      name: 'arclight_coordinator_open_sessions',
      help: 'Sessions not yet ended, by status (from the database)',
      labelNames: ['status'] as const,
      registers: [registry],
      async collect() {
        // `in`, not `!= 'ended'`: the status index then skips the ended sessions, which pile up.
        const open = ['connecting', 'waiting', 'ready'] as const;
        const rows = await readOrNothing(() =>
          db
            .selectFrom('sessions')
            .select(['status', db.fn.countAll<number>().as('n')])
            .where('status', 'in', open)
            .groupBy('status')
            .execute(),
        );
        this.reset();
        if (!rows) return;
        for (const status of open) this.set({ status }, 0);
        for (const row of rows) this.set({ status: row.status }, Number(row.n));
      },
    });
    new Gauge({
      name: 'arclight_coordinator_runtimes',
      help: 'Registered runtimes by state: live (heartbeating, taking sessions), draining, gone (from the database)',
      labelNames: ['state'] as const,
      registers: [registry],
      async collect() {
        const rows = await readOrNothing(() =>
          db
            .selectFrom('runtimes')
            .select(['draining', 'gone', db.fn.countAll<number>().as('n')])
            .groupBy(['draining', 'gone'])
            .execute(),
        );
        this.reset();
        if (!rows) return;
        const counts = { live: 0, draining: 0, gone: 0 };
        for (const row of rows) counts[row.gone ? 'gone' : row.draining ? 'draining' : 'live'] += Number(row.n);
        for (const [state, n] of Object.entries(counts)) this.set({ state }, n);
      },
    });
  }
}
