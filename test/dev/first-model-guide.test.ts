/**
 * docs/first-model.md's commands, run as written: the guide's own shell blocks (section 1, "Make a
 * project", and section 4, "Test it") are read out of the Markdown and run one by one as child
 * processes, so the guide and this test cannot drift apart. From this checkout, as the guide
 * says: `npx arclight init` with no `--arclight` (the default dependency, this checkout by a
 * `file:` path), then inside the new project a real `npm install` (offline: it must need nothing
 * from the registry), `npm start` (polled over HTTP until its playground serves the new model,
 * then stopped) and `npm test`.
 *
 * Two departures from the literal text, both forced: the project goes in a temp folder instead of
 * beside the checkout (each argument naming the guide's project folder becomes that folder), and
 * `npm start` gets `-- --port 0 --host 127.0.0.1` (port 8080 may be taken on a shared machine).
 *
 * As for a model author, the project's `npm install` runs the checkout's `prepare` and `install`
 * scripts (the template's allowScripts approves them): they rebuild this checkout's dist/ and
 * native addon in place, which is what the project then runs.
 */

import { spawn, type ChildProcess } from 'node:child_process';
import { lstatSync, mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, delimiter, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = realpathSync(fileURLToPath(new URL('../..', import.meta.url)));
const GUIDE = readFileSync(join(ROOT, 'docs', 'first-model.md'), 'utf8');
// Ceilings for a loaded 2-core machine, not expectations: the whole run takes well under a minute
// there when idle (npm install, which rebuilds the checkout's dist/, is most of it).
const STEP_MS = 240_000;
const TEST_MS = 600_000;

const folder = mkdtempSync(join(tmpdir(), 'arclight-first-model-'));
const children = new Set<ChildProcess>();

afterAll(() => {
  for (const child of children) killGroup(child, 'SIGKILL');
  // rmSync removes the project's node_modules/arclight symlink, not the checkout it points at.
  rmSync(folder, { recursive: true, force: true });
});

/** The commands of the first ```sh block after a heading, without comments and blank lines. */
function shellBlock(heading: string): string[] {
  const at = GUIDE.indexOf(`\n${heading}\n`);
  if (at < 0) throw new Error(`docs/first-model.md has no heading "${heading}"`);
  const block = /```sh\n([\s\S]*?)```/.exec(GUIDE.slice(at));
  if (!block) throw new Error(`docs/first-model.md has no sh block under "${heading}"`);
  return block[1]!
    .split('\n')
    .map((line) => line.replace(/(^|\s)#.*$/, '').trim())
    .filter((line) => line !== '');
}

/**
 * A model author's shell: this process's environment without what vitest and npm put in it (npm
 * lifecycle variables would configure the project's npm; NODE_OPTIONS would change how Arclight
 * runs) and without node_modules/.bin on PATH (the project's npm scripts must find `arclight` in
 * their own node_modules). npm runs offline, so any fetch from the registry fails the test instead
 * of hiding a dependency on the network; audit, fund and the update check are off for the same
 * reason (they only talk to the registry, and change nothing installed).
 */
function authorEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (/^(VITEST|npm_)/i.test(key) || ['NODE_OPTIONS', 'INIT_CWD', 'NODE_ENV', 'TEST'].includes(key)) continue;
    env[key] = value;
  }
  env['PATH'] = (process.env['PATH'] ?? '')
    .split(delimiter)
    .filter((entry) => !/node_modules[\\/]\.bin[\\/]?$/.test(entry))
    .join(delimiter);
  Object.assign(env, {
    npm_config_offline: 'true',
    npm_config_audit: 'false',
    npm_config_fund: 'false',
    npm_config_update_notifier: 'false',
  });
  return env;
}

/**
 * `arclight init` runs this checkout's CLI, which is dist/ when built; dist/ is whatever the last
 * build left (the project's npm install below rebuilds it, but that comes after). Run it from
 * source instead, as every other CLI test here does, so the init under test is the working tree's.
 */
function fromSourceEnv(): NodeJS.ProcessEnv {
  const loader = pathToFileURL(join(ROOT, 'node_modules', 'tsx', 'dist', 'loader.mjs')).href;
  return { ...authorEnv(), NODE_OPTIONS: `--conditions=source --import ${loader}` };
}

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  try {
    // Negative pid: the whole group (npm, its shell, the node it starts); each is spawned detached.
    process.kill(-child.pid!, signal);
  } catch {
    // Already gone.
  }
}

interface Started {
  readonly child: ChildProcess;
  /** stdout and stderr so far, interleaved. */
  output(): string;
  /** Exit code (or null, killed), once it has exited. */
  readonly exited: Promise<number | null>;
}

function start(argv: readonly string[], cwd: string, env: NodeJS.ProcessEnv): Started {
  const child = spawn(argv[0]!, argv.slice(1), { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  children.add(child);
  let output = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const exited = new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => {
      children.delete(child);
      resolve(code);
    });
  });
  return { child, output: () => output, exited };
}

/** Runs a command to its end; on passing STEP_MS its group is killed and the step fails. */
async function run(argv: readonly string[], cwd: string, env: NodeJS.ProcessEnv): Promise<string> {
  const started = start(argv, cwd, env);
  const timer = setTimeout(() => killGroup(started.child, 'SIGKILL'), STEP_MS);
  const code = await started.exited.finally(() => clearTimeout(timer));
  expect(code, `\`${argv.join(' ')}\` in ${cwd} exited ${code}:\n${started.output()}`).toBe(0);
  return started.output();
}

