/**
 * Coordinator throughput and latency: `POST /tokens` and `POST /sessions` on SQLite and on a
 * real PostgreSQL server (test/support/postgres.ts), and hono vs bare node:http on `POST /tokens`.
 *
 *   node --conditions=source --import tsx bench/coordinator-throughput.ts [--seconds 8] [--concurrency 32] [--rounds 3]
 *     [--engines sqlite,postgres] [--workers 2 | 1,2,4] [--load-processes 1] [--json out.json]
 *
 * The coordinator runs in a child process (bench/support/coordinator-server.ts); this process
 * only generates load: `--concurrency` requests in flight on keep-alive connections for
 * `--seconds` per phase, after a 1 s warm-up. Per phase: requests/s and latency percentiles.
 * `--engines`: sqlite, postgres or both (the default). `--workers N[,M…]`: each engine also runs
 * the real CLI, `arclight coordinator --workers N`, once per count (0: not) — on PostgreSQL that is
 * N replicas of the coordinator on one database, which is how issue 20 measures scaling out. `--load-processes K`: the load comes
 * from K child processes (bench/support/coordinator-load-child.ts) sharing `--concurrency`, for a
 * machine where one load process cannot keep N workers busy; latencies are merged, so the
 * percentiles are over all requests. On a machine without node_modules, see
 * scripts/bundle-coordinator-bench.mjs.
 * Each round measures every phase once (interleaved), figures are medians over rounds.
 * Goals (issue 4): ≥ 5,000 tokens/s, ≥ 1,000 sessions/s on SQLite, p99 ≤ 20 ms.
 */

