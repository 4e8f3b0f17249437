/**
 * The "never" arrows of docs/architecture.md, read from the source: which top-level folder may
 * import which. A relative import that crosses into a forbidden folder fails here with the file
 * and the line, so a shortcut between processes cannot land unnoticed.
 */

import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { packageRoot } from '../../server-kit/package-root.ts';

const root = packageRoot();

/** Folder → the folders of ours its non-test source may import (besides itself). */
const MAY_IMPORT: Record<string, readonly string[]> = {
  protocol: [],
  'server-kit': ['protocol'],
  client: ['protocol'],
  coordinator: ['protocol', 'server-kit'],
  runtime: ['protocol', 'server-kit'],
};

interface CrossImport {
  readonly file: string;
  readonly line: number;
  readonly target: string;
}

function sourceFiles(folder: string): string[] {
  const listed = execFileSync(
    'git',
    ['ls-files', '--cached', '--others', '--exclude-standard', '--', `${folder}/*.ts`, `${folder}/*.tsx`],
    { cwd: root, encoding: 'utf8' },
  );
  return listed.split('\n').filter((file) => file !== '' && !/\.test\.tsx?$/.test(file) && !file.endsWith('.d.ts'));
}

/** Every relative import of the file whose target lies outside its own top-level folder. */
function crossImports(file: string): CrossImport[] {
  const text = readFileSync(join(root, file), 'utf8');
  const own = file.split('/')[0]!;
  const found: CrossImport[] = [];
  const pattern = /(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)['"](\.{1,2}\/[^'"]+)['"]/gm;
  for (const match of text.matchAll(pattern)) {
    const target = relative(root, resolve(root, dirname(file), match[1]!));
    const folder = target.split('/')[0]!;
    if (folder === own) continue;
    found.push({ file, line: text.slice(0, match.index).split('\n').length, target });
  }
  return found;
}

describe('import boundaries between the top-level folders', () => {
  for (const [folder, allowed] of Object.entries(MAY_IMPORT)) {
    it(`${folder}/ imports only ${allowed.length === 0 ? 'itself' : allowed.map((a) => `${a}/`).join(' and ')} of ours`, () => {
      const files = sourceFiles(folder);
      expect(files.length).toBeGreaterThan(0);
      const forbidden = files.flatMap(crossImports).filter((cross) => !allowed.includes(cross.target.split('/')[0]!));
      expect(forbidden.map((cross) => `${cross.file}:${cross.line} → ${cross.target}`)).toEqual([]);
    });
  }
});
