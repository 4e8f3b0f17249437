/**
 * What operators point their tooling at, on SQLite and PostgreSQL: `GET /health` (200 while the
 * database answers, 503 `unavailable` once it does not — what load balancers and Kubernetes
 * readiness act on) and `GET /metrics` (Prometheus text: requests by route pattern, never by raw
 * path; housekeeping; open sessions and runtimes from the database — left out, not failing the
 * scrape, while the database is down). A PostgreSQL connection the
 * server drops must not end the process (pg emits it as an error event nobody awaits).
 */

import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { startCoordinator, type Coordinator } from '../../coordinator/index.ts';
import { main as coordinatorCli } from '../../coordinator/cli.ts';
import { ENGINES, freshDatabase } from './storage-engines.ts';
import { SERVER_VERSION } from '../../protocol/versions.ts';

const SECRET = 'runtime-secret-for-operations';
const CAPABILITIES = { protocol_version: '1.0', tracks: [{ name: 'main_video', kind: 'video', direction: 'recvonly' }], commands: [] };

/** The value of one sample line of a Prometheus exposition, or undefined. */
function sample(exposition: string, series: string): number | undefined {
  const line = exposition.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe.each(ENGINES)('coordinator health and metrics on %s', (engine) => {
  let coordinator: Coordinator | undefined;
  afterEach(async () => {
    await coordinator?.close().catch(() => {});
    coordinator = undefined;
  });

  it('answers /health while its database does, and exports its traffic and fleet on /metrics', async () => {
    const database = await freshDatabase(engine);
    coordinator = await startCoordinator({ database, port: 0, meterFlushMs: 0, runtimeSecret: SECRET });
    const { url } = coordinator;
    const health = await fetch(`${url}/health`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: 'healthy', database: engine, version: SERVER_VERSION });

    // Some traffic: a runtime registers and heartbeats; a request with an id in its path.
    await coordinator.catalog.add('pattern', 5);
    const headers = { 'content-type': 'application/json', 'Arclight-Runtime-Secret': SECRET };
    const body = JSON.stringify({ id: 'rt-1', url: 'http://127.0.0.1:9', model: 'pattern', slots: 1, capabilities: CAPABILITIES });
    expect((await fetch(`${url}/runtimes`, { method: 'POST', headers, body })).status).toBe(200);
    expect((await fetch(`${url}/runtimes/rt-1/heartbeat`, { method: 'POST', headers, body: '{}' })).status).toBe(200);
    expect((await fetch(`${url}/sessions/0f1e2d3c-no-such-session`, { headers: { authorization: 'Bearer nope' } })).status).toBe(401);
    await coordinator.housekeeping();

    const response = await fetch(`${url}/metrics`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = await response.text();
    expect(sample(text, 'arclight_coordinator_http_requests_total{method="POST",route="/runtimes/:id/heartbeat",status="200"}')).toBe(1);
    expect(sample(text, 'arclight_coordinator_http_requests_total{method="GET",route="/sessions/:id",status="401"}')).toBe(1);
    expect(text).not.toContain('no-such-session'); // route patterns, never raw paths
    expect(sample(text, 'arclight_coordinator_runtimes{state="live"}')).toBe(1);
    expect(sample(text, 'arclight_coordinator_runtimes{state="gone"}')).toBe(0);
    expect(sample(text, 'arclight_coordinator_open_sessions{status="ready"}')).toBe(0);
    expect(sample(text, 'arclight_coordinator_housekeeping_duration_seconds_count')).toBe(1);
    expect(sample(text, 'arclight_coordinator_meter_ticks_total')).toBe(0);
    // Its process: memory (what a soak reads to tell heap growth from RSS), event-loop lag.
    expect(sample(text, 'arclight_coordinator_process_resident_memory_bytes')).toBeGreaterThan(0);
    expect(sample(text, 'arclight_coordinator_nodejs_heap_size_used_bytes')).toBeGreaterThan(0);
  });
});

// PostgreSQL only: a database server can go away under a running coordinator; an open SQLite file cannot.
describe('coordinator health on postgres', () => {
  let coordinator: Coordinator | undefined;
  afterEach(async () => {
    await coordinator?.close().catch(() => {});
    coordinator = undefined;
  });

  it('answers 503 unavailable once its database is gone', async () => {
    const database = await freshDatabase('postgres');
    coordinator = await startCoordinator({ database, port: 0, meterFlushMs: 0 });
    expect((await fetch(`${coordinator.url}/health`)).status).toBe(200);
    // Drop the database under it (FORCE ends its connections), as an outage would.
    const target = new URL(database);
    const name = target.pathname.slice(1);
    target.pathname = '/postgres';
    const admin = new pg.Client({ connectionString: target.toString() });
    await admin.connect();
    try {
      await admin.query(`DROP DATABASE "${name}" WITH (FORCE)`);
    } finally {
      await admin.end();
    }
    const down = await fetch(`${coordinator.url}/health`);
    expect(down.status).toBe(503);
    expect(await down.json()).toEqual({ code: 'unavailable', message: 'The coordinator cannot reach its database.' });
    // /metrics still answers, without the database-backed gauges: the outage itself is visible.
    const metrics = await fetch(`${coordinator.url}/metrics`);
    expect(metrics.status).toBe(200);
    const text = await metrics.text();
    expect(sample(text, 'arclight_coordinator_http_requests_total{method="GET",route="/health",status="503"}')).toBe(1);
    expect(text).not.toContain('arclight_coordinator_runtimes{');
  });
});

describe('arclight coordinator --public-url', () => {
  it('refuses what is not an http(s) origin (exit 2)', async () => {
    const write = process.stderr.write.bind(process.stderr);
    let stderr = '';
    process.stderr.write = ((chunk: string | Uint8Array) => ((stderr += String(chunk)), true)) as typeof process.stderr.write;
    try {
      expect(await coordinatorCli(['coordinator', '--public-url', 'ftp://files.example.com', '--port', '0'])).toBe(2);
    } finally {
      process.stderr.write = write;
    }
    expect(stderr).toContain('--public-url must be an http(s) origin');
    stderr = '';
    process.stderr.write = ((chunk: string | Uint8Array) => ((stderr += String(chunk)), true)) as typeof process.stderr.write;
    try {
      expect(await coordinatorCli(['coordinator', '--public-url', 'https://api.example.com/arclight', '--port', '0'])).toBe(2);
    } finally {
      process.stderr.write = write;
    }
    expect(stderr).toContain('(no path)');
  });
});
