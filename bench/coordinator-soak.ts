/**
 * Coordinator soak on PostgreSQL (issue 20 part 6): do coordinator replicas hold flat memory over
 * hours of session churn on one PostgreSQL database?
 *
 *   node --conditions=source --import tsx bench/coordinator-soak.ts [--minutes 120] [--engine postgres|sqlite]
 *        [--replicas 2] [--runtimes 8] [--slots 2] [--users 6] [--hold 1-5] [--sample-every 10]
 *        [--quiet-every 300] [--token-lifetime 3600] [--json out.json]
 *   node --expose-gc --no-opt --no-sparkplug --no-maglev --no-flush-bytecode --conditions=source --import tsx \
 *        bench/coordinator-soak.ts --heap-check [--heap-snapshots DIR] [--token-lifetime 60] …
 *
 * What runs, all on 127.0.0.1: a real PostgreSQL server (test/support/postgres.ts; `--engine sqlite`
 * for a temp file instead), `--replicas` × `arclight coordinator` child processes on that one
 * database, and `--runtimes` stub runtimes (test/support/stub-runtime.ts: they register, heartbeat to
 * random replicas every 0.4–0.8 s, accept starts, report each session ready so its meter runs, and
 * end about a third of their sessions themselves). No media: this measures the coordinator alone,
 * which bench/soak.ts (the whole hosted stack on SQLite) cannot separate from its runtimes.
 *
 * Each of `--users` loops through random replicas: a fresh token (POST /tokens), a session
 * (POST /sessions), a read of it and of the account's usage, a hold of `--hold` seconds while
 * the meter bills it (flushes every second), then DELETE /sessions/:id. Every `--sample-every`
 * seconds each replica's VmRSS and open fds are read from /proc and its V8 heap from /metrics.
 * Every `--quiet-every` seconds the users pause until no session is open anywhere, and the same
 * figures are read again: those quiet points are where growth would show.
 *
 * Printed: per replica the RSS slope after the first 10 % (least squares, MiB/h), the slope of RSS
 * minus the V8 heap committed (memory outside the JavaScript heap), RSS and fds at the quiet
 * points; the churn counts and any non-2xx answers. Exits 1 when a replica's RSS slope after the
 * warm-up exceeds THRESHOLDS.maxRssSlopeMiBPerHour (bench/support/soak-figures.ts, on runs of
 * 30 min or more) or its fds grow by more than maxQuietFdGrowth between the first and last quiet point.
 *
 * `--heap-check` answers the finer question RSS cannot (V8 grows its heap lazily, so a slow leak
 * hides in RSS noise for hours): one coordinator runs in this process instead of the replicas,
 * and at each quiet point the heap is collected three times (`--expose-gc`) and a heap snapshot's
 * live size is recorded (support/heap-snapshot.ts: heapUsed moves by hundreds of KiB between
 * identical states); `--heap-snapshots DIR` keeps the snapshots, for a retainer diff in Chrome
 * DevTools. Run it with V8's optimising tiers off (`--no-opt --no-sparkplug --no-maglev
 * --no-flush-bytecode`): compiled code keeps growing for many minutes and is not a leak. Printed:
 * the live heap at each quiet point and its growth per session from the first quiet point past
 * the warm-up to the last; exits 1 over THRESHOLDS.maxHeapBytesPerSession.
 * It is what found the verified-token cache keeping each token's whole Authorization header
 * (docs/performance.md). Tokens live `--token-lifetime` seconds (the coordinator's default: an
 * hour); a run shorter than that sees caches of live tokens fill, not leak.
 */

import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { writeHeapSnapshot } from 'node:v8';
import { startCoordinator } from '../coordinator/index.ts';
import { createLogger } from '../server-kit/log.ts';
import { freePort, killProcess, startCoordinatorProcess, type CoordinatorProcess } from '../test/support/coordinator-process.ts';
import { startPostgres, type PostgresServer } from '../test/support/postgres.ts';
import { between, newObservations, pick, StubRuntime } from '../test/support/stub-runtime.ts';
import { liveHeapBytes } from './support/heap-snapshot.ts';
import { loadavg, sleep } from './support/measure.ts';
import { fetchCoordinatorHeap, openFds, rssMiB } from './support/process-probe.ts';
import { finishReport, runBench, runInfo } from './support/report.ts';
import { leastSquaresSlope, THRESHOLDS } from './support/soak-figures.ts';

