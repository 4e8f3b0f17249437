/**
 * What the coordinator's steady state writes to PostgreSQL at fleet scale (issue 20 part 3):
 * 1,000 runtimes heartbeating every 5 s (200 a second) and 10,000 ready sessions charged by the
 * meter every 5 s (2,000 charges a second), with write batching on (the defaults: heartbeats
 * arriving within 50 ms share one UPDATE; an account's sessions are charged in one transaction)
 * and off (one UPDATE per heartbeat, one transaction per session: the design before batching),
 * alternating in each round, each on a fresh database.
 *
 *   node --conditions=source --import tsx bench/coordinator-writes.ts [--rounds 3] [--runtimes 1000] [--sessions 10000] [--json out.json]
 *
 * Counted per unit of work rather than per wall second, so the figures do not depend on how fast
 * this machine is: one round of heartbeats from every runtime (sent in bursts of 200, a second's
 * worth, spread over 50 ms steps as they would arrive) and one meter flush over every session, each
 * counted at the driver (statements, writes, rows written, transactions) and by PostgreSQL (WAL
 * bytes, `pg_current_wal_lsn()`) — then scaled to the steady-state rates above. Sessions
 * sit five to an account (the default concurrency quota), so 2,000 accounts.
 */

import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { sql, type Kysely } from 'kysely';
import pg from 'pg';
import { AccountStore } from '../coordinator/accounts/account-store.ts';
import { CreditLedger } from '../coordinator/billing/credit-ledger.ts';
import { METER_CONCURRENCY_POSTGRES, SessionMeter } from '../coordinator/billing/session-meter.ts';
import { ModelCatalog } from '../coordinator/models/model-catalog.ts';
import { DEFAULT_PRICING } from '../coordinator/pricing/pricing.ts';
import { HEARTBEAT_BATCH_MS, RuntimeRegistry } from '../coordinator/runtimes/runtime-registry.ts';
import { openStorage } from '../coordinator/storage/database.ts';
import type { CoordinatorDatabase } from '../coordinator/storage/schema.ts';
import { startPostgres } from '../test/support/postgres.ts';
import { loadavg, median } from './support/measure.ts';
import { finishReport, runBench, runInfo } from './support/report.ts';

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    runtimes: { type: 'string', default: '1000' },
    sessions: { type: 'string', default: '10000' },
    json: { type: 'string' },
  },
});
const ROUNDS = Number(args.rounds);
const RUNTIMES = Number(args.runtimes);
const SESSIONS = Number(args.sessions);
const HEARTBEAT_INTERVAL_S = 5;
const FLUSH_INTERVAL_S = 5;
const SESSIONS_PER_ACCOUNT = 5;

interface WriteCounts {
  /** Transactions: BEGINs, plus writes sent on their own (each one its own transaction). */
  readonly transactions: number;
  /** Statements sent (BEGIN and COMMIT included), and those that write (INSERT / UPDATE / DELETE). */
  readonly statements: number;
  readonly writeStatements: number;
  /** Rows those statements inserted or updated. */
  readonly rows: number;
  readonly walBytes: number;
}

/**
 * Counts every statement this process sends to PostgreSQL, at the driver (pg's Client#query), so
 * BEGIN / COMMIT and statements of every layer count; writes are INSERT / UPDATE / DELETE, and
 * their rows come from the server's answers.
 */
class StatementCounter {
  statements = 0;
  writeStatements = 0;
  rows = 0;
  /** Explicit transactions (BEGIN), plus writes sent outside one (each its own transaction). */
  transactions = 0;
  readonly #inTransaction = new WeakSet<object>();

  install(): void {
    const original = pg.Client.prototype.query as (...args: unknown[]) => unknown;
    const counter = this;
    (pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown }).query = function (this: unknown, ...args: unknown[]) {
      const first = args[0];
      const text = typeof first === 'string' ? first : ((first as { text?: string } | undefined)?.text ?? '');
      counter.statements++;
      const client = this as object;
      if (/^\s*begin\b/i.test(text)) {
        counter.transactions++;
        counter.#inTransaction.add(client);
      } else if (/^\s*(commit|rollback)\b/i.test(text)) {
        counter.#inTransaction.delete(client);
      }
      const write = /^\s*(insert|update|delete)\b/i.test(text);
      if (write) counter.writeStatements++;
      if (write && !counter.#inTransaction.has(client)) counter.transactions++;
      const result = original.apply(this, args);
      if (write && result instanceof Promise) {
        void result.then(
          (r: { rowCount?: number | null }) => (counter.rows += r?.rowCount ?? 0),
          () => undefined,
        );
      }
      return result;
    };
  }
}

