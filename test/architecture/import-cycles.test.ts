/**
 * No import cycle among the non-test sources — type-only imports included. ESLint's no-cycle
 * (npm run lint) catches cycles of value imports; this also catches the type-only ones, which
 * vanish at run time but still tie two files' designs together (issue 23: "no import cycle").
 */

import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { packageRoot } from '../../server-kit/package-root.ts';

const root = packageRoot();
const FOLDERS = ['protocol', 'server-kit', 'client', 'coordinator', 'runtime', 'dev'];

function sources(): string[] {
  const listed = execFileSync(
    'git',
    ['ls-files', '--cached', '--others', '--exclude-standard', '--', ...FOLDERS.flatMap((f) => [`${f}/*.ts`, `${f}/*.tsx`])],
    { cwd: root, encoding: 'utf8' },
  );
  return listed
    .split('\n')
    .filter((file) => file !== '' && !/\.test\.tsx?$/.test(file) && !file.endsWith('.d.ts') && !file.startsWith('dev/scaffold/template/'));
}

/** The file's relative imports (TypeScript's own pre-parse: comments and strings are not imports). */
function importsOf(file: string, known: ReadonlySet<string>): string[] {
  const { importedFiles } = ts.preProcessFile(readFileSync(join(root, file), 'utf8'), true, true);
  return importedFiles
    .map((imported) => imported.fileName)
    .filter((name) => name.startsWith('./') || name.startsWith('../'))
    .map((name) => relative(root, resolve(root, dirname(file), name)))
    .filter((target) => known.has(target));
}

/** Strongly connected components of more than one file (Tarjan), or a file importing itself. */
function cycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  let index = 0;
  const indexOf = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (node: string): void => {
    indexOf.set(node, index);
    low.set(node, index++);
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!indexOf.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node)!, low.get(next)!));
      } else if (onStack.has(next)) low.set(node, Math.min(low.get(node)!, indexOf.get(next)!));
    }
    if (low.get(node) === indexOf.get(node)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      if (component.length > 1 || (graph.get(node) ?? []).includes(node)) found.push(component.sort());
    }
  };
  for (const node of graph.keys()) if (!indexOf.has(node)) visit(node);
  return found;
}

describe('import cycles', () => {
  it('none among the non-test sources, type-only imports included', () => {
    const files = sources();
    const known = new Set(files);
    const graph = new Map(files.map((file) => [file, importsOf(file, known)] as const));
    expect(cycles(graph)).toEqual([]);
  });
});
