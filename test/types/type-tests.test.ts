/**
 * Type tests for typed clients: the fixtures in this folder compile with `tsc --noEmit -p
 * test/types`, where every `// @ts-expect-error` line must fail to compile (tsc reports an
 * unused directive otherwise) — wrong command names, wrong or missing parameters, wrong message
 * data. A second compile of copies without the directives proves each of those lines is an error
 * on its own. pattern-model.d.ts is `arclight types` output for the pattern example, checked in
 * so editors see it, and checked here to be current.
 */

import { execFile } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { renderModelTypes } from '../../dev/types/declaration-writer.ts';
import { modelSchemaFromModule } from '../../dev/types/model-schema.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const HERE = fileURLToPath(new URL('./', import.meta.url));
const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
/** tsc checks the client and runtime sources the fixtures import: slow on a loaded 2-core machine. */
const TSC_TIMEOUT_MS = 240_000;
const FIXTURES = readdirSync(HERE).filter((name) => name.endsWith('.ts') && !name.endsWith('.test.ts') && !name.endsWith('.d.ts'));
const scratch = join(ROOT, '.tmp', `type-tests-${process.pid}-${Date.now()}`);

function tsc(project: string): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [TSC, '--noEmit', '--pretty', 'false', '-p', project],
      { cwd: ROOT, timeout: TSC_TIMEOUT_MS, maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : -1, output: `${stdout}${stderr}` });
      },
    );
  });
}

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('typed client type tests', () => {
  it('pattern-model.d.ts is what `arclight types` prints for the pattern example now', async () => {
    const current = renderModelTypes(await modelSchemaFromModule(join(ROOT, 'models/examples/pattern')));
    expect(
      readFileSync(join(HERE, 'pattern-model.d.ts'), 'utf8'),
      'regenerate: npx arclight types --from models/examples/pattern > test/types/pattern-model.d.ts',
    ).toBe(current);
  });

  it(
    'the fixtures compile, every @ts-expect-error line included, and each of those lines is an error by itself',
    async () => {
      // Copies without the directives, importing the real files by absolute path.
      mkdirSync(scratch, { recursive: true });
      const expected: string[] = [];
      for (const name of FIXTURES) {
        const lines = readFileSync(join(HERE, name), 'utf8')
          .replace(/from '\.\.\/\.\.\//g, `from '${ROOT}`)
          .replace(/from '\.\//g, `from '${HERE}`)
          .split('\n');
        const stripped = lines.map((line, index) => {
          if (!/^\s*\/\/ @ts-expect-error/.test(line)) return line;
          expected.push(`${name}:${index + 2}`); // the guarded line, 1-based
          return '';
        });
        writeFileSync(join(scratch, name), stripped.join('\n'));
      }
      // Absolute .ts imports are fine here (nothing is emitted), but tsc refuses them under the
      // repository's rewriteRelativeImportExtensions.
      writeFileSync(
        join(scratch, 'tsconfig.json'),
        JSON.stringify({
          extends: join(ROOT, 'tsconfig.json'),
          compilerOptions: { noEmit: true, rewriteRelativeImportExtensions: false },
          include: ['*.ts'],
        }),
      );
      expect(expected.length).toBeGreaterThanOrEqual(15);

      const [fixtures, withoutDirectives] = await Promise.all([tsc(join(HERE, 'tsconfig.json')), tsc(join(scratch, 'tsconfig.json'))]);
      expect(fixtures.output).toBe('');
      expect(fixtures.code).toBe(0);

      const errorLines = new Set(
        [...withoutDirectives.output.matchAll(/^(?:.*[\\/])?([^\\/(]+\.ts)\((\d+),\d+\): error TS\d+/gm)].map((m) => `${m[1]}:${m[2]}`),
      );
      expect(withoutDirectives.code).not.toBe(0);
      expect(
        expected.filter((line) => !errorLines.has(line)),
        'directive lines that compile without the directive',
      ).toEqual([]);
      // No error anywhere else: the fixtures' correct code is correct.
      expect(
        [...errorLines].filter((line) => !expected.includes(line)),
        withoutDirectives.output,
      ).toEqual([]);
    },
    TSC_TIMEOUT_MS * 2,
  );
});