const COUNTER = new StatementCounter();
COUNTER.install();

/** The server's WAL position, bytes: what every write costs it, whoever counts statements. */
async function walPosition(db: Kysely<CoordinatorDatabase>): Promise<number> {
  const { rows } = await sql<{ wal: string }>`select pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::text as wal`.execute(db);
  return Number(rows[0]!.wal);
}

async function measured(db: Kysely<CoordinatorDatabase>, counter: StatementCounter, work: () => Promise<void>): Promise<WriteCounts> {
  const wal = await walPosition(db);
  const before = {
    transactions: counter.transactions,
    statements: counter.statements,
    writeStatements: counter.writeStatements,
    rows: counter.rows,
  };
  await work();
  const counted = {
    transactions: counter.transactions - before.transactions,
    statements: counter.statements - before.statements,
    writeStatements: counter.writeStatements - before.writeStatements,
    rows: counter.rows - before.rows,
  };
  return { ...counted, walBytes: (await walPosition(db)) - wal };
}

interface ModeResult {
  readonly heartbeats: WriteCounts;
  readonly flush: WriteCounts;
  readonly flushMs: number;
}

async function measureMode(database: string, batched: boolean): Promise<ModeResult> {
  const storage = await openStorage(database);
  const { db } = storage;
  let clock = Date.now();
  try {
    const ledger = new CreditLedger(db, storage.engine, { ...DEFAULT_PRICING, maxAccountCredits: 0 }, () => clock);
    const registry = new RuntimeRegistry(db, storage.engine, () => clock, 5000, batched ? HEARTBEAT_BATCH_MS : 0);
    const meter = new SessionMeter(db, ledger, () => clock, METER_CONCURRENCY_POSTGRES, batched ? undefined : 1);
    const model = await new ModelCatalog(db).add('pattern-writes', 5);
    const capabilities = { protocol_version: '1.0', tracks: [], commands: [], emission_fps: 30 };
    for (let i = 0; i < RUNTIMES; i++) {
      await registry.register({
        id: `gpu-${i}`,
        url: `http://127.0.0.1:9/${i}`,
        modelId: model.id,
        slots: Math.ceil(SESSIONS / RUNTIMES),
        capabilities,
      });
    }
    const accounts = new AccountStore(db);
    const accountIds: string[] = [];
    for (let i = 0; i < SESSIONS / SESSIONS_PER_ACCOUNT; i++) {
      const account = await accounts.create(`writes-${i}`, {});
      await ledger.grantPromotional(account.id, 1e12);
      accountIds.push(account.id);
    }
    const sessions = Array.from({ length: SESSIONS }, (_, i) => ({
      id: randomUUID(),
      account_id: accountIds[Math.floor(i / SESSIONS_PER_ACCOUNT)]!,
      model_id: model.id,
      token_id: null,
      status: 'ready' as const,
      created_at: clock - 3_000,
      ready_at: clock - 2_000,
      ended_at: null,
      end_reason: null,
      max_duration_seconds: 86_400,
      // At the model's rate: a charge of 0 credits would skip the draws and the grant's update.
      rate_credits_per_second: 5,
      runtime_id: `gpu-${i % RUNTIMES}`,
    }));
    for (let i = 0; i < sessions.length; i += 500)
      await db
        .insertInto('sessions')
        .values(sessions.slice(i, i + 500))
        .execute();
    await meter.flush(); // the first two seconds: warms statements and the grants' rows

    // One heartbeat from every runtime: a second's worth (200) at a time, in 50 ms steps.
    const perSecond = RUNTIMES / HEARTBEAT_INTERVAL_S;
    const heartbeats = await measured(db, COUNTER, async () => {
      for (let first = 0; first < RUNTIMES; first += perSecond) {
        const step: Promise<boolean>[] = [];
        for (let i = first; i < Math.min(RUNTIMES, first + perSecond); i++) {
          step.push(registry.heartbeat(`gpu-${i}`, false));
          if ((i - first + 1) % (perSecond / 20) === 0) await new Promise((resolve) => setTimeout(resolve, 50));
        }
        const answers = await Promise.all(step);
        if (!answers.every(Boolean)) throw new Error('a heartbeat found its runtime gone');
      }
    });
    clock += FLUSH_INTERVAL_S * 1000;
    // The heartbeats must cover the seconds the flush charges (billing stops at the last one).
    await db.updateTable('runtimes').set({ heartbeat_at: clock }).execute();
    let flushMs = 0;
    const flush = await measured(db, COUNTER, async () => {
      const started = performance.now();
      const { ticks } = await meter.flush();
      flushMs = performance.now() - started;
      if (ticks !== SESSIONS) throw new Error(`the flush charged ${ticks} of ${SESSIONS} sessions`);
    });
    // That update of every runtime row was setup, not heartbeats: it is outside both windows.
    await registry.flushHeartbeats();
    return { heartbeats, flush, flushMs };
  } finally {
    await storage.close();
  }
}

