// Builds .devgpu/ (git-ignored through .git/info/exclude): bench/gpu/check.ts self-contained for a
// lent GPU host (Ubuntu 24.04, x86-64) with neither node nor node_modules nor a network. The
// device tool carries the working tree plus named paths, 64 MiB in all, so the pieces are separate
// archives, each carried only by the call that needs it:
//
//   .devgpu/node.xz      this machine's node (the ABI the bundled native modules were built for), --strip-debug
//   .devgpu/av.tar.xz    node_modules/@seydx/node-av-linux-x64: node-av's FFmpeg binary (node-av's JS is in the bundle)
//   .devgpu/ort.tar.xz   node_modules/onnxruntime-node + onnxruntime-common, minimal (the onnx part)
//   .devgpu/app.tar.xz   esbuild bundles of bench/gpu/check.ts and bench/gpu/check-runtime.ts (code-split, so a
//                        part's native modules load only when that part runs), the Node-API and node-addon-api
//                        headers and /usr/include/ffnvcodec (the check builds the addon from the carried working
//                        tree's native/ and CMakeLists.txt), and build/Release/arclight_native.node as the fallback
//   .devgpu/run.sh       unpacks whichever archives are there into .devgpu/run/ and runs the check from the repo
//                        root: `bash .devgpu/run.sh [check options]` (--out defaults to $OUT)
//
// .devgpu/run/ sits two folders below the repository root, like bench/gpu/, so what the bundled code
// finds relative to itself (package.json for packageRoot(), the fake driver's sources in
// native/test/fake-driver for --dry) is where the unbundled code finds it.
//
//   node scripts/bundle-gpu-check.mjs [--no-node] [--no-av] [--no-ort] [--no-smoke]
//
// --no-node / --no-av / --no-ort keep an archive already built (they change only when node or
// node_modules do). It prints the archives' sizes and the two carry lists (exit 1 when a call would
// exceed the 64 MiB), then unpacks the archives into a copy of the working tree that has no
// node_modules and runs the dry check there, every part at 720p for 2 s, the addon's build from the
// carried headers included (--no-smoke skips it; a failed record fails the script).

import { execFileSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const OUT = join(ROOT, '.devgpu');
const STAGE = join(OUT, 'stage');
const flag = (name) => process.argv.includes(name);
/** What the device tool carries at most, working tree included. */
const CARRY_LIMIT = 64 * 2 ** 20;
const MIB = 2 ** 20;

mkdirSync(OUT, { recursive: true });
rmSync(STAGE, { recursive: true, force: true });

const say = (line) => process.stdout.write(`bundle-gpu-check: ${line}\n`);
const xz = (args, options = {}) => execFileSync('xz', args, { stdio: ['ignore', 'inherit', 'inherit'], ...options });
/** tar + xz of `paths` (relative to `dir`) into `archive`; `preset` is xz's. */
function tarXz(archive, dir, paths, preset) {
  const tar = join(STAGE, 'archive.tar');
  execFileSync('tar', ['-cf', tar, '--owner=0', '--group=0', '-C', dir, ...paths]);
  // One thread: this machine has two cores and others use them; xz -T1 also packs best.
  xz(['-f', '-T1', `--lzma2=${preset}`, tar]);
  cpSync(`${tar}.xz`, archive);
  rmSync(`${tar}.xz`);
}

// --- app: the bundles ------------------------------------------------------------------------
const APP = join(STAGE, 'app');
// Bundled ESM still meets CommonJS `require` (node-av's loader, onnxruntime-node): give it one.
const banner =
  "import { createRequire as __arclightCreateRequire } from 'node:module'; const require = __arclightCreateRequire(import.meta.url);";
/**
 * The werift peer (test/support/werift-peer.ts) imports waitUntil from video-probe.ts, which imports
 * the Node client and with it @roamhq/wrtc. The check never opens a wrtc peer, and wrtc's native
 * build is not carried: an empty module stands in for it.
 */
const stubWrtc = {
  name: 'stub-wrtc',
  setup(b) {
    b.onResolve({ filter: /^@roamhq\/wrtc$/ }, () => ({ path: 'wrtc', namespace: 'stub' }));
    b.onLoad({ filter: /.*/, namespace: 'stub' }, () => ({ contents: 'export default {};', loader: 'js' }));
  },
};
const result = await build({
  entryPoints: { check: 'bench/gpu/check.ts', 'check-runtime': 'bench/gpu/check-runtime.ts' },
  outdir: APP,
  bundle: true,
  splitting: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  conditions: ['source'],
  // Native modules stay outside: node-av's binary package, onnxruntime-node (its own loader finds
  // its .node and .so beside its JS). esbuild and tsx are only imported by paths the check does not
  // take (the playground's bundler, loading a model module from a file).
  external: ['@seydx/*', 'onnxruntime-node', 'esbuild', 'tsx', 'tsx/*', '*.node'],
  plugins: [stubWrtc],
  banner: { js: banner },
  outExtension: { '.js': '.mjs' },
  chunkNames: 'chunk-[hash]',
  logLevel: 'warning',
  absWorkingDir: ROOT,
  metafile: true,
});
const nativeInputs = Object.keys(result.metafile.inputs).filter((f) => f.endsWith('.node'));
if (nativeInputs.length) throw new Error(`native files were bundled: ${nativeInputs.join(', ')}`);
const bundleBytes = Object.values(result.metafile.outputs).reduce((n, o) => n + o.bytes, 0);
say(`bundles: ${Object.keys(result.metafile.outputs).length} files, ${(bundleBytes / MIB).toFixed(1)} MiB`);

const modules = join(ROOT, 'node_modules');
const copy = (from, to) => cpSync(from, to, { recursive: true, dereference: true });
mkdirSync(join(APP, 'include'), { recursive: true });
copy(join(modules, 'node-api-headers', 'include'), join(APP, 'include', 'node-api-headers'));
mkdirSync(join(APP, 'include', 'node-addon-api'), { recursive: true });
for (const header of readdirSync(join(modules, 'node-addon-api')).filter((f) => f.endsWith('.h'))) {
  copy(join(modules, 'node-addon-api', header), join(APP, 'include', 'node-addon-api', header));
}
const ffnvcodec = process.env.ARCLIGHT_FFNVCODEC_DIR ?? '/usr/include/ffnvcodec';
if (!existsSync(join(ffnvcodec, 'nvEncodeAPI.h')))
  throw new Error(`no NVENC headers in ${ffnvcodec}: apt-get install libffmpeg-nvenc-dev (the check builds the addon with them)`);
copy(ffnvcodec, join(APP, 'include', 'ffnvcodec'));
const prebuilt = join(ROOT, 'build', 'Release', 'arclight_native.node');
if (existsSync(prebuilt)) copy(prebuilt, join(APP, 'prebuilt', 'arclight_native.node'));
else say(`no ${prebuilt}: the bundle carries no fallback addon (the check's build part must succeed)`);
const git = (...args) => {
  try {
    return execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
};
writeFileSync(
  join(APP, 'source.json'),
  JSON.stringify(
    {
      commit: git('rev-parse', '--short', 'HEAD'),
      modified: git('status', '--porcelain', '--', 'runtime', 'bench', 'native', 'test/support', 'models').split('\n').filter(Boolean),
      node: process.version,
      prebuiltAddon: existsSync(prebuilt) ? { builtAt: statSync(prebuilt).mtime.toISOString() } : null,
      bundledAt: new Date().toISOString(),
    },
    null,
    2,
  ) + '\n',
);
tarXz(join(OUT, 'app.tar.xz'), APP, readdirSync(APP), 'preset=9e');

// --- av: node-av's FFmpeg binary ---------------------------------------------------------------
if (!flag('--no-av') || !existsSync(join(OUT, 'av.tar.xz'))) {
  const pkg = join('node_modules', '@seydx', 'node-av-linux-x64');
  const dir = join(STAGE, 'av');
  for (const file of ['package.json', 'node-av.node']) copy(join(ROOT, pkg, file), join(dir, pkg, file));
  say('compressing node-av.node (175 MB; xz -9e with a 192 MiB dictionary, one thread: a few minutes)');
  tarXz(join(OUT, 'av.tar.xz'), dir, ['node_modules'], 'preset=9e,dict=192MiB');
}

// --- ort: onnxruntime-node, minimal ------------------------------------------------------------
if (!flag('--no-ort') || !existsSync(join(OUT, 'ort.tar.xz'))) {
  const dir = join(STAGE, 'ort');
  const ort = join('node_modules', 'onnxruntime-node');
  const common = join('node_modules', 'onnxruntime-common');
  const bin = join(ort, 'bin', 'napi-v6', 'linux', 'x64');
  copy(join(ROOT, ort, 'package.json'), join(dir, ort, 'package.json'));
  for (const file of readdirSync(join(ROOT, ort, 'dist')).filter((f) => f.endsWith('.js')))
    copy(join(ROOT, ort, 'dist', file), join(dir, ort, 'dist', file));
  for (const file of readdirSync(join(ROOT, bin))) copy(join(ROOT, bin, file), join(dir, bin, file));
  copy(join(ROOT, common, 'package.json'), join(dir, common, 'package.json'));
  copy(join(ROOT, common, 'dist', 'cjs'), join(dir, common, 'dist', 'cjs'));
  tarXz(join(OUT, 'ort.tar.xz'), dir, ['node_modules'], 'preset=9e,dict=64MiB');
}

// --- node ------------------------------------------------------------------------------------
if (!flag('--no-node') || !existsSync(join(OUT, 'node.xz'))) {
  const stripped = join(STAGE, 'node');
  cpSync(process.execPath, stripped);
  execFileSync('strip', ['--strip-debug', stripped]);
  xz(['-f', '-T1', '--lzma2=preset=9e,dict=128MiB', stripped]);
  cpSync(`${stripped}.xz`, join(OUT, 'node.xz'));
}

// --- run.sh ----------------------------------------------------------------------------------
writeFileSync(
  join(OUT, 'run.sh'),
  `#!/usr/bin/env bash
# The GPU check from its bundle (scripts/bundle-gpu-check.mjs), on a host with no node and no
# node_modules: unpacks whichever of node.xz, app.tar.xz, av.tar.xz, ort.tar.xz are beside this
# file into .devgpu/run/, then runs the check from the repository root. Arguments go to the check;
# --out defaults to $OUT (else .tmp/gpu-check).
set -euo pipefail
HERE="$(cd "$(dirname "\${BASH_SOURCE[0]}")" && pwd)"
REPO="$(dirname "$HERE")"
RUN="$HERE/run"
mkdir -p "$RUN"
SECONDS=0
for archive in app av ort; do
  if [ -f "$HERE/$archive.tar.xz" ]; then tar -xJf "$HERE/$archive.tar.xz" -C "$RUN"; fi
done
if [ -f "$HERE/node.xz" ]; then xz -dc "$HERE/node.xz" > "$RUN/node" && chmod +x "$RUN/node"; fi
[ -x "$RUN/node" ] || { echo "run.sh: no node (carry .devgpu/node.xz)" >&2; exit 2; }
[ -f "$RUN/check.mjs" ] || { echo "run.sh: no check.mjs (carry .devgpu/app.tar.xz)" >&2; exit 2; }
echo "run.sh: unpacked in $SECONDS s into $RUN"
export PATH="$RUN:$PATH"
export ARCLIGHT_FFNVCODEC_DIR="\${ARCLIGHT_FFNVCODEC_DIR:-$RUN/include/ffnvcodec}"
export ARCLIGHT_NAPI_INCLUDE_DIR="$RUN/include/node-api-headers"
export ARCLIGHT_NODE_ADDON_API_DIR="$RUN/include/node-addon-api"
# The addon built where the bundle was made, unless the tree has its own; the check's build part
# replaces it with one built here (--no-build keeps it).
if [ -z "\${ARCLIGHT_NATIVE_ADDON:-}" ] && [ ! -f "$REPO/build/Release/arclight_native.node" ] && [ -f "$RUN/prebuilt/arclight_native.node" ]; then
  export ARCLIGHT_NATIVE_ADDON="$RUN/prebuilt/arclight_native.node"
fi
cd "$REPO"
exec "$RUN/node" "$RUN/check.mjs" --out "\${OUT:-$REPO/.tmp/gpu-check}" "$@"
`,
);
chmodSync(join(OUT, 'run.sh'), 0o755);
rmSync(STAGE, { recursive: true, force: true });

// --- sizes and carry lists -------------------------------------------------------------------
const size = (name) => (existsSync(join(OUT, name)) ? statSync(join(OUT, name)).size : 0);
const treeBytes = execFileSync('git', ['ls-files', '-z', '-co', '--exclude-standard'], { cwd: ROOT, encoding: 'utf8' })
  .split('\0')
  .filter(Boolean)
  .reduce((n, f) => n + (existsSync(join(ROOT, f)) && statSync(join(ROOT, f)).isFile() ? statSync(join(ROOT, f)).size : 0), 0);
const calls = {
  'call 1 (build, device, nvenc, frames, stream)': ['node.xz', 'av.tar.xz', 'app.tar.xz', 'run.sh'],
  'call 2 (onnx)': ['node.xz', 'ort.tar.xz', 'app.tar.xz', 'run.sh'],
};
for (const name of ['node.xz', 'av.tar.xz', 'ort.tar.xz', 'app.tar.xz', 'run.sh'])
  say(`${name.padEnd(11)} ${(size(name) / MIB).toFixed(2).padStart(6)} MiB`);
say(`working tree (tracked + untracked, not ignored): ${(treeBytes / MIB).toFixed(2)} MiB`);
let over = false;
for (const [call, files] of Object.entries(calls)) {
  const total = treeBytes + files.reduce((n, f) => n + size(f), 0);
  over ||= total > CARRY_LIMIT;
  say(`${call}: ${(total / MIB).toFixed(2)} MiB of 64 with the tree${total > CARRY_LIMIT ? '  OVER THE LIMIT' : ''}`);
  say(`  carry: ${JSON.stringify(files.map((f) => `.devgpu/${f}`))}`);
}

// --- smoke: the unpacked bundle, in a copy of the tree without node_modules ----------------------
if (!flag('--no-smoke')) {
  const copyRoot = mkdtempSync(join(tmpdir(), 'arclight-devgpu-smoke-'));
  try {
    const files = execFileSync('git', ['ls-files', '-z', '-co', '--exclude-standard'], { cwd: ROOT, encoding: 'utf8' })
      .split('\0')
      .filter(Boolean);
    for (const file of files) {
      if (!existsSync(join(ROOT, file))) continue; // deleted, not yet committed
      mkdirSync(dirname(join(copyRoot, file)), { recursive: true });
      cpSync(join(ROOT, file), join(copyRoot, file));
    }
    mkdirSync(join(copyRoot, '.devgpu'));
    for (const name of ['node.xz', 'av.tar.xz', 'ort.tar.xz', 'app.tar.xz', 'run.sh'])
      cpSync(join(OUT, name), join(copyRoot, '.devgpu', name));
    const smokeOut = join(copyRoot, 'smoke-out');
    // Every part, the build included: on the GPU host the addon is built from the carried headers, as here.
    const args = ['--dry', '--sizes', '720p', '--seconds', '2', '--frames', '5', '--device-mib', '16', '--out', smokeOut];
    say(`smoke: bash .devgpu/run.sh ${args.join(' ')}  (in ${copyRoot}: no node_modules, no build/)`);
    // A bare environment: the bundle must not lean on NODE_OPTIONS, NODE_PATH or this tree's node_modules.
    execFileSync('bash', [join(copyRoot, '.devgpu', 'run.sh'), ...args], {
      cwd: copyRoot,
      stdio: ['ignore', 'inherit', 'inherit'],
      env: {
        PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
        HOME: process.env.HOME ?? '/root',
        ARCLIGHT_LOG: 'warn',
      },
      timeout: 300_000,
    });
    const records = readFileSync(join(smokeOut, 'gpu-check.jsonl'), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l));
    const bad = records.filter((r) => r.status === 'failed');
    if (bad.length)
      throw new Error(`smoke: ${bad.length} failed records:\n${bad.map((r) => JSON.stringify(r).slice(0, 1_000)).join('\n')}`);
    say(`smoke: ok (${records.length} records, none failed)`);
  } finally {
    rmSync(copyRoot, { recursive: true, force: true });
  }
}
if (over) process.exitCode = 1;