const { values: args } = parseArgs({
  options: {
    minutes: { type: 'string', default: '120' },
    engine: { type: 'string', default: 'postgres' },
    replicas: { type: 'string', default: '2' },
    runtimes: { type: 'string', default: '8' },
    slots: { type: 'string', default: '2' },
    users: { type: 'string', default: '6' },
    hold: { type: 'string', default: '1-5' },
    'sample-every': { type: 'string', default: '10' },
    'quiet-every': { type: 'string', default: '300' },
    'token-lifetime': { type: 'string', default: '3600' },
    'heap-check': { type: 'boolean', default: false },
    'heap-snapshots': { type: 'string' },
    json: { type: 'string' },
  },
});

function positive(name: string, text: string): number {
  const value = Number(text);
  if (!(value > 0)) throw new Error(`--${name} must be a positive number; got "${text}"`);
  return value;
}

const MINUTES = positive('minutes', args.minutes);
const REPLICAS = Math.round(positive('replicas', args.replicas));
const RUNTIMES = Math.round(positive('runtimes', args.runtimes));
const SLOTS = Math.round(positive('slots', args.slots));
const USERS = Math.round(positive('users', args.users));
const SAMPLE_EVERY_S = positive('sample-every', args['sample-every']);
const QUIET_EVERY_S = positive('quiet-every', args['quiet-every']);
const TOKEN_LIFETIME_S = Math.round(positive('token-lifetime', args['token-lifetime']));
const HEAP_CHECK = args['heap-check'];
const forceGc = (globalThis as { gc?: () => void }).gc;
if (HEAP_CHECK && !forceGc) throw new Error('--heap-check needs node --expose-gc');
if (args['heap-snapshots'] && !HEAP_CHECK) throw new Error('--heap-snapshots needs --heap-check');
const holdMatch = /^(\d+(?:\.\d+)?)-(\d+(?:\.\d+)?)$/.exec(args.hold);
if (!holdMatch || Number(holdMatch[1]) > Number(holdMatch[2])) throw new Error(`--hold must be MIN-MAX seconds; got "${args.hold}"`);
const HOLD_S: readonly [number, number] = [Number(holdMatch[1]), Number(holdMatch[2])];
if (args.engine !== 'postgres' && args.engine !== 'sqlite') throw new Error('--engine: postgres or sqlite');
const WARMUP_FRACTION = 0.1;
const SECRET = 'coordinator-soak-runtime-secret';
// Replicas on PostgreSQL refuse to start without a signing-key secret; a throwaway one for the run.
process.env['ARCLIGHT_SIGNING_KEY_SECRET'] ??= 'arclight-soak-only-signing-key-secret';

/** A coordinator under test: a child process, or (`--heap-check`) this process. */
interface SoakReplica {
  readonly url: string;
  readonly pid: number;
  heap(): Promise<{ readonly usedMiB: number; readonly totalMiB: number }>;
  stop(): Promise<void>;
}

interface ReplicaSample {
  readonly atMinutes: number;
  readonly rssMiB: number;
  readonly fds: number;
  readonly heapUsedMiB: number;
  readonly heapTotalMiB: number;
}

interface Churn {
  sessions: number;
  tokens: number;
  reads: number;
  /** Non-2xx answers (or failed requests) by `METHOD path status`. */
  readonly failures: Map<string, number>;
}

/** Gate the users pass between sessions; a quiet point closes it until every user is idle. */
class ChurnGate {
  #closed: Promise<void> | undefined;
  #open: (() => void) | undefined;
  idle = 0;

  close(): void {
    this.#closed ??= new Promise((resolve) => (this.#open = resolve));
  }

  open(): void {
    this.#open?.();
    this.#closed = this.#open = undefined;
  }

  async pass(): Promise<void> {
    while (this.#closed) {
      this.idle++;
      await this.#closed;
      this.idle--;
    }
  }
}

