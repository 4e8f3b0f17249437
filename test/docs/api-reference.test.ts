/**
 * The API reference (`npm run docs:api`, TypeDoc over every `exports` entry point) builds without
 * a warning: every type a public signature mentions is itself exported (or marked @internal), and
 * every {@link} resolves. A new public option whose type was left unexported fails here.
 */

import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

describe('API reference (TypeDoc)', () => {
  it('documents every package entry point', () => {
    const manifest = JSON.parse(readFileSync(`${ROOT}package.json`, 'utf8')) as { exports: Record<string, { source?: string }> };
    const config = JSON.parse(readFileSync(`${ROOT}typedoc.json`, 'utf8')) as { entryPoints: string[] };
    // ./register only registers a loader: it has nothing to document.
    const sources = Object.entries(manifest.exports)
      .filter(([path, entry]) => path !== './register' && entry.source)
      .map(([, entry]) => entry.source!.replace(/^\.\//, ''));
    expect([...config.entryPoints].sort()).toEqual(sources.sort());
  });

  it('builds with no warnings', { timeout: 180_000 }, () => {
    const typedoc = `${ROOT}node_modules/typedoc/bin/typedoc`;
    const result = spawnSync(process.execPath, [typedoc, '--emit', 'none', '--treatWarningsAsErrors'], {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: 170_000,
    });
    expect(result.status, `${result.stdout}\n${result.stderr}`).toBe(0);
  });
});
