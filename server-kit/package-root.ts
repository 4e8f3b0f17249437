/** The package's root folder (the repository, or the installed package): where package.json is. */

import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

let root: string | undefined;

/** The nearest folder above this file holding package.json (found once). */
export function packageRoot(): string {
  if (root) return root;
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error('arclight: package root not found');
    dir = parent;
  }
  root = dir;
  return dir;
}
