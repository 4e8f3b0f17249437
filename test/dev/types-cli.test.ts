/**
 * `arclight types` as a real process (bin/arclight.js from the TypeScript sources): from a live
 * runtime's /schema on 127.0.0.1 and from the same model's module it prints the same types, with
 * the hash the runtime announces in its capabilities; a bad source exits 1 with a reason, bad
 * usage exits 2.
 */

import { execFile } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pattern from '../../models/examples/pattern/index.ts';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import { createLogger } from '../../server-kit/log.ts';
import type { SessionResponse } from '../../protocol/session.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** node + tsx start-up on a busy 2-core machine. */
const CLI_TIMEOUT_MS = 60_000;

interface CliResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

function runTypes(args: readonly string[]): Promise<CliResult> {
  // A real invocation: not marked as running under vitest (the model loader registers tsx then).
  const env: NodeJS.ProcessEnv = { ARCLIGHT_LOG: 'warn' };
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith('VITEST') && key !== 'ARCLIGHT_LOG') env[key] = value;
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--conditions=source', '--import', 'tsx', 'bin/arclight.js', 'types', ...args],
      { cwd: ROOT, env, timeout: CLI_TIMEOUT_MS },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** A port nothing listens on: bound, then released. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('arclight types', () => {
  let runtime: Runtime;

  beforeAll(async () => {
    runtime = await startRuntime({
      model: pattern as never,
      port: 0,
      host: '127.0.0.1',
      ice: { hostAddresses: ['127.0.0.1'] },
      playground: false,
      logger: createLogger({}, 'warn'),
    });
    await runtime.loaded;
  });

  afterAll(async () => {
    await runtime?.close();
  });

  it(
    "prints the same types from a runtime's /schema and from the module, with the hash the runtime announces",
    async () => {
      const [fromUrl, fromModule] = await Promise.all([
        runTypes(['--from', `${runtime.url}/schema`]),
        runTypes(['--from', 'models/examples/pattern']),
      ]);
      expect(fromUrl.stderr).toBe('');
      expect(fromUrl.code).toBe(0);
      expect(fromModule.stderr).toBe('');
      expect(fromModule.code).toBe(0);
      expect(fromModule.stdout).toBe(fromUrl.stdout);

      const capabilities = (await (await fetch(`${runtime.url}/capabilities`)).json()) as SessionResponse['capabilities'];
      expect(capabilities.schema_hash).toMatch(/^[0-9a-f]{64}$/);
      expect(fromUrl.stdout).toContain(`readonly schemaHash: "${capabilities.schema_hash}";`);
      expect(fromUrl.stdout).toContain('export interface PatternModel {');
      expect(fromUrl.stdout).toContain('readonly set_color: {');
      expect(fromUrl.stdout).toContain('readonly type: "color_changed";');
      expect(fromUrl.stdout).toContain('readonly welcome: {');
      expect(fromUrl.stdout).not.toContain('export const');
    },
    CLI_TIMEOUT_MS * 2,
  );

  it(
    '--format ts exports the hash as a value; --name names the interface',
    async () => {
      const result = await runTypes(['--from', `${runtime.url}/schema`, '--format', 'ts', '--name', 'Pattern']);
      expect(result.code).toBe(0);
      expect(result.stdout).toContain('export interface Pattern {');
      expect(result.stdout).toMatch(/export const schemaHash: Pattern\['schemaHash'\] = "[0-9a-f]{64}";\n$/);
    },
    CLI_TIMEOUT_MS,
  );

  it(
    '--help prints the usage and exits 0',
    async () => {
      const result = await runTypes(['--help']);
      expect(result.code).toBe(0);
      expect(result.stdout).toContain('Usage: arclight types --from');
    },
    CLI_TIMEOUT_MS,
  );

  it(
    'bad usage exits 2 with the reason and the usage',
    async () => {
      for (const args of [[], ['--from', 'x', '--format', 'js'], ['--from', 'x', '--name', 'not a name'], ['stray', '--from', 'x']]) {
        const result = await runTypes(args);
        expect(result.code, args.join(' ')).toBe(2);
        expect(result.stdout).toBe('');
        expect(result.stderr).toMatch(/^arclight types: .+\n\nUsage: arclight types/);
      }
    },
    CLI_TIMEOUT_MS * 4,
  );

  it(
    'a source that cannot be read exits 1 and says why',
    async () => {
      const port = await closedPort();
      const cases: Array<[string, RegExp]> = [
        [`http://127.0.0.1:${port}/schema`, /cannot reach http:\/\/127\.0\.0\.1:\d+\/schema: ECONNREFUSED/],
        [`${runtime.url}/no-such-path`, /answered 404 .*expected 200/],
        [`${runtime.url}/health`, /Not an Arclight schema: it has no "x-arclight" section/],
        ['test/fixtures/no-default.ts', /cannot load the model module: .*no default export/],
        ['test/fixtures/invalid-model.ts', /cannot load the model module: .*is not a valid Arclight model/],
        ['test/fixtures/does-not-exist.ts', /cannot load the model module: Model module not found/],
      ];
      const results = await Promise.all(cases.map(([source]) => runTypes(['--from', source])));
      cases.forEach(([source, reason], i) => {
        const result = results[i]!;
        expect(result.code, source).toBe(1);
        expect(result.stdout, source).toBe('');
        expect(result.stderr, source).toMatch(reason);
      });
    },
    CLI_TIMEOUT_MS * 2,
  );
});
