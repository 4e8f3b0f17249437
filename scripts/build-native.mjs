// Builds the optional native addon (build/Release/arclight_native.node) with cmake-js.
// Runs on `npm install` (package.json `install`) and as `npm run build:native`.
//
// The addon is never required: Arclight's JavaScript paths serve without it. So a missing cmake
// or compiler, or a failed build, prints one warning line and exits 0 — it must never fail an
// install. ARCLIGHT_SKIP_NATIVE=1 skips the build. With `--strict` (used by build:native) a
// failure exits non-zero, for developers who want to see it.
//
// cmake-js targets Node-API (package.json "binary.napi_versions"), so it takes headers from the
// node-api-headers package and downloads nothing.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);
const strict = process.argv.includes('--strict');
// --clean: configure afresh (scripts/provision.mjs passes it after installing headers that an
// earlier configure cached as not found).
const clean = process.argv.includes('--clean');
const addon = join(root, 'build', 'Release', 'arclight_native.node');

function giveUp(reason) {
  console.warn(`arclight: native addon not built (${reason}); the JavaScript paths serve`);
  process.exit(strict ? 1 : 0);
}

if (process.env.ARCLIGHT_SKIP_NATIVE === '1' || process.env.ARCLIGHT_SKIP_NATIVE === 'true') {
  console.log('arclight: native addon skipped (ARCLIGHT_SKIP_NATIVE)');
  process.exit(0);
}

let cmakeJs;
try {
  cmakeJs = require.resolve('cmake-js/bin/cmake-js');
} catch {
  giveUp('cmake-js is not installed');
}
const cmake = spawnSync('cmake', ['--version'], { stdio: 'ignore' });
if (cmake.error || cmake.status !== 0) giveUp('cmake not found on PATH');

const started = Date.now();
// `compile` reuses an existing build/ (incremental) and falls back to a clean rebuild; `rebuild`
// always starts clean.
const build = spawnSync(process.execPath, [cmakeJs, clean ? 'rebuild' : 'compile', '--log-level', 'warn'], {
  cwd: root,
  stdio: ['ignore', 'inherit', 'inherit'],
});
if (build.error) giveUp(`cmake-js did not run: ${build.error.message}`);
if (build.status !== 0) giveUp(`cmake-js exited with ${build.status ?? build.signal}; see the output above`);
if (!existsSync(addon)) giveUp(`the build finished without ${addon}`);

// Load it once: a library that builds but fails to load (ABI, missing symbol) is no addon.
try {
  const loaded = require(addon);
  if (typeof loaded.convertToYuv !== 'function') giveUp('the built addon has no convertToYuv export');
} catch (error) {
  giveUp(`the built addon does not load: ${error.message}`);
}
console.log(`arclight: native addon built in ${((Date.now() - started) / 1000).toFixed(1)} s (${addon})`);
