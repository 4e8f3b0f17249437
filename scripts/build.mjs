// Builds what a plain `node` needs to run Arclight without a TypeScript loader:
//   dist/**            — the library, compiled by tsc (package.json `exports` point here)
//   dist/browser/*.js  — the client library bundled for browsers (served by the playground)
// Runs on `npm install` (prepare) so that a fresh clone needs only `npm install` then `npm start`.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);

const tsc = require.resolve('typescript/bin/tsc');
const result = spawnSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json')], {
  stdio: 'inherit',
});
if (result.status !== 0) process.exit(result.status ?? 1);

const { bundleBrowserClient } = await import('./bundle-browser.mjs');
await bundleBrowserClient(join(root, 'dist', 'browser'));
console.log('arclight: build complete');
