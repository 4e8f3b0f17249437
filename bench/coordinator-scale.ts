/**
 * What the coordinator's steady-state work costs per unit, for the capacity model in
 * docs/operations.md (issue 7): a runtime heartbeat over HTTP, one session's meter charge (the
 * per-second billing, flushed every `--meter-flush-ms`), and one transport request relayed to a
 * runtime (SDP offers and ICE requests go through the coordinator in hosted mode). On SQLite and
 * on a real PostgreSQL server (test/support/postgres.ts).
 *
 *   node --conditions=source --import tsx bench/coordinator-scale.ts [--seconds 5] [--rounds 3] [--runtimes 1000] [--sessions 2000] [--json out.json]
 *
 * Heartbeats and relays: the coordinator in a child process (bench/support/coordinator-server.ts),
 * `--concurrency` requests in flight from this process, server CPU per request from /proc. The
 * relay's runtime is a minimal HTTP server in this process that answers at once (labelled: it
 * stands for a runtime's HTTP side, so the figure is the coordinator's relay cost alone). Meter:
 * in this process, `SessionMeter.flush()` over `--sessions` ready sessions spread over accounts of
 * five, the clock moved one second per flush, so every flush charges every session.
 */

import type { ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { randomUUID } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { CoordinatorDatabase } from '../coordinator/storage/schema.ts';
import { AccountStore } from '../coordinator/accounts/account-store.ts';
import { ApiKeyStore } from '../coordinator/accounts/api-keys.ts';
import { CreditLedger } from '../coordinator/billing/credit-ledger.ts';
import { METER_CONCURRENCY_POSTGRES, SessionMeter } from '../coordinator/billing/session-meter.ts';
import { ModelCatalog } from '../coordinator/models/model-catalog.ts';
import { DEFAULT_PRICING } from '../coordinator/pricing/pricing.ts';
import { openStorage } from '../coordinator/storage/database.ts';
import { RUNTIME_SECRET_HEADER } from '../protocol/coordinator.ts';
import { startPostgres } from '../test/support/postgres.ts';
import { closedLoopLoad, startListeningProcess, type PhaseResult } from './support/coordinator-load.ts';
import { loadavg, median } from './support/measure.ts';
import { finishReport, runBench, runInfo } from './support/report.ts';

const { values: args } = parseArgs({
  options: {
    seconds: { type: 'string', default: '5' },
    concurrency: { type: 'string', default: '16' },
    rounds: { type: 'string', default: '3' },
    runtimes: { type: 'string', default: '1000' },
    sessions: { type: 'string', default: '2000' },
    // Past charges per account before the meter rounds: a ledger's cost must not grow with its history.
    history: { type: 'string', default: '0,2000' },
    json: { type: 'string' },
  },
});
const SECONDS = Number(args.seconds);
const CONCURRENCY = Number(args.concurrency);
const ROUNDS = Number(args.rounds);
const RUNTIMES = Number(args.runtimes);
const SESSIONS = Number(args.sessions);
const HISTORIES = args.history.split(',').map(Number);
const SECRET = 'bench-runtime-secret';
const CAPABILITIES = { protocol_version: '1', tracks: [{ name: 'main_video', kind: 'video', direction: 'recvonly' }], commands: {} };

/** Draws inserted here bypass the ledger: bring each grant's cached spend up to date, as migration 0006 does. */
async function migratePastSpend(db: Kysely<CoordinatorDatabase>): Promise<void> {
  await sql`update credit_grants set spent = coalesce((select sum(d.credits) from grant_draws d where d.grant_id = credit_grants.id), 0)`.execute(
    db,
  );
}

async function startCoordinatorProcess(database: string): Promise<{ url: string; child: ChildProcess }> {
  return startListeningProcess(['bench/support/coordinator-server.ts', '--mode', 'hono', '--database', database], {
    ARCLIGHT_LOG: 'error',
    ARCLIGHT_RUNTIME_SECRET: SECRET,
  });
}

const load = (server: ChildProcess, request: () => Promise<Response>): Promise<PhaseResult> =>
  closedLoopLoad(server, request, { seconds: SECONDS, concurrency: CONCURRENCY });

/** A stand-in for runtimes' HTTP side: accepts hosted sessions and answers relayed requests at once. */
async function startRuntimeStandIn(): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const body = req.url?.includes('/sdp') ? JSON.stringify({ sdp: 'v=0\r\n'.padEnd(3000, 'a'), type: 'answer' }) : '{}';
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

async function measureHttp(engine: string, database: string): Promise<Record<string, PhaseResult[]>> {
  const storage = await openStorage(database);
  const accounts = new AccountStore(storage.db);
  // No balance ceiling: the bench grants more than it could ever spend (a cap would cut the grant to it).
  const ledger = new CreditLedger(storage.db, storage.engine, { ...DEFAULT_PRICING, maxAccountCredits: 0 });
  await new ModelCatalog(storage.db).add('pattern', 5);
  const account = await accounts.create('bench-relay', { concurrentSessions: 1e9, sessionsPerMinute: 1e9 });
  await ledger.grantPromotional(account.id, 1e12);
  const key = (await new ApiKeyStore(storage.db, storage.engine).create(account.id)).key;
  await storage.close();

  const standIn = await startRuntimeStandIn();
  const { url, child } = await startCoordinatorProcess(database);
  const headers = { [RUNTIME_SECRET_HEADER]: SECRET, 'content-type': 'application/json' };
  const results: Record<string, PhaseResult[]> = {};
  try {
    // RUNTIMES registered runtimes, each a slot on the stand-in (placement needs somewhere to go).
    const ids = Array.from({ length: RUNTIMES }, (_, i) => `bench-rt-${i}`);
    for (let i = 0; i < ids.length; i += 50) {
      await Promise.all(
        ids.slice(i, i + 50).map(async (id) => {
          const r = await fetch(`${url}/runtimes`, {
            method: 'POST',
            headers,
            body: JSON.stringify({ id, url: standIn.url, model: 'pattern', slots: 8, capabilities: CAPABILITIES }),
          });
          if (r.status !== 200) throw new Error(`register ${id}: ${r.status} ${await r.text()}`);
        }),
      );
    }
    // Sessions to relay for: created through the API, placed on the stand-in.
    const token = (
      (await (await fetch(`${url}/tokens`, { method: 'POST', headers: { 'Service-API-Key': key } })).json()) as { token: string }
    ).token;
    const sessionIds: string[] = [];
    for (let i = 0; i < 64; i++) {
      const r = await fetch(`${url}/sessions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: { name: 'pattern' } }),
      });
      sessionIds.push(((await r.json()) as { session_id: string }).session_id);
    }
    let turn = 0;
    const heartbeat = () => fetch(`${url}/runtimes/${ids[turn++ % ids.length]}/heartbeat`, { method: 'POST', headers, body: '{}' });
    const offer = JSON.stringify({ sdp: 'v=0\r\n'.padEnd(4000, 'o'), type: 'offer' });
    const relay = () =>
      fetch(`${url}/sessions/${sessionIds[turn++ % sessionIds.length]}/transport/webrtc/connections/c1/sdp_params`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: offer,
      });
    const probe = await relay();
    if (probe.status !== 200) throw new Error(`relay probe: ${probe.status} ${await probe.text()}`);
    for (let round = 1; round <= ROUNDS; round++) {
      for (const [name, request] of [
        ['POST heartbeat', heartbeat],
        ['relayed transport request', relay],
      ] as const) {
        const r = await load(child, request);
        (results[name] ??= []).push(r);
        process.stdout.write(
          `  ${engine.padEnd(8)} ${name.padEnd(26)} ${r.perSecond.toFixed(0).padStart(6)}/s  p50 ${r.latencyMs.p50.toFixed(2)}  p99 ${r.latencyMs.p99.toFixed(2)} ms  server ${r.serverCpuMicros.toFixed(0)} µs CPU/req${r.errors ? `  ERRORS ${r.errors}` : ''}\n`,
        );
      }
    }
  } finally {
    child.kill('SIGKILL');
    standIn.server.close();
  }
  return results;
}

/**
 * `SessionMeter.flush()` over SESSIONS ready sessions: ms per flush, µs per session charged. With
 * `history` past charges (ticks and their draws) per account already in the ledger — a session
 * charged every 5 s for a day leaves ~17,000.
 */
async function measureMeter(
  engine: string,
  database: string,
  history: number,
): Promise<{ msPerFlush: number[]; microsPerSession: number[] }> {
  const storage = await openStorage(database);
  // No balance ceiling: the bench grants more than it could ever spend (a cap would cut the grant to it).
  const ledger = new CreditLedger(storage.db, storage.engine, { ...DEFAULT_PRICING, maxAccountCredits: 0 });
  const model = await new ModelCatalog(storage.db).add('pattern-meter', 5);
  const accounts = new AccountStore(storage.db);
  let clock = Date.now();
  // As the coordinator builds it for this engine.
  const meter = new SessionMeter(storage.db, ledger, () => clock, storage.engine === 'postgres' ? METER_CONCURRENCY_POSTGRES : 1);
  // Five open sessions per account, as the default quota allows.
  const rows: { account: string }[] = [];
  for (let i = 0; i < SESSIONS; i++) {
    if (i % 5 === 0) {
      const account = await accounts.create(`meter-${engine}-${i}`, {});
      await ledger.grantPromotional(account.id, 1e12);
      rows.push({ account: account.id });
    }
  }
  const values = Array.from({ length: SESSIONS }, (_, i) => ({
    id: randomUUID(),
    account_id: rows[Math.floor(i / 5)]!.account,
    model_id: model.id,
    token_id: null,
    status: 'ready' as const,
    created_at: clock - 2_000,
    ready_at: clock - 1_000,
    ended_at: null,
    end_reason: null,
    max_duration_seconds: 86_400,
  }));
  for (let i = 0; i < values.length; i += 500)
    await storage.db
      .insertInto('sessions')
      .values(values.slice(i, i + 500))
      .execute();
  if (history > 0) {
    // Past sessions' ticks and draws for each account, on its (one) grant.
    for (const { account } of rows) {
      const grant = await storage.db.selectFrom('credit_grants').select('id').where('account_id', '=', account).executeTakeFirstOrThrow();
      const past = randomUUID();
      await storage.db
        .insertInto('sessions')
        .values({
          id: past,
          account_id: account,
          model_id: model.id,
          token_id: null,
          status: 'ended',
          created_at: clock - 90_000_000,
          ready_at: clock - 86_400_000,
          ended_at: clock - 86_400_000 + history * 1000,
          end_reason: 'past',
          max_duration_seconds: 86_400,
          billed_seconds: history,
        })
        .execute();
      const ticks = Array.from({ length: history }, (_, seq) => ({
        session_id: past,
        seq,
        account_id: account,
        seconds: 1,
        credits: 5,
        created_at: clock - 86_400_000 + seq,
      }));
      const draws = ticks.map((t) => ({ session_id: past, seq: t.seq, grant_id: grant.id, credits: 5 }));
      for (let i = 0; i < history; i += 1000) {
        await storage.db
          .insertInto('meter_ticks')
          .values(ticks.slice(i, i + 1000))
          .execute();
        await storage.db
          .insertInto('grant_draws')
          .values(draws.slice(i, i + 1000))
          .execute();
      }
    }
    await migratePastSpend(storage.db);
  }
  const msPerFlush: number[] = [];
  const microsPerSession: number[] = [];
  try {
    await meter.flush(); // first second, warms statements
    for (let round = 0; round < ROUNDS; round++) {
      clock += 1000;
      const t0 = performance.now();
      const { ticks } = await meter.flush();
      const ms = performance.now() - t0;
      if (ticks !== SESSIONS) throw new Error(`flush charged ${ticks} of ${SESSIONS} sessions`);
      msPerFlush.push(ms);
      microsPerSession.push((ms * 1000) / ticks);
      process.stdout.write(
        `  ${engine.padEnd(8)} meter flush of ${SESSIONS} sessions, ${history} past charges/account  ${ms.toFixed(0)} ms  ${((ms * 1000) / ticks).toFixed(0)} µs/session\n`,
      );
    }
  } finally {
    await storage.close();
  }
  return { msPerFlush, microsPerSession };
}

await runBench('coordinator-scale', async () => {
  const info = runInfo();
  process.stdout.write(
    `coordinator-scale: ${ROUNDS} rounds, ${SECONDS} s per HTTP phase, ${CONCURRENCY} in flight, ${RUNTIMES} runtimes, ${SESSIONS} metered sessions\n`,
  );
  const sqliteDir = mkdtempSync(join(tmpdir(), 'arclight-scale-'));
  const meters = async (engine: string, database: () => Promise<string>) => {
    const out: Record<string, Awaited<ReturnType<typeof measureMeter>>> = {};
    for (const history of HISTORIES) out[`history ${history}`] = await measureMeter(engine, await database(), history);
    return out;
  };
  let n = 0;
  const results: Record<string, unknown> = {
    sqlite: {
      http: await measureHttp('sqlite', join(sqliteDir, 'http.db')),
      meter: await meters('sqlite', async () => join(sqliteDir, `meter-${n++}.db`)),
    },
  };
  const postgres = await startPostgres();
  try {
    results['postgres'] = {
      http: await measureHttp('postgres', await postgres.createDatabase('scale_http')),
      meter: await meters('postgres', () => postgres.createDatabase('scale_meter')),
    };
  } finally {
    await postgres.stop();
  }
  process.stdout.write('\nmedians over rounds:\n');
  for (const [engine, value] of Object.entries(results)) {
    const { http, meter } = value as {
      http: Record<string, PhaseResult[]>;
      meter: Record<string, { microsPerSession: number[]; msPerFlush: number[] }>;
    };
    for (const [name, phases] of Object.entries(http)) {
      process.stdout.write(
        `  ${engine} ${name}: ${median(phases.map((p) => p.perSecond)).toFixed(0)}/s, ${median(phases.map((p) => p.serverCpuMicros)).toFixed(0)} µs server CPU/req, p99 ${median(phases.map((p) => p.latencyMs.p99)).toFixed(1)} ms\n`,
      );
    }
    for (const [history, m] of Object.entries(meter)) {
      process.stdout.write(
        `  ${engine} meter (${history}): ${median(m.microsPerSession).toFixed(0)} µs/session (${Math.min(...m.microsPerSession).toFixed(0)}–${Math.max(...m.microsPerSession).toFixed(0)}), ${median(m.msPerFlush).toFixed(0)} ms per flush of ${SESSIONS}\n`,
      );
    }
  }
  finishReport(info, loadavg(), args.json, results);
});
