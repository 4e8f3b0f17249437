/**
 * Self-test of the throwaway PostgreSQL helper: a server starts, databases it creates are
 * isolated from each other, it is reachable at 127.0.0.1 only, and stopping it closes the port
 * and deletes its directory. Also checks the guarantee that matters most for CI: a test process
 * that dies without calling stop() (vitest ends its workers with SIGTERM) leaves no server and
 * no directory behind.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { connect } from 'node:net';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sharedPostgres, startPostgres, type PostgresServer } from './postgres.ts';

/** Resolves true if a TCP connection to host:port is accepted, false if it fails in any way. */
function acceptsTcp(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (accepted: boolean): void => {
      socket.destroy();
      resolve(accepted);
    };
    socket.setTimeout(2_000, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

async function withClient<T>(url: string, use: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, ssl: false });
  await client.connect();
  try {
    return await use(client);
  } finally {
    await client.end();
  }
}

async function waitFor(condition: () => Promise<boolean> | boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await condition()) return true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return condition();
}

describe('startPostgres', () => {
  let server: PostgresServer;
  let startMs = 0;

  beforeAll(async () => {
    const started = performance.now();
    server = await startPostgres();
    startMs = performance.now() - started;
  });

  afterAll(async () => {
    await server?.stop();
  });

  it('starts a server that accepts connections', async () => {
    console.log(`postgres started in ${Math.round(startMs)} ms on port ${server.port}`);
    expect(server.host).toBe('127.0.0.1');
    expect(server.url()).toBe(`postgres://postgres@127.0.0.1:${server.port}/postgres`);
    const version = await withClient(server.url(), async (c) => (await c.query<{ server_version: string }>('SHOW server_version')).rows[0]);
    expect(version?.server_version).toMatch(/^\d+/);
  });

  it('creates databases that are isolated from each other', async () => {
    const urlA = await server.createDatabase('isolation');
    const urlB = await server.createDatabase('isolation');
    expect(urlA).not.toBe(urlB);
    expect(urlA).toMatch(new RegExp(`^postgres://postgres@127\\.0\\.0\\.1:${server.port}/isolation_\\d+_\\d+$`));

    for (const [url, value] of [
      [urlA, 'in A'],
      [urlB, 'in B'],
    ] as const) {
      await withClient(url, async (c) => {
        await c.query('CREATE TABLE item (id serial PRIMARY KEY, value text NOT NULL)');
        await c.query('INSERT INTO item (value) VALUES ($1)', [value]);
      });
    }
    const rowsA = await withClient(urlA, async (c) => (await c.query<{ value: string }>('SELECT value FROM item')).rows);
    const rowsB = await withClient(urlB, async (c) => (await c.query<{ value: string }>('SELECT value FROM item')).rows);
    expect(rowsA).toEqual([{ value: 'in A' }]);
    expect(rowsB).toEqual([{ value: 'in B' }]);
    // A fresh database does not see tables made in the others.
    const urlC = await server.createDatabase();
    const tables = await withClient(urlC, async (c) => (await c.query("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")).rows);
    expect(tables).toEqual([]);
  });

  it('accepts an odd prefix', async () => {
    const url = await server.createDatabase('9 Weird-Name!');
    expect(url).toMatch(/\/db_9_weird_name__\d+_\d+$/);
    await withClient(url, async (c) => expect((await c.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]));
  });

  it('listens on 127.0.0.1 only, with no unix socket', async () => {
    const settings = await withClient(server.url(), async (c) => {
      const listen = (await c.query<{ listen_addresses: string }>('SHOW listen_addresses')).rows[0]?.listen_addresses;
      const sockets = (await c.query<{ unix_socket_directories: string }>('SHOW unix_socket_directories')).rows[0]?.unix_socket_directories;
      return { listen, sockets };
    });
    expect(settings).toEqual({ listen: '127.0.0.1', sockets: '' });

    expect(await acceptsTcp('127.0.0.1', server.port)).toBe(true);
    // SHOW listen_addresses is the proof; no test traffic goes to any other address (not even
    // this machine's own interface addresses), so reachability elsewhere is not probed.
  });

  it('stop() closes the port and deletes the directory', async () => {
    const own = await startPostgres();
    expect(existsSync(own.directory)).toBe(true);
    // An open session must not hold up the (fast) shutdown.
    const session = new pg.Client({ connectionString: own.url(), ssl: false });
    session.on('error', () => {});
    await session.connect();

    await own.stop();
    await own.stop(); // idempotent
    await session.end().catch(() => {});
    expect(await acceptsTcp('127.0.0.1', own.port)).toBe(false);
    expect(existsSync(own.directory)).toBe(false);
    await expect(own.createDatabase()).rejects.toThrow(/stopped/);
  });
});

describe('sharedPostgres', () => {
  it('is one server per process that refuses to be stopped', async () => {
    const a = await sharedPostgres();
    const b = await sharedPostgres();
    expect(b.port).toBe(a.port);
    const url = await a.createDatabase('shared');
    await withClient(url, async (c) => expect((await c.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]));
    await expect(a.stop()).rejects.toThrow(/shared server/);
  });

  // vitest ends fork workers with SIGTERM, which runs no 'exit' handlers; SIGKILL is the worst case.
  for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
    it(`leaves nothing behind when its process dies of ${signal}`, async () => {
      const helper = fileURLToPath(new URL('./postgres.ts', import.meta.url));
      const script = `
        import { sharedPostgres } from ${JSON.stringify(helper)};
        const server = await sharedPostgres();
        console.log(JSON.stringify({ port: server.port, directory: server.directory }));
        setInterval(() => {}, 1000); // wait to be killed
      `;
      const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      try {
        expect(await waitFor(() => stdout.includes('\n'), 30_000), `child printed nothing; stderr: ${stderr}`).toBe(true);
        const { port, directory } = JSON.parse(stdout) as { port: number; directory: string };
        expect(await acceptsTcp('127.0.0.1', port)).toBe(true);
        expect(existsSync(directory)).toBe(true);

        child.kill(signal);
        await exited;
        expect(await waitFor(async () => !(await acceptsTcp('127.0.0.1', port)), 10_000), 'server still accepting connections').toBe(true);
        expect(await waitFor(() => !existsSync(directory), 15_000), `${directory} still exists`).toBe(true);
      } finally {
        child.kill('SIGKILL');
      }
    }, 60_000);
  }
});
