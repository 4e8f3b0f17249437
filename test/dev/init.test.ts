/**
 * `arclight init` end to end, as a model author meets it: scaffold a project in a temp folder,
 * `npm install` it against this checkout (a `file:` dependency, offline), run its own `npm test`
 * (node:test + arclight/testing), then `npm start` and stream from it with the Node client.
 * The project's Node processes run Arclight from its TypeScript sources (NODE_OPTIONS carries the
 * `source` condition and tsx), like every other CLI test here, so no build is needed.
 */

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { lstatSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { ArclightClient } from '../../client/node.ts';
import { defaultArclightDependency } from '../../dev/scaffold/scaffold-project.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const TIMEOUT_MS = 90_000;
const folder = mkdtempSync(join(tmpdir(), 'arclight-init-'));
const project = join(folder, 'glow-model');
const children = new Set<ChildProcess>();

/** The environment of a real invocation (not vitest's), running Arclight from source. */
function authorEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ARCLIGHT_LOG: 'warn' };
  for (const [key, value] of Object.entries(process.env))
    if (!key.startsWith('VITEST') && key !== 'ARCLIGHT_LOG' && key !== 'NODE_OPTIONS') env[key] = value;
  env['NODE_OPTIONS'] = `--conditions=source --import ${pathToFileURL(join(ROOT, 'node_modules', 'tsx', 'dist', 'loader.mjs')).href}`;
  return env;
}

function run(command: string, args: readonly string[], cwd: string): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(command, [...args], { cwd, env: authorEnv(), encoding: 'utf8', timeout: TIMEOUT_MS });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

const arclight = (args: readonly string[], cwd = folder) => run(process.execPath, [join(ROOT, 'bin', 'arclight.js'), ...args], cwd);

afterAll(() => {
  for (const child of children) child.kill('SIGKILL');
  rmSync(folder, { recursive: true, force: true });
});