await runBench('coordinator-soak', async () => {
  const info = runInfo();
  const startedAt = Date.now();
  const endsAt = startedAt + MINUTES * 60_000;
  const minutesNow = (): number => (Date.now() - startedAt) / 60_000;
  process.stdout.write(
    `coordinator soak: ${MINUTES} min on ${args.engine}, ${HEAP_CHECK ? 'one coordinator in this process (--heap-check)' : `${REPLICAS} replicas`}, ${RUNTIMES} stub runtimes × ${SLOTS} slots, ${USERS} users holding ${args.hold} s, ` +
      `sampling every ${SAMPLE_EVERY_S} s, quiet point every ${QUIET_EVERY_S} s (machine: ${String(info.machine['nproc'])} cores, loadavg ${info.loadavgBefore})\n`,
  );

  let postgres: PostgresServer | undefined;
  let folder: string | undefined;
  /** --heap-check without --heap-snapshots: where each snapshot is written, measured and deleted. */
  let snapshotFolderToRemove: string | undefined;
  const replicas: SoakReplica[] = [];
  const runtimes: StubRuntime[] = [];
  try {
    let database: string;
    if (args.engine === 'postgres') {
      postgres = await startPostgres();
      database = await postgres.createDatabase('soak');
    } else {
      folder = mkdtempSync(join(tmpdir(), 'arclight-coordinator-soak-'));
      database = join(folder, 'coordinator.db');
    }
    // Seeded in this process, as an operator's admin commands would be, then closed.
    const seed = await startCoordinator({ database, port: 0, meterFlushMs: 0 });
    await seed.catalog.add('pattern', 1);
    const account = await seed.accounts.create('Soak', { concurrentSessions: 10_000, sessionsPerMinute: 100_000 });
    await seed.ledger.grantPromotional(account.id, 1_000_000);
    const { key } = await seed.apiKeys.create(account.id);
    await seed.close();

    if (HEAP_CHECK) {
      const coordinator = await startCoordinator({
        database,
        port: await freePort(),
        host: '127.0.0.1',
        meterFlushMs: 1000,
        heartbeatIntervalMs: 2000,
        runtimeSecret: SECRET,
        logger: createLogger({ process: 'coordinator' }, 'warn'),
      });
      const heap = async () => ({ usedMiB: process.memoryUsage().heapUsed / 2 ** 20, totalMiB: process.memoryUsage().heapTotal / 2 ** 20 });
      replicas.push({ url: coordinator.url, pid: process.pid, heap, stop: () => coordinator.close() });
    } else {
      for (let i = 0; i < REPLICAS; i++) {
        const child: CoordinatorProcess = await startCoordinatorProcess({
          database,
          port: await freePort(),
          runtimeSecret: SECRET,
          extraArgs: ['--meter-flush-ms', '1000', '--heartbeat-ms', '2000'],
        });
        replicas.push({
          url: child.url,
          pid: child.child.pid!,
          heap: () => fetchCoordinatorHeap(child.url),
          stop: () => killProcess(child.child),
        });
      }
    }
    const urls = replicas.map((r) => r.url);
    const observed = newObservations();
    for (let i = 0; i < RUNTIMES; i++) {
      const runtime = new StubRuntime({
        id: `soak-${i}`,
        replicas: () => urls,
        secret: SECRET,
        slots: SLOTS,
        observed,
        reportReady: true,
        selfEndShare: 0.3,
        lifeMs: [HOLD_S[0] * 1000, HOLD_S[1] * 1000],
        heartbeatEveryMs: [400, 800],
      });
      runtimes.push(runtime);
      await runtime.start();
    }

    const churn: Churn = { sessions: 0, tokens: 0, reads: 0, failures: new Map() };
    const call = async (method: string, route: string, url: string, init: RequestInit): Promise<Response | undefined> => {
      try {
        const response = await fetch(url, { method, ...init, signal: AbortSignal.timeout(30_000) });
        if (!response.ok) {
          const label = `${method} ${route} ${response.status}`;
          churn.failures.set(label, (churn.failures.get(label) ?? 0) + 1);
        }
        return response;
      } catch (error) {
        const label = `${method} ${route} ${(error as Error).name}`;
        churn.failures.set(label, (churn.failures.get(label) ?? 0) + 1);
        return undefined;
      }
    };

    const gate = new ChurnGate();
    let running = true;
    const user = async (): Promise<void> => {
      while (running) {
        await gate.pass();
        if (!running) return;
        const minted = await call('POST', '/tokens', `${pick(urls)}/tokens`, {
          headers: { 'Service-API-Key': key, 'content-type': 'application/json' },
          body: JSON.stringify({ expires_after: TOKEN_LIFETIME_S }),
        });
        if (!minted?.ok) {
          await minted?.arrayBuffer();
          await sleep(1_000);
          continue;
        }
        churn.tokens++;
        const { token } = (await minted.json()) as { token: string };
        const auth = { authorization: `Bearer ${token}` };
        const created = await call('POST', '/sessions', `${pick(urls)}/sessions`, {
          headers: { ...auth, 'content-type': 'application/json' },
          body: JSON.stringify({ model: { name: 'pattern' } }),
        });
        if (!created?.ok) {
          await created?.arrayBuffer();
          await sleep(1_000);
          continue;
        }
        churn.sessions++;
        const { session_id: sessionId } = (await created.json()) as { session_id: string };
        await sleep(between(200, 600));
        for (const [route, url, headers] of [
          ['/sessions/:id', `${pick(urls)}/sessions/${sessionId}`, auth],
          ['/platform/usage', `${pick(urls)}/platform/usage`, { authorization: `Bearer ${key}` }],
        ] as const) {
          const read = await call('GET', route, url, { headers });
          await read?.arrayBuffer();
          churn.reads++;
        }
        await sleep(between(HOLD_S[0] * 1000, HOLD_S[1] * 1000));
        // A session its runtime already ended answers 200 with its final state too.
        const ended = await call('DELETE', '/sessions/:id', `${pick(urls)}/sessions/${sessionId}`, { headers: auth });
        await ended?.arrayBuffer();
      }
    };

    const samples: ReplicaSample[][] = replicas.map(() => []);
    const quietPoints: ReplicaSample[][] = replicas.map(() => []);
    const read = async (replica: SoakReplica): Promise<ReplicaSample> => {
      const heap = await replica.heap();
      return {
        atMinutes: minutesNow(),
        rssMiB: rssMiB(replica.pid),
        fds: openFds(replica.pid),
        heapUsedMiB: heap.usedMiB,
        heapTotalMiB: heap.totalMiB,
      };
    };
    /** `--heap-check`: [minutes, sessions so far, live heap in MiB (snapshot), heapUsed after GC in MiB] at each quiet point. */
    const heapAfterGc: [number, number, number, number][] = [];
    const snapshotFolder =
      args['heap-snapshots'] ?? (HEAP_CHECK ? (snapshotFolderToRemove = mkdtempSync(join(tmpdir(), 'arclight-heap-check-'))) : undefined);
    // What the bench itself keeps per session (the stubs' start records) is tallied and dropped at
    // quiet points in --heap-check mode, so the heap measured is the coordinator's.
    const tallied = { startedMoreThanOnce: 0 };
    const collect = async (): Promise<void> => {
      tallied.startedMoreThanOnce += [...observed.starts.values()].filter((n) => n > 1).length;
      observed.starts.clear();
      observed.startedOn.clear();
      for (let i = 0; i < 3; i++) {
        forceGc!();
        await sleep(200);
      }
      const heapUsedMiB = process.memoryUsage().heapUsed / 2 ** 20;
      mkdirSync(snapshotFolder!, { recursive: true });
      const snapshot = writeHeapSnapshot(
        join(snapshotFolder!, `coordinator-${String(heapAfterGc.length + 1).padStart(2, '0')}-${churn.sessions}-sessions.heapsnapshot`),
      );
      const liveMiB = liveHeapBytes(snapshot) / 2 ** 20;
      if (!args['heap-snapshots']) rmSync(snapshot);
      heapAfterGc.push([minutesNow(), churn.sessions, liveMiB, heapUsedMiB]);
      process.stdout.write(
        `  after GC: live heap ${liveMiB.toFixed(2)} MiB (heapUsed ${heapUsedMiB.toFixed(2)}) at ${churn.sessions} sessions\n`,
      );
    };
    let usersStarted = false;
    const quietPoint = async (): Promise<void> => {
      gate.close();
      const deadline = Date.now() + 120_000;
      while ((usersStarted && running && gate.idle < USERS) || runtimes.some((r) => r.open.size > 0)) {
        if (Date.now() > deadline)
          throw new Error(
            `no quiet point within 120 s: ${gate.idle}/${USERS} users idle, ${runtimes.reduce((n, r) => n + r.open.size, 0)} sessions open`,
          );
        await sleep(250);
      }
      await sleep(3_000); // the last meter flushes and ends settle
      if (HEAP_CHECK) await collect();
      const readings = await Promise.all(replicas.map(read));
      readings.forEach((reading, i) => quietPoints[i]!.push(reading));
      process.stdout.write(
        `[${minutesNow().toFixed(1)} min] quiet: ${readings.map((r, i) => `replica-${i + 1} RSS ${r.rssMiB.toFixed(1)} MiB heap ${r.heapUsedMiB.toFixed(1)}/${r.heapTotalMiB.toFixed(1)} fds ${r.fds}`).join(' · ')} · ` +
          `${churn.sessions} sessions, ${[...churn.failures.values()].reduce((a, b) => a + b, 0)} failures, loadavg ${loadavg()}\n`,
      );
      gate.open();
    };

    await quietPoint(); // the baseline, before any session
    usersStarted = true;
    const users = Array.from({ length: USERS }, user);
    let nextSample = Date.now() + SAMPLE_EVERY_S * 1000;
    let nextQuiet = Date.now() + QUIET_EVERY_S * 1000;
    while (Date.now() < endsAt) {
      await sleep(Math.max(0, Math.min(nextSample, nextQuiet, endsAt) - Date.now()));
      if (Date.now() >= nextSample) {
        const readings = await Promise.all(replicas.map(read));
        readings.forEach((reading, i) => samples[i]!.push(reading));
        nextSample += SAMPLE_EVERY_S * 1000;
      }
      if (Date.now() >= nextQuiet && Date.now() < endsAt) {
        await quietPoint();
        nextQuiet = Date.now() + QUIET_EVERY_S * 1000;
      }
    }
    running = false;
    gate.open();
    await Promise.all(users);
    await quietPoint();

    const warmupEnd = MINUTES * WARMUP_FRACTION;
    const figures = replicas.map((_, i) => {
      const after = samples[i]!.filter((s) => s.atMinutes >= warmupEnd);
      const perHour = (points: [number, number][]): number | null => {
        const slope = leastSquaresSlope(points);
        return slope === null ? null : slope * 60;
      };
      const quiet = quietPoints[i]!;
      return {
        replica: i + 1,
        rssSlopeMiBPerHour: perHour(after.map((s) => [s.atMinutes, s.rssMiB])),
        outsideHeapSlopeMiBPerHour: perHour(after.map((s) => [s.atMinutes, s.rssMiB - s.heapTotalMiB])),
        heapUsedSlopeMiBPerHour: perHour(after.map((s) => [s.atMinutes, s.heapUsedMiB])),
        rssStartEndMax: [samples[i]![0]?.rssMiB, samples[i]!.at(-1)?.rssMiB, Math.max(...samples[i]!.map((s) => s.rssMiB))],
        quietRssMiB: quiet.map((q) => Number(q.rssMiB.toFixed(1))),
        quietHeapTotalMiB: quiet.map((q) => Number(q.heapTotalMiB.toFixed(1))),
        quietHeapUsedMiB: quiet.map((q) => Number(q.heapUsedMiB.toFixed(1))),
        quietFds: quiet.map((q) => q.fds),
        quietRssSlopeAfterWarmupMiBPerHour: perHour(quiet.filter((q) => q.atMinutes >= warmupEnd).map((q) => [q.atMinutes, q.rssMiB])),
      };
    });
    const crossed: string[] = [];
    for (const f of figures) {
      if (
        MINUTES * (1 - WARMUP_FRACTION) >= THRESHOLDS.minSlopeSpanMinutes &&
        (f.rssSlopeMiBPerHour ?? 0) > THRESHOLDS.maxRssSlopeMiBPerHour
      ) {
        crossed.push(`replica-${f.replica}: RSS slope ${f.rssSlopeMiBPerHour?.toFixed(1)} MiB/h > ${THRESHOLDS.maxRssSlopeMiBPerHour}`);
      }
      const fdGrowth = (f.quietFds.at(-1) ?? 0) - (f.quietFds[1] ?? f.quietFds[0] ?? 0);
      // In --heap-check mode the process is the bench too (its users' HTTP pools, the stubs' sockets):
      // its descriptors say nothing about the coordinator's, so only child replicas are judged.
      if (!HEAP_CHECK && fdGrowth > THRESHOLDS.maxQuietFdGrowth)
        crossed.push(`replica-${f.replica}: fds grew by ${fdGrowth} between quiet points`);
    }
    // --heap-check: growth per session from the first quiet point after the warm-up to the last.
    const settled = heapAfterGc.filter(([minutes]) => minutes >= warmupEnd);
    const heapFigures =
      HEAP_CHECK && settled.length >= 2
        ? {
            quietPoints: heapAfterGc.map(([minutes, sessions, live, used]) => ({
              minutes: Number(minutes.toFixed(1)),
              sessions,
              liveMiB: Number(live.toFixed(3)),
              heapUsedMiB: Number(used.toFixed(2)),
            })),
            bytesPerSessionAfterWarmup:
              ((settled.at(-1)![2] - settled[0]![2]) * 2 ** 20) / Math.max(1, settled.at(-1)![1] - settled[0]![1]),
          }
        : undefined;
    if (heapFigures && heapFigures.bytesPerSessionAfterWarmup > THRESHOLDS.maxHeapBytesPerSession) {
      crossed.push(
        `the live heap grew ${heapFigures.bytesPerSessionAfterWarmup.toFixed(0)} B per session after the warm-up > ${THRESHOLDS.maxHeapBytesPerSession}`,
      );
    }
    const correctness = {
      startedMoreThanOnce: tallied.startedMoreThanOnce + [...observed.starts.values()].filter((n) => n > 1).length,
      duplicateStarts: observed.duplicateStarts,
      occupiedStarts: observed.occupiedStarts,
      declaredGone: observed.declaredGone,
    };
    const churnOut = { sessions: churn.sessions, tokens: churn.tokens, reads: churn.reads, failures: Object.fromEntries(churn.failures) };
    process.stdout.write(`\nchurn: ${JSON.stringify(churnOut)}\nplacement: ${JSON.stringify(correctness)}\n`);
    for (const f of figures) process.stdout.write(`replica-${f.replica}: ${JSON.stringify(f)}\n`);
    if (heapFigures) process.stdout.write(`heap check: ${JSON.stringify(heapFigures)}\n`);
    process.stdout.write(crossed.length ? `FAIL: ${crossed.join('; ')}\n` : 'PASS: every replica within the thresholds\n');
    finishReport(info, loadavg(), args.json, {
      settings: {
        minutes: MINUTES,
        engine: args.engine,
        replicas: HEAP_CHECK ? 'one, in process (--heap-check)' : REPLICAS,
        runtimes: RUNTIMES,
        slots: SLOTS,
        users: USERS,
        hold: HOLD_S,
        tokenLifetimeSeconds: TOKEN_LIFETIME_S,
      },
      ...(heapFigures ? { heapCheck: heapFigures } : {}),
      thresholds: THRESHOLDS,
      churn: churnOut,
      placement: correctness,
      figures,
      samples,
      crossed,
    });
    if (crossed.length > 0) process.exitCode = 1;
  } finally {
    for (const runtime of runtimes) await runtime.stop();
    for (const replica of replicas) await replica.stop();
    await postgres?.stop();
    if (folder) rmSync(folder, { recursive: true, force: true });
    if (snapshotFolderToRemove) rmSync(snapshotFolderToRemove, { recursive: true, force: true });
  }
  if (process.exitCode === 1) process.exit(1);
});
