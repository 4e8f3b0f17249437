/**
 * The `arclight dev` watcher: a change in a nested folder is seen (also in a folder created after
 * the start), a burst of writes is one callback, and dependencies, build output and dot-files are
 * ignored.
 */

import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { isWatchedPath, ModuleWatcher } from '../../runtime/dev/module-watcher.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('ModuleWatcher', () => {
  let folder: string | undefined;
  let watcher: ModuleWatcher | undefined;

  afterEach(async () => {
    watcher?.close();
    if (folder) await rm(folder, { recursive: true, force: true });
  });

  it('sees nested changes once per burst and ignores dependencies, build output and dot-files', async () => {
    folder = await mkdtemp(join(tmpdir(), 'arclight-watch-'));
    for (const sub of ['lib/deep', 'node_modules/pkg', 'dist', '.git']) await mkdir(join(folder, sub), { recursive: true });
    const bursts: string[][] = [];
    watcher = new ModuleWatcher(folder, (paths) => bursts.push([...paths]), 100);
    await sleep(100);

    for (let i = 0; i < 5; i++) await writeFile(join(folder, 'lib/deep/helper.ts'), `export const n = ${i};\n`);
    await sleep(400);
    expect(bursts).toEqual([['lib/deep/helper.ts']]);

    await writeFile(join(folder, 'node_modules/pkg/index.js'), '1');
    await writeFile(join(folder, 'dist/index.js'), '1');
    await writeFile(join(folder, '.git/HEAD'), '1');
    await writeFile(join(folder, '.index.ts.swp'), '1');
    await sleep(400);
    expect(bursts).toHaveLength(1);

    // A folder created after the start is watched too.
    await mkdir(join(folder, 'lib/added'));
    await sleep(300);
    await writeFile(join(folder, 'lib/added/more.ts'), 'export {};\n');
    await sleep(400);
    expect(bursts.flat()).toContain('lib/added/more.ts');
  });

  it('isWatchedPath', () => {
    expect(isWatchedPath('index.ts')).toBe(true);
    expect(isWatchedPath('lib/a.ts')).toBe(true);
    expect(isWatchedPath('node_modules/x/index.js')).toBe(false);
    expect(isWatchedPath('dist/index.js')).toBe(false);
    expect(isWatchedPath('.git/HEAD')).toBe(false);
    expect(isWatchedPath('lib/.a.ts.swp')).toBe(false);
  });
});
