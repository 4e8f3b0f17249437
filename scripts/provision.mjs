// The one provisioning step for the test suite: `npm test` runs it first (package.json `pretest`)
// and `.ci/run` runs it before `npm ci`. It finds the system packages the tests need and, when it
// can (root on Debian/Ubuntu, with apt-get), installs what is missing; when it cannot, it stops at
// once with the exact command to run. Without it a fresh machine's `npm test` failed a dozen files
// one by one, each with its own "install X" message.
//
// Plain Node with no dependencies: CI runs it before `npm ci`, when node_modules does not exist.
//
// Environment:
//   ARCLIGHT_PROVISION=auto   (default) install what is missing when root with apt-get, else explain
//   ARCLIGHT_PROVISION=check  never install: report, and fail when something is missing
//   ARCLIGHT_PROVISION=skip   do nothing (the tests that need a missing package then fail on their own)
//   ARCLIGHT_PROVISION_HIDE=chromium,coturn
//                             treat these as missing on the first look, to see what the step does on a
//                             machine without them (the look after an install does not hide them)
//   ARCLIGHT_CHROMIUM         a Chromium binary to use instead of Debian's (test/support/chromium.ts
//                             honours it too)
// Flags: --dry-run (say what would run, change nothing), --json (one JSON object on stdout).
import { spawnSync } from 'node:child_process';
import { accessSync, constants as fsConstants, existsSync, readdirSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

function isExecutable(path) {
  try {
    accessSync(path, fsConstants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function onPath(name) {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir && isExecutable(join(dir, name))) return join(dir, name);
  }
  // root's tools live in sbin, which a user's PATH may lack.
  for (const dir of ['/usr/sbin', '/sbin']) if (isExecutable(join(dir, name))) return join(dir, name);
  return undefined;
}

function firstExecutable(paths) {
  return paths.find((path) => path && isExecutable(path));
}

function postgresServer() {
  let versions = [];
  try {
    versions = readdirSync('/usr/lib/postgresql').filter((name) => /^\d+(\.\d+)*$/.test(name));
  } catch {
    // not a Debian-style install
  }
  for (const version of versions) {
    const bin = join('/usr/lib/postgresql', version, 'bin');
    if (isExecutable(join(bin, 'initdb')) && isExecutable(join(bin, 'postgres'))) return bin;
  }
  const initdb = onPath('initdb');
  return initdb && onPath('postgres') ? dirname(initdb) : undefined;
}

/**
 * What the tests need from the system, one entry per Debian package. `find()` returns where it is
 * (a path), or undefined. The test helpers that use each (test/support/) look in the same places.
 */
export const REQUIREMENTS = [
  {
    name: 'chromium',
    debian: 'chromium',
    why: 'browser end-to-end tests (playwright-core drives the system Chromium; it downloads no browser)',
    find: () => firstExecutable([process.env.ARCLIGHT_CHROMIUM, '/usr/lib/chromium/chromium', '/usr/bin/chromium']),
  },
  {
    name: 'ip',
    debian: 'iproute2',
    why: 'network namespaces for the browser, TURN and ICE tests',
    find: () => onPath('ip'),
  },
  {
    name: 'postgresql',
    debian: 'postgresql',
    why: "the coordinator's tests on a real PostgreSQL server (each test runs its own throwaway cluster)",
    find: postgresServer,
  },
  {
    name: 'coturn',
    debian: 'coturn',
    why: 'TURN relay tests (each runs its own throwaway turnserver)',
    find: () => firstExecutable(['/usr/bin/turnserver', '/usr/sbin/turnserver']),
  },
  {
    name: 'cmake',
    debian: 'cmake',
    why: 'builds the native addon (colour conversion, NVENC), which its tests load',
    find: () => onPath('cmake'),
    native: true,
  },
  {
    name: 'g++',
    debian: 'g++',
    why: 'compiles the native addon',
    find: () => onPath('g++') ?? onPath('c++'),
    native: true,
  },
  {
    name: 'make',
    debian: 'make',
    why: "the native addon's build tool (or ninja)",
    find: () => onPath('make') ?? onPath('ninja'),
    native: true,
  },
  {
    name: 'nvenc-headers',
    debian: 'libffmpeg-nvenc-dev',
    why: "compiles the addon's NVENC encoder, whose tests run against a fake driver (no GPU needed)",
    find: () => (existsSync('/usr/include/ffnvcodec/nvEncodeAPI.h') ? '/usr/include/ffnvcodec' : undefined),
    native: true,
  },
  {
    name: 'python3-numpy',
    debian: 'python3-numpy',
    why: "the Python worker bridge's tests spawn real Python workers (runtime/python/, python/arclight_worker), which need numpy",
    find: pythonWithNumpy,
  },
  {
    name: 'python3-aiortc',
    debian: 'python3-aiortc',
    why: "the network lab's aiortc reference sender (test/e2e/network-lab.test.ts, bench/network-lab.ts), run with Debian's /usr/bin/python3",
    // Where test/support/network-lab/aiortc-reference.ts looks.
    find: () => (existsSync('/usr/lib/python3/dist-packages/aiortc/__init__.py') ? '/usr/lib/python3/dist-packages/aiortc' : undefined),
  },
];

/**
 * The Python the workers run, when it imports numpy: $ARCLIGHT_PYTHON, else the first of python3 on
 * PATH and /usr/bin/python3 that does (runtime/python/python-environment.ts looks in the same order,
 * so installing python3-numpy for Debian's python serves a machine whose PATH python lacks it).
 */
function pythonWithNumpy() {
  const candidates = process.env.ARCLIGHT_PYTHON ? [process.env.ARCLIGHT_PYTHON] : [onPath('python3'), '/usr/bin/python3'];
  for (const python of candidates) {
    if (!python) continue;
    const check = spawnSync(python, ['-c', 'import numpy'], { stdio: 'ignore', timeout: 30_000 });
    if (check.status === 0) return python;
  }
  return undefined;
}

/** The requirements not found, `hidden` (names) counting as not found. */
export function findMissing(requirements = REQUIREMENTS, hidden = new Set()) {
  return requirements.filter((requirement) => hidden.has(requirement.name) || requirement.find() === undefined);
}

/**
 * What to do about `missing` on this machine. Pure, so the choice is tested without installing:
 * - nothing missing → { action: 'none' }
 * - root, Debian-like, apt-get present, installing allowed → { action: 'install', commands }
 * - otherwise → { action: 'instruct', command (null when no apt), message }
 */
export function planProvision({ missing, mode, isRoot, hasAptGet, hasSudo }) {
  if (missing.length === 0) return { action: 'none' };
  const packages = missing.map((requirement) => requirement.debian);
  const install = ['apt-get', 'install', '-y', '--no-install-recommends', ...packages];
  const lines = missing.map((requirement) => `  - ${requirement.debian}: ${requirement.why}`);
  if (mode !== 'check' && isRoot && hasAptGet) {
    return { action: 'install', packages, commands: [['apt-get', 'update'], install] };
  }
  if (!hasAptGet) {
    return {
      action: 'instruct',
      packages,
      command: null,
      message: [
        'npm test needs system packages that are missing here, and this machine has no apt-get to install them:',
        ...lines,
        "Install your system's equivalents of these Debian packages, then run npm test again.",
      ].join('\n'),
    };
  }
  const prefix = isRoot ? [] : hasSudo ? ['sudo'] : [];
  const command = [`${[...prefix, 'apt-get', 'update'].join(' ')} && ${[...prefix, ...install].join(' ')}`];
  const who = isRoot ? '' : hasSudo ? '' : ' as root';
  const reason = mode === 'check' ? 'ARCLIGHT_PROVISION=check: not installing' : isRoot ? 'not installing' : 'not root, so not installing';
  return {
    action: 'instruct',
    packages,
    command: command[0],
    message: [
      `npm test needs system packages that are missing here (${reason}):`,
      ...lines,
      `Run${who}:`,
      `  ${command[0]}`,
      'then run npm test again.',
    ].join('\n'),
  };
}

function run(argv, options = {}) {
  const result = spawnSync(argv[0], argv.slice(1), { stdio: 'inherit', ...options });
  if (result.error) throw new Error(`${argv.join(' ')} did not run: ${result.error.message}`);
  if (result.status !== 0) throw new Error(`${argv.join(' ')} exited with ${result.status ?? result.signal}`);
}

/** Rebuilds the native addon after its build tools or headers arrived, when npm install ran already. */
function rebuildNativeAddon(log) {
  if (!existsSync(join(root, 'node_modules', 'cmake-js'))) {
    log('arclight: node_modules has no cmake-js yet; npm install will build the native addon');
    return;
  }
  log('arclight: rebuilding the native addon with the new build tools/headers');
  // --clean: a configure that once found no NVENC headers caches that; start afresh.
  run([process.execPath, join(root, 'scripts', 'build-native.mjs'), '--strict', '--clean'], { cwd: root });
}

export function main(argv = process.argv.slice(2), env = process.env) {
  const dryRun = argv.includes('--dry-run');
  const json = argv.includes('--json');
  const mode = env.ARCLIGHT_PROVISION ?? 'auto';
  // Progress goes to stderr with --json, so stdout stays one JSON object.
  const log = json ? (line) => process.stderr.write(`${line}\n`) : (line) => console.log(line);
  if (!['auto', 'check', 'skip'].includes(mode)) {
    console.error(`arclight: ARCLIGHT_PROVISION must be auto, check or skip, not ${JSON.stringify(mode)}`);
    return 2;
  }
  if (mode === 'skip') {
    log('arclight: provisioning skipped (ARCLIGHT_PROVISION=skip)');
    if (json) console.log(JSON.stringify({ action: 'skip' }));
    return 0;
  }
  const hidden = new Set(
    (env.ARCLIGHT_PROVISION_HIDE ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  );
  const unknown = [...hidden].filter((name) => !REQUIREMENTS.some((requirement) => requirement.name === name));
  if (unknown.length) {
    console.error(
      `arclight: ARCLIGHT_PROVISION_HIDE names no requirement: ${unknown.join(', ')} (known: ${REQUIREMENTS.map((r) => r.name).join(', ')})`,
    );
    return 2;
  }
  const missing = findMissing(REQUIREMENTS, hidden);
  const plan = planProvision({
    missing,
    mode,
    isRoot: process.getuid?.() === 0,
    hasAptGet: existsSync('/etc/debian_version') && onPath('apt-get') !== undefined,
    hasSudo: onPath('sudo') !== undefined,
  });
  const report = { action: plan.action, dryRun, missing: missing.map((r) => r.name), packages: plan.packages ?? [] };
  if (plan.action === 'none') {
    log(`arclight: test prerequisites present (${REQUIREMENTS.map((r) => r.name).join(', ')})`);
    if (json) console.log(JSON.stringify(report));
    return 0;
  }
  if (plan.action === 'instruct') {
    console.error(plan.message);
    if (json) console.log(JSON.stringify({ ...report, command: plan.command }));
    return 1;
  }
  const commands = plan.commands.map((command) => command.join(' '));
  if (dryRun) {
    log(`arclight: would install ${plan.packages.join(' ')}:\n${commands.map((c) => `  ${c}`).join('\n')}`);
    if (json) console.log(JSON.stringify({ ...report, commands }));
    return 0;
  }
  log(`arclight: installing what npm test needs: ${plan.packages.join(' ')}`);
  for (const requirement of missing) log(`  - ${requirement.debian}: ${requirement.why}`);
  try {
    const aptEnv = { ...env, DEBIAN_FRONTEND: 'noninteractive' };
    // apt's output goes to stderr with --json, so stdout stays one JSON object.
    for (const command of plan.commands) run(command, { env: aptEnv, stdio: ['ignore', json ? 2 : 'inherit', 'inherit'] });
    const still = findMissing(REQUIREMENTS);
    if (still.length) throw new Error(`still missing after the install: ${still.map((r) => r.name).join(', ')}`);
    if (missing.some((requirement) => requirement.native)) rebuildNativeAddon(log);
  } catch (error) {
    console.error(`arclight: provisioning failed: ${error.message}`);
    console.error(`Install by hand: ${commands.join(' && ')}`);
    if (json) console.log(JSON.stringify({ ...report, commands, error: error.message }));
    return 1;
  }
  log('arclight: test prerequisites installed');
  if (json) console.log(JSON.stringify({ ...report, commands }));
  return 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = main();
}