/** Per second at steady state: RUNTIMES / 5 heartbeats and SESSIONS / 5 charges a second. */
function perSecond(result: ModeResult): WriteCounts {
  const rate = (pick: (c: WriteCounts) => number) => pick(result.heartbeats) / HEARTBEAT_INTERVAL_S + pick(result.flush) / FLUSH_INTERVAL_S;
  return {
    transactions: rate((c) => c.transactions),
    statements: rate((c) => c.statements),
    writeStatements: rate((c) => c.writeStatements),
    rows: rate((c) => c.rows),
    walBytes: rate((c) => c.walBytes),
  };
}

const describe = (c: WriteCounts) =>
  `${c.transactions.toFixed(0)} transactions, ${c.statements.toFixed(0)} statements (${c.writeStatements.toFixed(0)} writes), ${c.rows.toFixed(0)} rows, ${(c.walBytes / 1024).toFixed(0)} KiB WAL`;

await runBench('coordinator-writes', async () => {
  const info = runInfo();
  process.stdout.write(
    `coordinator-writes: ${ROUNDS} rounds, ${RUNTIMES} runtimes, ${SESSIONS} ready sessions (${SESSIONS / SESSIONS_PER_ACCOUNT} accounts), PostgreSQL\n`,
  );
  const postgres = await startPostgres();
  const results: Record<'batched' | 'unbatched', ModeResult[]> = { batched: [], unbatched: [] };
  try {
    for (let round = 0; round < ROUNDS; round++) {
      // Alternate which goes first, so a drift over the run does not favour one mode.
      const order: Array<'batched' | 'unbatched'> = round % 2 === 0 ? ['unbatched', 'batched'] : ['batched', 'unbatched'];
      for (const mode of order) {
        const result = await measureMode(await postgres.createDatabase(`writes_${mode}_${round}`), mode === 'batched');
        results[mode].push(result);
        process.stdout.write(
          `  round ${round + 1} ${mode.padEnd(9)} heartbeats ×${RUNTIMES}: ${describe(result.heartbeats)}; flush ×${SESSIONS} (${result.flushMs.toFixed(0)} ms): ${describe(result.flush)}\n` +
            `                    steady state per second: ${describe(perSecond(result))}\n`,
        );
      }
    }
  } finally {
    await postgres.stop();
  }
  const summary: Record<string, Record<string, number>> = {};
  for (const mode of ['unbatched', 'batched'] as const) {
    const rates = results[mode].map(perSecond);
    summary[mode] = {
      transactionsPerSecond: median(rates.map((r) => r.transactions)),
      statementsPerSecond: median(rates.map((r) => r.statements)),
      writeStatementsPerSecond: median(rates.map((r) => r.writeStatements)),
      rowsPerSecond: median(rates.map((r) => r.rows)),
      walKiBPerSecond: median(rates.map((r) => r.walBytes / 1024)),
      flushMs: median(results[mode].map((r) => r.flushMs)),
      heartbeatWriteStatementsPer1000: median(results[mode].map((r) => (r.heartbeats.writeStatements * 1000) / RUNTIMES)),
      flushTransactionsPer1000Sessions: median(results[mode].map((r) => (r.flush.transactions * 1000) / SESSIONS)),
    };
  }
  process.stdout.write(`summary (median of ${ROUNDS}): ${JSON.stringify(summary)}\n`);
  finishReport(info, loadavg(), args.json, { rounds: ROUNDS, runtimes: RUNTIMES, sessions: SESSIONS, results, summary });
});
