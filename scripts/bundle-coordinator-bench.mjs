// Builds .devbench/ (git-ignored through .git/info/exclude): bench/coordinator-throughput.ts
// self-contained for a Linux x86-64 machine with neither node nor node_modules (a lent
// many-core host). esbuild bundles of the bench and of what its child processes run (the
// coordinator stand-in, the load process, and `arclight coordinator` for --workers), with only the
// native module left out: a minimal better-sqlite3 (its compiled addon, for this node's ABI) and
// its runtime dependencies; and this machine's node, xz-compressed. .devbench/run.sh (written
// here) unpacks node and runs the bench with ARCLIGHT_BENCH_BUNDLE_DIR=.devbench, which points the
// bench's child processes at the bundles (bench/support/coordinator-load.ts).
//
//   node scripts/bundle-coordinator-bench.mjs [--no-node] [--postgres]
//     --no-node: keep .devbench/node.xz; --postgres: also carry PostgreSQL (pg.tar.xz) for the
//     PostgreSQL phases, e.g. issue 20's replicas on one database (`--workers 1,2,4`).
//
// pg is bundled (pure JS; only the PostgreSQL engine uses it, and no server is carried); its
// optional pg-native is external and never loaded (nothing reads pg.native).

import { execFileSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdirSync, readdirSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const OUT = join(ROOT, '.devbench');
const withNode = !process.argv.includes('--no-node');
const withPostgres = process.argv.includes('--postgres');
mkdirSync(OUT, { recursive: true });

// Bundled ESM still meets CommonJS `require` (pg, the external better-sqlite3): give it one.
const banner =
  "import { createRequire as __arclightCreateRequire } from 'node:module'; const require = __arclightCreateRequire(import.meta.url);";
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

// PostgreSQL (--postgres): Debian's server binaries with the shared libraries they need beyond
// glibc, for a host that has none. run.sh lays them out where test/support/postgres.ts looks
// (/usr/lib/postgresql/<v>, its share/ beside /usr/share/postgresql/<v>, so the server finds its
// files by its own relative paths) and points LD_LIBRARY_PATH at the libraries.
if (withPostgres) {
  const versions = readdirSync('/usr/lib/postgresql')
    .filter((v) => /^\d+$/.test(v))
    .sort((a, b) => Number(b) - Number(a));
  if (versions.length === 0) throw new Error('--postgres: no /usr/lib/postgresql/<version> here (apt-get install postgresql)');
  const version = versions[0];
  const stage = join(OUT, 'pg-stage');
  rmSync(stage, { recursive: true, force: true });
  const bin = `/usr/lib/postgresql/${version}/bin`;
  mkdirSync(join(stage, bin), { recursive: true });
  for (const tool of ['postgres', 'initdb']) cpSync(join(bin, tool), join(stage, bin, tool));
  cpSync(`/usr/lib/postgresql/${version}/lib`, join(stage, `/usr/lib/postgresql/${version}/lib`), { recursive: true });
  cpSync(`/usr/share/postgresql/${version}`, join(stage, `/usr/share/postgresql/${version}`), { recursive: true, dereference: true });
  // glibc and the C++ runtime stay the host's (newer there, and backward compatible).
  const keepHosts = /^(linux-vdso|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libresolv\.|ld-linux|libstdc\+\+|libgcc_s)/;
  const libs = new Set();
  for (const file of [join(bin, 'postgres'), join(bin, 'initdb'), `/usr/lib/postgresql/${version}/lib/plpgsql.so`]) {
    for (const line of execFileSync('ldd', [file], { encoding: 'utf8' }).split('\n')) {
      const match = /^\s*(\S+) => (\/\S+)/.exec(line);
      if (match && !keepHosts.test(match[1])) libs.add(match[2]);
    }
  }
  mkdirSync(join(stage, 'libs'), { recursive: true });
  for (const lib of libs) cpSync(realpathSync(lib), join(stage, 'libs', basename(lib)));
  execFileSync('tar', ['-cJf', join(OUT, 'pg.tar.xz'), '--owner=0', '--group=0', '-C', stage, '.'], {
    env: { ...process.env, XZ_OPT: '-6 -T2' },
  });
  rmSync(stage, { recursive: true, force: true });
}

// run.sh: unpacks node (and PostgreSQL when carried) and runs each pass of the bench.
writeFileSync(
  join(OUT, 'run.sh'),
  `#!/usr/bin/env bash
# Generated by scripts/bundle-coordinator-bench.mjs. On a host without node or node_modules:
#   DEVBENCH_PASSES='--workers 1,2,4' (one pass a line) [DEVBENCH_ENGINES=sqlite|postgres] bash .devbench/run.sh
set -euo pipefail
HERE="$(cd "$(dirname "\${BASH_SOURCE[0]}")" && pwd)"
mkdir -p /tmp/devbench
xz -dc "$HERE/node.xz" > /tmp/devbench/node && chmod +x /tmp/devbench/node
if [ -f "$HERE/pg.tar.xz" ]; then
  mkdir -p /tmp/devbench/pg && tar -xJf "$HERE/pg.tar.xz" -C /tmp/devbench/pg
  cp -a /tmp/devbench/pg/usr/lib/postgresql /usr/lib/ && cp -a /tmp/devbench/pg/usr/share/postgresql /usr/share/
  export LD_LIBRARY_PATH="/tmp/devbench/pg/libs\${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # PostgreSQL refuses to run as root: test/support/postgres.ts runs it as this user.
  id postgres >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin postgres
fi
export ARCLIGHT_BENCH_BUNDLE_DIR="$HERE"
OUT="\${OUT:-$HERE/out}"; mkdir -p "$OUT"
ENGINES="\${DEVBENCH_ENGINES:-$([ -f "$HERE/pg.tar.xz" ] && echo postgres || echo sqlite)}"
i=0
while IFS= read -r pass; do
  [ -n "$pass" ] || continue
  i=$((i + 1))
  # shellcheck disable=SC2086
  /tmp/devbench/node "$HERE/coordinator-throughput.mjs" --engines "$ENGINES" --rounds "\${DEVBENCH_ROUNDS:-3}" --seconds "\${DEVBENCH_SECONDS:-5}" \
    --concurrency "\${DEVBENCH_CONCURRENCY:-32}" $pass --json "$OUT/pass$i.json" 2>&1 | tee "$OUT/pass$i.log"
done <<< "\${DEVBENCH_PASSES:---workers 2}"
`,
);
chmodSync(join(OUT, 'run.sh'), 0o755);

const git = (...args) => {
  try {
    return execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
};
writeFileSync(
  join(OUT, 'source.json'),
  JSON.stringify(
    {
      commit: git('rev-parse', '--short', 'HEAD'),
      modified: git('status', '--porcelain', '--', 'coordinator', 'bench', 'protocol').split('\n').filter(Boolean),
      node: process.version,
      builtAt: new Date().toISOString(),
    },
    null,
    2,
  ) + '\n',
);
const size = (p) => (statSync(p).isDirectory() ? 0 : statSync(p).size);
const du = execFileSync('du', ['-sb', OUT], { encoding: 'utf8' }).split('\t')[0];
process.stdout.write(
  `built ${OUT}: ${(Number(du) / 2 ** 20).toFixed(1)} MiB (node.xz ${(size(join(OUT, 'node.xz')) / 2 ** 20).toFixed(1)} MiB)\n`,
);