import type { ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { AccountStore } from '../coordinator/accounts/account-store.ts';
import { ApiKeyStore } from '../coordinator/accounts/api-keys.ts';
import { CreditLedger } from '../coordinator/billing/credit-ledger.ts';
import { ModelCatalog } from '../coordinator/models/model-catalog.ts';
import { DEFAULT_PRICING } from '../coordinator/pricing/pricing.ts';
import { openStorage } from '../coordinator/storage/database.ts';
import {
  closedLoopLoad,
  LoadProcesses,
  requester,
  startListeningProcess,
  type LoadRequest,
  type PhaseResult,
} from './support/coordinator-load.ts';
import { loadavg, median } from './support/measure.ts';
import { finishReport, runBench, runInfo } from './support/report.ts';

const { values: args } = parseArgs({
  options: {
    seconds: { type: 'string', default: '8' },
    concurrency: { type: 'string', default: '32' },
    rounds: { type: 'string', default: '3' },
    engines: { type: 'string', default: 'sqlite,postgres' },
    workers: { type: 'string', default: '2' },
    'load-processes': { type: 'string', default: '1' },
    json: { type: 'string' },
  },
});
const SECONDS = Number(args.seconds);
const CONCURRENCY = Number(args.concurrency);
const ROUNDS = Number(args.rounds);
const ENGINES = args.engines.split(',').map((e) => e.trim());
// Coordinators on PostgreSQL refuse to start without a signing-key secret; the bench's children
// inherit this throwaway one (an operator's own is kept when set).
process.env['ARCLIGHT_SIGNING_KEY_SECRET'] ??= 'arclight-bench-only-signing-key-secret';
/** `--workers 1,2,4`: a workers phase per count (each the real CLI with that many processes). */
const WORKER_COUNTS = args.workers
  .split(',')
  .map((w) => Number(w.trim()))
  .filter((w) => w > 0);
const LOAD_PROCESSES = Number(args['load-processes']);
if (ENGINES.length === 0 || ENGINES.some((e) => e !== 'sqlite' && e !== 'postgres'))
  throw new Error('--engines: sqlite, postgres or sqlite,postgres');
if (args.workers.split(',').some((w) => !/^\s*\d+\s*$/.test(w)))
  throw new Error('--workers: counts of processes (1,2,4), 0 for no workers phase');
if (!Number.isInteger(LOAD_PROCESSES) || LOAD_PROCESSES < 1 || LOAD_PROCESSES > CONCURRENCY)
  throw new Error('--load-processes: 1 to --concurrency');

/** Accounts the POST /sessions load is spread over: a service's traffic comes from many tenants. */
const TENANTS = 2_000;

interface Setup {
  /** API keys, one per tenant account. */
  keys: string[];
}

/**
 * `TENANTS` accounts with a key and credits each, quotas out of the way, and a model. Spreading
 * session creation over many accounts keeps each account's open sessions as few as real
 * quotas would (the default is 5): one account with a million open sessions would measure
 * counting them, not admitting.
 */
async function setUp(database: string): Promise<Setup> {
  const storage = await openStorage(database);
  try {
    const accounts = new AccountStore(storage.db);
    const apiKeys = new ApiKeyStore(storage.db, storage.engine);
    const ledger = new CreditLedger(storage.db, storage.engine, DEFAULT_PRICING);
    await new ModelCatalog(storage.db).add('pattern', 5);
    const keys: string[] = [];
    for (let i = 0; i < TENANTS; i++) {
      const account = await accounts.create(`bench-${i}`, { concurrentSessions: 1e9, sessionsPerMinute: 1e9 });
      await ledger.grantPromotional(account.id, 1e12);
      keys.push((await apiKeys.create(account.id)).key);
    }
    return { keys };
  } finally {
    await storage.close();
  }
}

async function startServer(database: string, mode: 'hono' | 'raw' | 'workers', workers = 0): Promise<{ url: string; child: ChildProcess }> {
  // `workers`: the real CLI with `--workers` processes sharing the port (one per core).
  const script =
    mode === 'workers'
      ? ['bin/arclight.js', 'coordinator', '--port', '0', '--workers', String(workers), '--meter-flush-ms', '600000']
      : ['bench/support/coordinator-server.ts', '--mode', mode];
  return startListeningProcess([...script, '--database', database]);
}

/** Load processes (`--load-processes` > 1), started once and shared by every phase. */
let loadProcesses: LoadProcesses | undefined;

const load = (server: ChildProcess, spec: LoadRequest, expectStatus: number): Promise<PhaseResult> => {
  const options = { seconds: SECONDS, concurrency: CONCURRENCY, expectStatus };
  return loadProcesses ? loadProcesses.run(server, spec, options) : closedLoopLoad(server, requester(spec), options);
};

async function measureEngine(
  engine: string,
  database: string,
  withRaw: boolean,
  withWorkers: boolean,
): Promise<Record<string, PhaseResult[]>> {
  const { keys } = await setUp(database);
  const key = keys[0]!;
  const servers = {
    hono: await startServer(database, 'hono'),
    ...(withRaw ? { raw: await startServer(database, 'raw') } : {}),
  };
  // One coordinator (the real CLI) per workers count; each count is a set of processes sharing one
  // database, as replicas do.
  const workerServers = new Map<number, { url: string; child: ChildProcess }>();
  if (withWorkers) for (const n of WORKER_COUNTS) workerServers.set(n, await startServer(database, 'workers', n));
  const tokenBody = JSON.stringify({ authorization_details: [{ type: 'session', resources: { models: { match: ['pattern'] } } }] });
  const mintAt = (url: string): LoadRequest => ({
    url: `${url}/tokens`,
    method: 'POST',
    headers: { 'Service-API-Key': key, 'content-type': 'application/json' },
    body: tokenBody,
  });
  // Unscoped tokens create without a max_sessions cap, so a phase can create as many as it can;
  // one per tenant, taken in turn.
  const unscoped = await Promise.all(
    keys.map(
      async (k) =>
        (
          (await (await fetch(`${servers.hono.url}/tokens`, { method: 'POST', headers: { 'Service-API-Key': k } })).json()) as {
            token: string;
          }
        ).token,
    ),
  );
  const bearers = unscoped.map((token) => `Bearer ${token}`);
  const sessionBody = JSON.stringify({ model: { name: 'pattern' } });
  const createAt = (url: string): LoadRequest => ({
    url: `${url}/sessions`,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: sessionBody,
    rotate: { header: 'authorization', values: bearers },
  });
  const results: Record<string, PhaseResult[]> = {};
  const note = (name: string, r: PhaseResult) => {
    (results[name] ??= []).push(r);
    process.stdout.write(
      `  ${engine.padEnd(8)} ${name.padEnd(22)} ${r.perSecond.toFixed(0).padStart(6)}/s  p50 ${r.latencyMs.p50.toFixed(2)}  p99 ${r.latencyMs.p99.toFixed(2)}  max ${r.latencyMs.max.toFixed(1)} ms  server ${r.serverCpuMicros.toFixed(0)} µs CPU/req${r.errors ? `  ERRORS ${r.errors}` : ''}\n`,
    );
  };
  try {
    for (let round = 1; round <= ROUNDS; round++) {
      process.stdout.write(`round ${round}\n`);
      note('POST /tokens (hono)', await load(servers.hono.child, mintAt(servers.hono.url), 200));
      if ('raw' in servers) note('POST /tokens (node:http)', await load(servers.raw!.child, mintAt(servers.raw!.url), 200));
      for (const [n, server] of workerServers) note(`POST /tokens (${n} workers)`, await load(server.child, mintAt(server.url), 200));
      note('POST /sessions', await load(servers.hono.child, createAt(servers.hono.url), 200));
      for (const [n, server] of workerServers) note(`POST /sessions (${n} workers)`, await load(server.child, createAt(server.url), 200));
    }
  } finally {
    for (const server of [...Object.values(servers), ...workerServers.values()]) server.child.kill('SIGKILL');
  }
  return results;
}

await runBench('coordinator-throughput', async () => {
  const info = runInfo();
  process.stdout.write(
    `coordinator-throughput: ${ROUNDS} rounds × ${SECONDS} s per phase, ${CONCURRENCY} requests in flight` +
      `${LOAD_PROCESSES > 1 ? ` from ${LOAD_PROCESSES} load processes` : ''}, engines ${ENGINES.join(', ')}${WORKER_COUNTS.length ? `, workers ${WORKER_COUNTS.join(', ')}` : ''}\n${JSON.stringify(info)}\n`,
  );
  if (LOAD_PROCESSES > 1) loadProcesses = await LoadProcesses.start(LOAD_PROCESSES);
  const all: Record<string, Record<string, PhaseResult[]>> = {};
  try {
    if (ENGINES.includes('sqlite')) {
      const sqlite = join(mkdtempSync(join(tmpdir(), 'arclight-bench-')), 'coordinator.db');
      all['sqlite'] = await measureEngine('sqlite', sqlite, true, WORKER_COUNTS.length > 0);
    }
    if (ENGINES.includes('postgres')) {
      const { startPostgres } = await import('../test/support/postgres.ts');
      const postgres = await startPostgres();
      try {
        // Replicas on one PostgreSQL: the workers phases there measure how the service scales out.
        all['postgres'] = await measureEngine('postgres', await postgres.createDatabase('bench'), false, WORKER_COUNTS.length > 0);
      } finally {
        await postgres.stop();
      }
    }
  } finally {
    loadProcesses?.close();
  }
  process.stdout.write('\nmedians over rounds (min–max):\n');
  const summary: Record<string, unknown> = {};
  for (const [engine, phases] of Object.entries(all)) {
    for (const [name, runs] of Object.entries(phases)) {
      const rate = runs.map((r) => r.perSecond);
      const p99 = runs.map((r) => r.latencyMs.p99);
      const p50 = runs.map((r) => r.latencyMs.p50);
      const cpu = runs.map((r) => r.serverCpuMicros);
      summary[`${engine} ${name}`] = {
        perSecond: median(rate),
        p50: median(p50),
        p99: median(p99),
        serverCpuMicros: median(cpu),
        rounds: runs,
      };
      process.stdout.write(
        `  ${engine.padEnd(8)} ${name.padEnd(26)} ${median(rate).toFixed(0)}/s (${Math.min(...rate).toFixed(0)}–${Math.max(...rate).toFixed(0)})  p50 ${median(p50).toFixed(2)} ms  p99 ${median(p99).toFixed(2)} ms (${Math.min(...p99).toFixed(2)}–${Math.max(...p99).toFixed(2)})  server ${median(cpu).toFixed(0)} µs CPU/req → ${(1e6 / median(cpu)).toFixed(0)}/s per core\n`,
      );
    }
  }
  let ratios: number[] | undefined;
  if (all['sqlite']) {
    const hono = all['sqlite']['POST /tokens (hono)']!.map((r) => r.perSecond);
    const raw = all['sqlite']['POST /tokens (node:http)']!.map((r) => r.perSecond);
    ratios = hono.map((h, i) => h / raw[i]!);
    process.stdout.write(
      `  hono / node:http on POST /tokens (SQLite): ${median(ratios).toFixed(2)} (per round ${ratios.map((r) => r.toFixed(2)).join(', ')})\n`,
    );
  }
  const options = {
    engines: ENGINES,
    workers: WORKER_COUNTS,
    loadProcesses: LOAD_PROCESSES,
    concurrency: CONCURRENCY,
    seconds: SECONDS,
    rounds: ROUNDS,
  };
  finishReport(info, loadavg(), args.json, { options, summary, ...(ratios ? { honoOverRaw: ratios } : {}) });
});