/** Retries `attempt` (an error counts as not yet) until it gives a value, or the server exits. */
async function poll<T>(what: string, attempt: () => Promise<T | undefined>, server: Started): Promise<T> {
  const deadline = Date.now() + STEP_MS;
  for (;;) {
    const value = await attempt().catch(() => undefined);
    if (value !== undefined) return value;
    if (server.child.exitCode !== null || server.child.signalCode !== null)
      throw new Error(`${what}: npm start exited while serving:\n${server.output()}`);
    if (Date.now() > deadline) throw new Error(`${what}: gave up after ${STEP_MS / 1000} s\n${server.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** `npm start`: waits for the model's playground to serve it, checks it is the new model, stops it. */
async function serveAndStop(argv: readonly string[], cwd: string, model: string): Promise<void> {
  const server = start([...argv, '--', '--port', '0', '--host', '127.0.0.1'], cwd, authorEnv());
  try {
    const port = await poll('the runtime printing its URL', async () => /on http:\/\/localhost:(\d+)/.exec(server.output())?.[1], server);
    const base = `http://127.0.0.1:${port}`;
    // Healthy once the model has loaded; until then /health answers 503.
    await poll('GET /health', async () => ((await fetch(`${base}/health`)).ok ? true : undefined), server);
    const status = (await (await fetch(`${base}/dev/status`)).json()) as { model: string; error: unknown };
    expect(status).toMatchObject({ model, error: null });
    const page = await fetch(`${base}/`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    // The page's client library, bundled from the checkout by the checkout's esbuild.
    const client = await fetch(`${base}/playground/arclight-client.js`);
    const bundle = await client.text();
    expect(client.status, bundle).toBe(200);
    expect(bundle).toContain('ArclightClient');
  } finally {
    killGroup(server.child, 'SIGTERM');
    const stopped = await Promise.race([
      server.exited.then(
        () => true,
        () => true,
      ),
      new Promise<false>((resolve) => setTimeout(() => resolve(false), 30_000)),
    ]);
    if (!stopped) {
      killGroup(server.child, 'SIGKILL');
      await server.exited.catch(() => undefined);
      // eslint-disable-next-line no-unsafe-finally -- a server that outlives SIGTERM fails the test, whatever the try did
      throw new Error(`npm start did not stop on SIGTERM within 30 s:\n${server.output()}`);
    }
  }
}

describe('docs/first-model.md, run as written', () => {
  const make = shellBlock('## 1. Make a project');
  const test = shellBlock('## 4. Test it');

  it(
    'its commands scaffold a project beside the checkout that depends on it, and it installs, serves and passes its tests offline',
    async () => {
      // The guide's shape: init from the checkout into a folder outside it, cd there, then npm.
      const init = /^npx arclight init (\S+)$/.exec(make[0] ?? '');
      expect(init, `section 1 starts with \`npx arclight init <folder>\`: ${make.join(' | ')}`).not.toBeNull();
      const target = init![1]!;
      expect(relative(ROOT, resolve(ROOT, target)).startsWith('..'), `${target} is outside the checkout`).toBe(true);
      expect(make.slice(1)).toEqual([`cd ${target}`, 'npm install', 'npm start']);
      expect(test).toEqual(['npm test']);

      const model = basename(target);
      const project = join(folder, model);
      const local = (arg: string): string => (arg === target ? project : arg);
      let cwd = ROOT;
      for (const line of [...make, ...test]) {
        const argv = line.split(/\s+/).map(local);
        if (argv[0] === 'cd') {
          cwd = resolve(cwd, argv[1]!);
        } else if (argv[0] === 'npx') {
          const output = await run(argv, cwd, fromSourceEnv());
          // With no --arclight, from a checkout: this checkout, by its absolute path.
          expect(output).toContain(`its arclight dependency: file:${ROOT}, this checkout`);
          const manifest = JSON.parse(readFileSync(join(project, 'package.json'), 'utf8')) as {
            name: string;
            devDependencies: Record<string, string>;
          };
          expect(manifest).toMatchObject({ name: model, devDependencies: { arclight: `file:${ROOT}` } });
        } else if (line === 'npm install') {
          const output = await run(argv, cwd, authorEnv());
          // The template's allowScripts covers the checkout's scripts: npm has nothing to warn about.
          expect(output).not.toMatch(/not yet covered by allowScripts/);
          expect(lstatSync(join(project, 'node_modules', 'arclight')).isSymbolicLink()).toBe(true);
          expect(realpathSync(join(project, 'node_modules', 'arclight'))).toBe(ROOT);
        } else if (line === 'npm start') {
          await serveAndStop(argv, cwd, model);
        } else if (line === 'npm test') {
          const output = await run(argv, cwd, authorEnv());
          expect(output).toMatch(/# pass [1-9]/);
          expect(output).toMatch(/# fail 0/);
        } else {
          throw new Error(`the test does not know how to run \`${line}\` from docs/first-model.md; teach it`);
        }
      }
      expect(cwd).toBe(project);
    },
    TEST_MS,
  );
});
