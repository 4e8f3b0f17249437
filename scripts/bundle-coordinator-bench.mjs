// Builds .devbench/ (git-ignored through .git/info/exclude): bench/coordinator-throughput.ts
// self-contained for a Linux x86-64 machine with neither node nor node_modules (a lent
// many-core host). esbuild bundles of the bench and of what its child processes run (the
// coordinator stand-in, the load process, and `arclight coordinator` for --workers), with only the
// native module left out: a minimal better-sqlite3 (its compiled addon, for this node's ABI) and
// its runtime dependencies; and this machine's node, xz-compressed. .devbench/run.sh (kept there,
// not here) unpacks node and runs the bench with ARCLIGHT_BENCH_BUNDLE_DIR=.devbench, which
// points the bench's child processes at the bundles (bench/support/coordinator-load.ts).
//
//   node scripts/bundle-coordinator-bench.mjs [--no-node]     (--no-node: keep .devbench/node.xz)
//
// pg is bundled (pure JS; only the PostgreSQL engine uses it, and no server is carried); its
// optional pg-native is external and never loaded (nothing reads pg.native).

import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const OUT = join(ROOT, '.devbench');
const withNode = !process.argv.includes('--no-node');
mkdirSync(OUT, { recursive: true });

// Bundled ESM still meets CommonJS `require` (pg, the external better-sqlite3): give it one.
const banner = "import { createRequire as __arclightCreateRequire } from 'node:module'; const require = __arclightCreateRequire(import.meta.url);";
const common = {
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  conditions: ['source'],
  external: ['better-sqlite3', 'pg-native'],
  banner: { js: banner },
  outExtension: { '.js': '.mjs' },
  logLevel: 'warning',
  absWorkingDir: ROOT,
  metafile: true,
};
const results = [
  await build({
    ...common,
    entryPoints: ['bench/coordinator-throughput.ts', 'bench/support/coordinator-server.ts', 'bench/support/coordinator-load-child.ts'],
    outdir: OUT,
    entryNames: '[name]',
  }),
  // bin/arclight.js picks its CLI by a computed import; the bundle runs the coordinator's CLI
  // directly (as bin/arclight.js does for `arclight coordinator`). node:cluster forks this same file.
  await build({
    ...common,
    stdin: {
      contents: "import { main } from './coordinator/cli.ts';\nprocess.exit(await main(process.argv.slice(2)));\n",
      resolveDir: ROOT,
      sourcefile: 'arclight-coordinator-entry.ts',
      loader: 'ts',
    },
    outfile: join(OUT, 'arclight.mjs'),
  }),
];
const inputs = new Set(results.flatMap((r) => Object.keys(r.metafile.inputs)));
const native = [...inputs].filter((f) => f.endsWith('.node'));
if (native.length) throw new Error(`native files were bundled: ${native.join(', ')}`);

// better-sqlite3, minimal: what `require('better-sqlite3')` loads.
const modules = join(OUT, 'node_modules');
rmSync(modules, { recursive: true, force: true });
const copy = (from, to = from) => cpSync(join(ROOT, 'node_modules', from), join(modules, to), { recursive: true });
for (const name of ['bindings', 'file-uri-to-path']) copy(name);
copy('better-sqlite3/package.json');
copy('better-sqlite3/lib');
copy('better-sqlite3/build/Release/better_sqlite3.node');

if (withNode || !existsSync(join(OUT, 'node.xz'))) {
  // The node that built the addon (same ABI), without its debug info.
  const stripped = join(OUT, 'node');
  cpSync(process.execPath, stripped);
  execFileSync('strip', ['--strip-debug', stripped]);
  execFileSync('xz', ['-f', '-T2', '-6', stripped]);
}

const git = (...args) => {
  try {
    return execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
};
writeFileSync(
  join(OUT, 'source.json'),
  JSON.stringify({ commit: git('rev-parse', '--short', 'HEAD'), modified: git('status', '--porcelain', '--', 'coordinator', 'bench', 'protocol').split('\n').filter(Boolean), node: process.version, builtAt: new Date().toISOString() }, null, 2) + '\n',
);
const size = (p) => (statSync(p).isDirectory() ? 0 : statSync(p).size);
const du = execFileSync('du', ['-sb', OUT], { encoding: 'utf8' }).split('\t')[0];
process.stdout.write(`built ${OUT}: ${(Number(du) / 2 ** 20).toFixed(1)} MiB (node.xz ${(size(join(OUT, 'node.xz')) / 2 ** 20).toFixed(1)} MiB)\n`);