describe('arclight init', () => {
  it(
    'refuses a name that is not a model slug, and a folder that is not empty (exit 1)',
    () => {
      const bad = arclight(['init', 'My Model']);
      expect(bad.status).toBe(1);
      expect(bad.stderr).toMatch(/"My Model" is not a model name/);
      const busy = join(folder, 'busy');
      mkdirSync(busy);
      writeFileSync(join(busy, 'keep.txt'), 'mine');
      const refused = arclight(['init', 'busy']);
      expect(refused.status).toBe(1);
      expect(refused.stderr).toMatch(/is not empty/);
      expect(readFileSync(join(busy, 'keep.txt'), 'utf8')).toBe('mine');
      expect(arclight(['init']).status).toBe(2);
    },
    TIMEOUT_MS,
  );

  it(
    'scaffolds a project that installs against this package and passes its own tests',
    () => {
      const made = arclight(['init', 'glow-model', '--arclight', `file:${ROOT}`]);
      expect(made.status, made.stderr).toBe(0);
      for (const file of [
        'index.ts',
        'test/model.test.ts',
        'README.md',
        'Dockerfile',
        '.dockerignore',
        '.gitignore',
        'package.json',
        'tsconfig.json',
      ]) {
        expect(made.stdout).toContain(`  ${file}`);
      }
      const manifest = JSON.parse(readFileSync(join(project, 'package.json'), 'utf8')) as { name: string; scripts: Record<string, string> };
      expect(manifest.name).toBe('glow-model');
      expect(readFileSync(join(project, 'index.ts'), 'utf8')).toContain("name: 'glow-model'");
      expect(readFileSync(join(project, 'Dockerfile'), 'utf8')).toContain('ARCLIGHT_MODEL=/models/glow-model/index.ts');

      const install = run('npm', ['install', '--ignore-scripts', '--offline', '--no-audit', '--no-fund'], project);
      expect(install.status, install.stderr).toBe(0);
      expect(lstatSync(join(project, 'node_modules', 'arclight')).isSymbolicLink()).toBe(true);

      const tests = run('npm', ['test'], project);
      expect(tests.status, `${tests.stdout}\n${tests.stderr}`).toBe(0);
      expect(tests.stdout).toMatch(/# pass [1-9]/);
      expect(tests.stdout).toMatch(/# fail 0/);

      // Its typed-client declarations come from the module.
      const types = run('npm', ['run', '--silent', 'types'], project);
      expect(types.status, types.stderr).toBe(0);
      expect(types.stdout).toContain('set_color');
      expect(types.stdout).toContain('welcome');
    },
    TIMEOUT_MS,
  );

  it(
    '`npm start` serves it: a client connects, gets the greeting and the video, and commands work',
    async () => {
      const child = spawn('npm', ['start', '--', '--port', '0'], {
        cwd: project,
        env: authorEnv(),
        stdio: ['ignore', 'pipe', 'pipe'],
        detached: true,
      });
      children.add(child);
      let output = '';
      child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
      child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
      try {
        const deadline = Date.now() + TIMEOUT_MS / 2;
        let port: string | undefined;
        while (!(port = /on http:\/\/localhost:(\d+)/.exec(output)?.[1])) {
          if (child.exitCode !== null || Date.now() > deadline) throw new Error(`npm start printed no URL:\n${output}`);
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        // npm start is dev mode: it watches the project for changes.
        expect(output).toMatch(/watching/);
        const connected = new ArclightClient({ modelName: 'glow-model', local: true, localRuntimeUrl: `http://127.0.0.1:${port}` });
        const welcome = new Promise((resolve) => connected.on('message', (m) => m.type === 'welcome' && resolve(m.data)));
        const video = new Promise((resolve) =>
          connected.on('trackReceived', (name, track) => name === 'main_video' && resolve(track.kind)),
        );
        await connected.connect();
        try {
          expect(await welcome).toEqual({ model: 'glow-model', speed: 4 });
          expect(await video).toBe('video');
          expect(await connected.sendCommand('set_color', { color: '#00FF00' })).toEqual({
            type: 'color_changed',
            data: { color: '#00ff00' },
          });
          await expect(connected.sendCommand('set_speed', { speed: 13 })).rejects.toMatchObject({ code: 'unlucky_speed' });
        } finally {
          await connected.disconnect();
        }
      } finally {
        // npm runs the CLI in a child: signal the whole group, then wait for it to go.
        const exited = new Promise((resolve) => child.once('close', resolve));
        process.kill(-child.pid!, 'SIGTERM');
        await exited;
        children.delete(child);
      }
    },
    TIMEOUT_MS,
  );
});

describe('the Arclight dependency `arclight init` writes by default', () => {
  /** A package folder at `path` (under the temp folder), as npm or git would leave it. */
  function arclightAt(path: string, { git = false } = {}): string {
    const dir = join(folder, 'dependency', path);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'arclight', version: '9.8.7' }));
    if (git) mkdirSync(join(dir, '.git'));
    return dir;
  }

  it('from this checkout: the checkout, by its absolute path', () => {
    expect(defaultArclightDependency()).toEqual({ spec: `file:${realpathSync(ROOT)}`, source: 'checkout' });
  });

  it('from a copy npm installed (inside node_modules): the range of its version', () => {
    expect(defaultArclightDependency(arclightAt('npx/node_modules/arclight'))).toEqual({ spec: '^9.8.7', source: 'registry' });
  });

  it('from a source folder that is not a git clone, or a git clone wherever it is: that folder', () => {
    const archive = arclightAt('downloads/arclight-main');
    expect(defaultArclightDependency(archive)).toEqual({ spec: `file:${realpathSync(archive)}`, source: 'checkout' });
    const clone = arclightAt('vendor/node_modules/arclight', { git: true });
    expect(defaultArclightDependency(clone)).toEqual({ spec: `file:${realpathSync(clone)}`, source: 'checkout' });
  });

  it('through a symlink in node_modules (npm link, a file: dependency): the folder it points at', () => {
    const checkout = arclightAt('src/arclight');
    mkdirSync(join(folder, 'dependency', 'app', 'node_modules'), { recursive: true });
    const link = join(folder, 'dependency', 'app', 'node_modules', 'arclight');
    symlinkSync(checkout, link);
    expect(defaultArclightDependency(link)).toEqual({ spec: `file:${realpathSync(checkout)}`, source: 'checkout' });
  });
});
