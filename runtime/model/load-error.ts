/**
 * Turns why a model could not be loaded into something an author can act on: the message, and
 * the file, line and column in *their* code (with a few lines of it), whatever failed — esbuild's
 * transform of a TypeScript file (a syntax error), Node's import (a missing file), the definition
 * check, or a throw in `load()` (the first stack frame outside the runtime and node_modules).
 */

import { readFileSync } from 'node:fs';
import { sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ModelLoadErrorInfo } from '../../protocol/session-logs.ts';
import { packageRoot } from '../../server-kit/package-root.ts';

/** Lines shown around the failing one in a code frame. */
const FRAME_CONTEXT_LINES = 2;

/** esbuild (tsx): `/abs/file.ts:3:14: ERROR: Unexpected ";"`. */
const ESBUILD_LOCATION = /(\S+?):(\d+):(\d+): ERROR: ([^\n]*)/;
/** A V8 stack frame's location: `(file:///abs/x.ts?v=3:12:5)` or `at /abs/x.js:12:5`. */
const STACK_LOCATION = /\(?((?:file:\/\/)?\/[^():\s]+?)(?:\?[^:\s)]*)?:(\d+):(\d+)\)?\s*$/;
/** Node's ERR_MODULE_NOT_FOUND / ERR_UNSUPPORTED…: `… imported from /abs/index.ts`. */
const IMPORTED_FROM = /imported from (\S+)/;

export function describeLoadError(error: unknown): ModelLoadErrorInfo {
  const message = messageOf(error);
  const location = esbuildLocation(error) ?? authorFrame(error) ?? importerOf(message);
  if (!location) return { code: 'model_load_failed', message };
  const frame = location.line === undefined ? undefined : codeFrame(location.file, location.line, location.column);
  return {
    code: 'model_load_failed',
    message,
    file: location.file,
    ...(location.line === undefined ? {} : { line: location.line }),
    ...(location.column === undefined ? {} : { column: location.column }),
    ...(frame === undefined ? {} : { frame }),
  };
}

/** `file:line:column: message` and the code frame: what a terminal prints. */
export function formatLoadError(info: ModelLoadErrorInfo): string {
  const where =
    info.file === undefined
      ? ''
      : `${info.file}${info.line === undefined ? '' : `:${info.line}${info.column === undefined ? '' : `:${info.column}`}`}: `;
  return `${where}${info.message}${info.frame ? `\n${info.frame}` : ''}`;
}

interface SourceLocation {
  readonly file: string;
  readonly line?: number;
  readonly column?: number;
}

function messageOf(error: unknown): string {
  // ModelModuleError wraps the import's own error; the author wants the inner one's words.
  const inner = error instanceof Error && error.cause instanceof Error ? error.cause : error;
  if (inner instanceof Error) {
    const esbuild = ESBUILD_LOCATION.exec(inner.message);
    if (esbuild) return esbuild[4]!;
    return inner === error ? inner.message : `${(error as Error).message.split('\n')[0]}`;
  }
  return String(error);
}

function esbuildLocation(error: unknown): SourceLocation | undefined {
  for (const candidate of [error, (error as { cause?: unknown } | null)?.cause]) {
    if (!(candidate instanceof Error)) continue;
    const match = ESBUILD_LOCATION.exec(candidate.message);
    if (match) return { file: toPath(match[1]!), line: Number(match[2]), column: Number(match[3]) + 1 };
  }
  return undefined;
}

function authorFrame(error: unknown): SourceLocation | undefined {
  for (const candidate of [(error as { cause?: unknown } | null)?.cause, error]) {
    if (!(candidate instanceof Error) || !candidate.stack) continue;
    // A SyntaxError in a plain .js module: V8 puts `file:///abs/x.js:3` as the stack's first line.
    const head = /^((?:file:\/\/)?\/[^\s:]+?)(?:\?\S*)?:(\d+)$/m.exec(candidate.stack.split('\n')[0] ?? '');
    if (head && candidate instanceof SyntaxError) return { file: toPath(head[1]!), line: Number(head[2]) };
    for (const line of candidate.stack.split('\n').slice(1)) {
      const match = STACK_LOCATION.exec(line.trim());
      if (!match) continue;
      const file = toPath(match[1]!);
      if (isAuthorFile(file)) return { file, line: Number(match[2]), column: Number(match[3]) };
    }
  }
  return undefined;
}

function importerOf(message: string): SourceLocation | undefined {
  const match = IMPORTED_FROM.exec(message);
  return match ? { file: toPath(match[1]!) } : undefined;
}

/** Not the runtime's own sources or a dependency: the model's files. */
function isAuthorFile(file: string): boolean {
  if (file.includes(`${sep}node_modules${sep}`) || file.startsWith('node:')) return false;
  const root = packageRoot();
  // The repository's example models live under the package root and are authors' files too.
  for (const own of ['runtime', 'protocol', 'client', 'coordinator', 'dev', 'dist']) {
    if (file.startsWith(`${root}${sep}${own}${sep}`)) return false;
  }
  return true;
}

function toPath(location: string): string {
  const bare = location.replace(/\?.*$/, '');
  return bare.startsWith('file://') ? fileURLToPath(bare) : bare;
}

function codeFrame(file: string, line: number, column: number | undefined): string | undefined {
  let lines: string[];
  try {
    lines = readFileSync(file, 'utf8').split('\n');
  } catch {
    return undefined;
  }
  if (line < 1 || line > lines.length) return undefined;
  const first = Math.max(1, line - FRAME_CONTEXT_LINES);
  const last = Math.min(lines.length, line + FRAME_CONTEXT_LINES);
  const width = String(last).length;
  const out: string[] = [];
  for (let n = first; n <= last; n++) {
    out.push(`${n === line ? '>' : ' '} ${String(n).padStart(width)} | ${lines[n - 1]}`);
    if (n === line && column !== undefined) out.push(`  ${' '.repeat(width)} | ${' '.repeat(Math.max(0, column - 1))}^`);
  }
  return out.join('\n');
}
