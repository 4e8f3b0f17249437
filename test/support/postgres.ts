/**
 * Throwaway PostgreSQL servers for tests.
 *
 * Why a real server: code that talks to PostgreSQL must be tested against PostgreSQL (its SQL
 * dialect, locking, error codes), not a mock or an in-process imitation. Every server here is
 * private to one test process:
 *
 *   - its cluster lives in a fresh temp directory (`initdb`), removed when the server stops;
 *   - it listens on 127.0.0.1 only, on a port picked here, with no unix socket, so it can
 *     neither collide with nor be reached through anything else on the machine;
 *   - `postgres` runs as our direct child (no `pg_ctl` daemon), and a tiny reaper process kills
 *     it and deletes its directory when this process goes away, however it goes away.
 *
 * `startPostgres()` gives a server you own and stop; `sharedPostgres()` gives one server per
 * test process that many test files share, each isolating itself with `createDatabase()`.
 *
 * Needs the PostgreSQL server binaries (Debian package `postgresql`, which CI installs). When
 * they are missing this throws rather than skipping: tests that need PostgreSQL are required.
 * As root (as in CI), initdb and postgres run as the `postgres` system user, because
 * PostgreSQL refuses to run as root.
 */
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { accessSync, chownSync, constants as fsConstants, mkdtempSync, readdirSync, realpathSync, rmSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import pg from 'pg';

export interface PostgresServer {
  /** Always '127.0.0.1': the only address the server listens on. */
  readonly host: string;
  readonly port: number;
  /** Temp directory holding the cluster (and nothing else of ours); gone after `stop()`. */
  readonly directory: string;
  /** A connection URL for a database on this server, e.g. postgres://postgres@127.0.0.1:PORT/name */
  url(database?: string): string;
  /** Creates a fresh, empty database with a unique name and returns its URL. */
  createDatabase(prefix?: string): Promise<string>;
  /** Stops the server (SIGINT = fast shutdown, SIGKILL after 10 s) and removes its data directory. */
  stop(): Promise<void>;
}

export interface PostgresBinaries {
  readonly initdb: string;
  readonly postgres: string;
}

const HOST = '127.0.0.1';
/** The superuser initdb creates; trust auth, so no password. */
const SUPERUSER = 'postgres';
/** Where Debian's `postgresql` package installs each major version's server binaries. */
const DEBIAN_POSTGRES_ROOT = '/usr/lib/postgresql';
const START_TIMEOUT_MS = 30_000;
const STOP_GRACE_MS = 10_000;
/** Attempts at a free port: another process can take the port between our probe and postgres' bind. */
const PORT_ATTEMPTS = 5;
/** How much of the server's log to keep for error messages. */
const LOG_TAIL_CHARS = 16_384;

/**
 * Settings for a disposable server. Durability is pointless for data deleted after the test,
 * and turning it off makes commits and CREATE DATABASE much faster. 200 connections leave room
 * for many pools in one process (the default, 100, is easy to exhaust with parallel tests).
 */
const SERVER_SETTINGS = ['fsync=off', 'synchronous_commit=off', 'full_page_writes=off', 'max_connections=200'];

// ---------------------------------------------------------------------------
// Finding binaries and the user to run them as
// ---------------------------------------------------------------------------

function isExecutable(path: string): boolean {
  try {
    accessSync(path, fsConstants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function onPath(name: string): string | null {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir && isExecutable(join(dir, name))) return join(dir, name);
  }
  return null;
}

/** Compares version directory names ('15', '9.6') numerically, newest first. */
function newestFirst(a: string, b: string): number {
  const pa = a.split('.').map(Number);
  const pb = b.split('.').map(Number);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const diff = (pb[i] ?? 0) - (pa[i] ?? 0);
    if (diff !== 0) return diff;
  }
  return 0;
}

/**
 * The newest server binaries under /usr/lib/postgresql/<version>/bin (Debian keeps them off
 * PATH there), else `initdb` on PATH with `postgres` beside it (or also on PATH).
 * Throws, naming the package to install, when there are none.
 */
export function findPostgresBinaries(): PostgresBinaries {
  let versions: string[] = [];
  try {
    versions = readdirSync(DEBIAN_POSTGRES_ROOT).filter((name) => /^\d+(\.\d+)*$/.test(name));
  } catch {
    // no Debian-style install; try PATH
  }
  for (const version of versions.sort(newestFirst)) {
    const bin = join(DEBIAN_POSTGRES_ROOT, version, 'bin');
    const binaries = { initdb: join(bin, 'initdb'), postgres: join(bin, 'postgres') };
    if (isExecutable(binaries.initdb) && isExecutable(binaries.postgres)) return binaries;
  }
  const initdb = onPath('initdb');
  if (initdb) {
    // Resolve symlinks (e.g. /usr/local/bin/initdb -> /usr/lib/postgresql/15/bin/initdb) so
    // that initdb and postgres come from the same installation.
    const besideInitdb = join(dirname(realpathSync(initdb)), 'postgres');
    const postgres = isExecutable(besideInitdb) ? besideInitdb : onPath('postgres');
    if (postgres) return { initdb, postgres };
  }
  throw new Error(
    `PostgreSQL server binaries (initdb, postgres) not found in ${DEBIAN_POSTGRES_ROOT}/<version>/bin or on PATH. ` +
      'Install the Debian package `postgresql` (apt-get install postgresql), as CI does. ' +
      'Tests that need PostgreSQL are required, not optional.',
  );
}

interface ServerUser {
  readonly uid: number;
  readonly gid: number;
}

/**
 * Who runs initdb and postgres: the `postgres` system user when we are root (PostgreSQL refuses
 * to run as root), else null for "ourselves". We switch user with spawn's uid/gid options rather
 * than runuser/su: those would stay between us and postgres as its parent, so our signals would
 * reach them instead of the postmaster.
 */
function serverUser(): ServerUser | null {
  if (process.getuid?.() !== 0) return null;
  const id = (flag: string): number =>
    Number(execFileSync('id', [flag, SUPERUSER], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim());
  try {
    return { uid: id('-u'), gid: id('-g') };
  } catch {
    throw new Error(
      `running as root, but there is no '${SUPERUSER}' system user to run PostgreSQL as (it refuses to run as root). ` +
        'The Debian package `postgresql` creates it: apt-get install postgresql.',
    );
  }
}

// ---------------------------------------------------------------------------
// Cleanup when this process ends without stop()
// ---------------------------------------------------------------------------

/**
 * A shell that waits for EOF on its stdin, i.e. for this process to end (the kernel closes our end
 * of the pipe however we die, SIGKILL included), then kills the postmaster whose pid we last wrote
 * to it and deletes the directory. Needed because vitest ends its fork workers with SIGTERM, which
 * runs no 'exit' handlers. A line per pid, each replacing the last; an empty line clears it.
 */
const REAPER_SCRIPT = `
pid=
while IFS= read -r line; do pid=$line; done
if [ -n "$pid" ]; then
  kill -KILL "$pid" 2>/dev/null
  i=0
  while kill -0 "$pid" 2>/dev/null && [ "$i" -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
fi
rm -rf -- "$1"
`;

interface Reaper {
  /** Tells the reaper which pid to kill (null: none). */
  watch(pid: number | null): void;
  /** Ends the reaper without it doing anything (we cleaned up ourselves). */
  dismiss(): void;
}

function startReaper(directory: string): Reaper {
  const child = spawn('/bin/sh', ['-c', REAPER_SCRIPT, 'arclight-postgres-reaper', directory], {
    // Its own process group, so a Ctrl-C meant for the test run does not kill it first; no
    // stdout/stderr, so it never holds the test runner's pipes open.
    detached: true,
    stdio: ['pipe', 'ignore', 'ignore'],
  });
  child.on('error', () => {}); // no /bin/sh: the 'exit' handler is then the only safety net
  child.stdin?.on('error', () => {});
  child.unref();
  (child.stdin as Socket | null)?.unref();
  return {
    watch(pid) {
      child.stdin?.write(`${pid ?? ''}\n`);
    },
    dismiss() {
      child.kill('SIGKILL');
    },
  };
}

interface LiveServer {
  readonly directory: string;
  postmaster: ChildProcess | null;
}

const liveServers = new Set<LiveServer>();
let exitHandlerInstalled = false;

/** Synchronous last resort on a normal process exit (the reaper covers the other ways to die). */
function installExitHandler(): void {
  if (exitHandlerInstalled) return;
  exitHandlerInstalled = true;
  process.on('exit', () => {
    for (const server of liveServers) {
      server.postmaster?.kill('SIGKILL');
      try {
        rmSync(server.directory, { recursive: true, force: true, maxRetries: 3 });
      } catch {
        // the reaper tries again once the postmaster is really gone
      }
    }
  });
}

// ---------------------------------------------------------------------------
// Starting a server
// ---------------------------------------------------------------------------

/** A port that was free on 127.0.0.1 a moment ago (the OS picks it). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.unref();
    probe.on('error', reject);
    probe.listen(0, HOST, () => {
      const address = probe.address();
      probe.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port from probe server'))));
    });
  });
}

/** Environment for initdb and postgres: C locale, so messages and defaults are the same everywhere. */
function serverEnvironment(): NodeJS.ProcessEnv {
  return { ...process.env, LC_ALL: 'C', LANG: 'C' };
}

function runInitdb(binaries: PostgresBinaries, dataDirectory: string, cwd: string, user: ServerUser | null): Promise<void> {
  // -A trust: passwordless, acceptable on a loopback-only throwaway server. --no-sync: nothing
  // here needs to survive a crash. --locale=C: no dependency on installed locales.
  const args = ['-D', dataDirectory, '-A', 'trust', '-U', SUPERUSER, '--no-sync', '-E', 'UTF8', '--locale=C'];
  return new Promise((resolve, reject) => {
    execFile(
      binaries.initdb,
      args,
      { cwd, env: serverEnvironment(), encoding: 'utf8', timeout: 60_000, maxBuffer: 16 << 20, ...(user ?? {}) },
      (err, stdout, stderr) => {
        if (!err) return resolve();
        const hint = user
          ? `\n  hint: initdb runs as the '${SUPERUSER}' user, which must be able to reach ${cwd} (check the permissions of os.tmpdir(), ${tmpdir()}).`
          : '';
        reject(new Error(`initdb failed: ${err.message}\n  stderr: ${stderr.trim()}\n  stdout: ${stdout.trim()}${hint}`));
      },
    );
  });
}

function connectionConfig(port: number, database: string): pg.ClientConfig {
  // ssl: false explicitly, so a PGSSLMODE in the environment cannot make pg demand TLS.
  return { host: HOST, port, user: SUPERUSER, database, ssl: false, connectionTimeoutMillis: 2_000 };
}

async function canConnect(port: number): Promise<boolean> {
  const client = new pg.Client(connectionConfig(port, 'postgres'));
  client.on('error', () => {}); // a failed connect also emits 'error'
  try {
    await client.connect();
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

interface Postmaster {
  readonly child: ChildProcess;
  readonly exited: Promise<void>;
  /** The last LOG_TAIL_CHARS of its stdout and stderr. */
  log(): string;
  hasExited(): boolean;
}

function spawnPostmaster(
  binaries: PostgresBinaries,
  dataDirectory: string,
  cwd: string,
  port: number,
  user: ServerUser | null,
): Postmaster {
  const args = [
    '-D',
    dataDirectory,
    // listen_addresses: loopback IPv4 only, never any other interface.
    '-h',
    HOST,
    '-p',
    String(port),
    // unix_socket_directories = '': no unix socket (nothing in /var/run/postgresql, no lock file there).
    '-k',
    '',
    ...SERVER_SETTINGS.flatMap((setting) => ['-c', setting]),
  ];
  const child = spawn(binaries.postgres, args, { cwd, env: serverEnvironment(), stdio: ['ignore', 'pipe', 'pipe'], ...(user ?? {}) });
  let log = '';
  let exited = false;
  const append = (chunk: Buffer | string): void => {
    log = (log + chunk.toString()).slice(-LOG_TAIL_CHARS);
  };
  // Always drain its output: a full pipe would block the server.
  child.stdout?.on('data', append);
  child.stderr?.on('data', append);
  // Never keep the test process alive for the server; stop(), the 'exit' handler and the reaper end it.
  child.unref();
  (child.stdout as Socket | null)?.unref();
  (child.stderr as Socket | null)?.unref();
  const exitedPromise = new Promise<void>((resolve) => {
    child.once('exit', (code, signal) => {
      exited = true;
      append(`\n[postgres exited: ${signal ?? `code ${code}`}]`);
      resolve();
    });
    child.once('error', (err) => {
      // Failed to spawn at all (no 'exit' follows).
      if (child.pid === undefined) {
        exited = true;
        append(`\n[could not start postgres: ${err.message}]`);
        resolve();
      }
    });
  });
  return { child, exited: exitedPromise, log: () => log, hasExited: () => exited };
}

/** Polls until the server accepts connections ('ready'), exits ('exited') or START_TIMEOUT_MS passes. */
async function waitUntilAccepting(postmaster: Postmaster, port: number): Promise<'ready' | 'exited' | 'timeout'> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (postmaster.hasExited()) return 'exited';
    if (await canConnect(port)) return 'ready';
    await Promise.race([sleep(50), postmaster.exited]);
  }
  return 'timeout';
}

async function stopPostmaster(postmaster: Postmaster): Promise<void> {
  if (postmaster.hasExited()) return;
  postmaster.child.ref(); // stay alive until it is down, so this await is not cut short
  postmaster.child.kill('SIGINT'); // fast shutdown: aborts sessions, no waiting for clients
  const timer = setTimeout(() => postmaster.child.kill('SIGKILL'), STOP_GRACE_MS);
  await postmaster.exited;
  clearTimeout(timer);
}

let databaseCounter = 0;

/**
 * Starts a fresh server: initdb into a new temp directory, then `postgres` on a free port of
 * 127.0.0.1. Resolves once it accepts connections. Call `stop()` when done (afterAll/finally);
 * if you do not, it is killed and its directory deleted when this process ends.
 */
export async function startPostgres(): Promise<PostgresServer> {
  const binaries = findPostgresBinaries();
  const user = serverUser();
  installExitHandler();

  const directory = mkdtempSync(join(tmpdir(), 'arclight-pg-'));
  if (user) chownSync(directory, user.uid, user.gid); // initdb must own the directory it writes into
  const dataDirectory = join(directory, 'data');
  const reaper = startReaper(directory);
  const live: LiveServer = { directory, postmaster: null };
  liveServers.add(live);

  const discard = async (postmaster: Postmaster | null): Promise<void> => {
    if (postmaster) await stopPostmaster(postmaster);
    await rm(directory, { recursive: true, force: true, maxRetries: 3 });
    liveServers.delete(live);
    reaper.dismiss();
  };

  let postmaster: Postmaster | null = null;
  let port = 0;
  try {
    await runInitdb(binaries, dataDirectory, directory, user);
    const failures: string[] = [];
    for (let attempt = 1; ; attempt++) {
      port = await freePort();
      postmaster = spawnPostmaster(binaries, dataDirectory, directory, port, user);
      live.postmaster = postmaster.child;
      reaper.watch(postmaster.child.pid ?? null);
      const outcome = await waitUntilAccepting(postmaster, port);
      if (outcome === 'ready') break;
      if (outcome === 'timeout') {
        throw new Error(
          `postgres did not accept connections on ${HOST}:${port} within ${START_TIMEOUT_MS} ms. Its log:\n${postmaster.log()}`,
        );
      }
      failures.push(`port ${port}:\n${postmaster.log()}`);
      // Someone took the port between our probe and postgres' bind: try another one.
      const portTaken = /could not bind|Address already in use/i.test(postmaster.log());
      postmaster = null;
      live.postmaster = null;
      reaper.watch(null);
      if (!portTaken || attempt >= PORT_ATTEMPTS) {
        throw new Error(`postgres exited during start-up (${attempt} attempt(s)). Its log:\n${failures.join('\n---\n')}`);
      }
    }
  } catch (err) {
    await discard(postmaster).catch(() => {});
    throw err;
  }

  const running: Postmaster = postmaster;
  const url = (database = 'postgres'): string => `postgres://${SUPERUSER}@${HOST}:${port}/${encodeURIComponent(database)}`;
  let stopping: Promise<void> | null = null;

  return {
    host: HOST,
    port,
    directory,
    url,
    async createDatabase(prefix = 'test') {
      if (stopping) throw new Error('createDatabase: the server has been stopped');
      if (running.hasExited()) throw new Error(`createDatabase: postgres exited unexpectedly. Its log:\n${running.log()}`);
      // pid + counter: unique among every database this process creates, on any server.
      // Identifiers are at most 63 bytes and must not start with a digit.
      const safePrefix = prefix
        .toLowerCase()
        .replace(/[^a-z0-9_]/g, '_')
        .slice(0, 40);
      const name = `${/^[a-z_]/.test(safePrefix) ? '' : 'db_'}${safePrefix}_${process.pid}_${++databaseCounter}`;
      const admin = new pg.Client(connectionConfig(port, 'postgres'));
      admin.on('error', () => {}); // surfaced through the awaited calls below
      try {
        await admin.connect();
        await admin.query(`CREATE DATABASE "${name}"`);
      } finally {
        await admin.end().catch(() => {});
      }
      return url(name);
    },
    stop() {
      stopping ??= discard(running);
      return stopping;
    },
  };
}

// ---------------------------------------------------------------------------
// One server per test process
// ---------------------------------------------------------------------------

let shared: Promise<PostgresServer> | undefined;

/**
 * The server shared by every test file this process (a vitest fork worker) runs: started on first
 * use, so files that do not need PostgreSQL pay nothing, and killed with its directory deleted
 * when the process ends. Isolate tests with `createDatabase()`. Its `stop()` rejects: other files
 * still need it; use `startPostgres()` for a server of your own.
 */
export function sharedPostgres(): Promise<PostgresServer> {
  shared ??= startPostgres().then(
    (server): PostgresServer => ({
      host: server.host,
      port: server.port,
      directory: server.directory,
      url: (database) => server.url(database),
      createDatabase: (prefix) => server.createDatabase(prefix),
      stop: () =>
        Promise.reject(
          new Error('sharedPostgres(): the shared server stops when the test process ends; use startPostgres() for one you stop'),
        ),
    }),
    (err: unknown) => {
      shared = undefined; // let the next caller try again (and report the error itself)
      throw err;
    },
  );
  return shared;
}
