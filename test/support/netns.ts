/**
 * Throwaway network namespaces for browser end-to-end tests.
 *
 * Why: headless Chromium gathers no 127.0.0.1 ICE candidate, so a WebRTC
 * test cannot run browser and server over loopback. Instead each test gets a
 * private namespace joined to the host by a veth pair:
 *
 *     host (hostAddress, e.g. 10.231.7.1/30)  <== veth ==>  namespace (peerAddress, 10.231.7.2/30)
 *
 * The server under test binds to `hostAddress`; Chromium runs inside the
 * namespace (see ./chromium.ts). The namespace deliberately has NO default
 * route: the only thing reachable from inside is the host end of the veth,
 * which keeps test traffic on addresses this test itself created.
 *
 * Every run picks unique names (pid + counter) and a unique /30 inside
 * 10.231.0.0/16 (reserved with a lock file and checked against `ip -o addr`)
 * so that parallel test files cannot collide. Needs root and iproute2.
 *
 * createTestLan() builds several namespaces ("hosts") on one bridge, for tests
 * of more than one machine (test/e2e/multi-host.browser.test.ts).
 */
import { execFile, execFileSync } from 'node:child_process';
import {
  accessSync,
  closeSync,
  constants as fsConstants,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';

export interface RunResult {
  stdout: string;
  stderr: string;
}

export interface TestNetwork {
  /** Address of the host end of the veth; bind servers under test here. */
  readonly hostAddress: string;
  /** Address of the namespace end of the veth (what the browser's traffic comes from). */
  readonly peerAddress: string;
  /** Prefix length of the point-to-point subnet (always 30). */
  readonly prefixLength: number;
  /** Name of the network namespace (for `ip netns exec`). */
  readonly namespace: string;
  /** Name of the veth end on the host. */
  readonly hostInterface: string;
  /** Name of the veth end inside the namespace. */
  readonly peerInterface: string;
  /** argv that runs `argv` inside the namespace (for spawning long-lived processes yourself). */
  wrap(argv: string[]): string[];
  /** Runs a command inside the namespace; rejects with stdout/stderr in the message on non-zero exit. */
  run(argv: string[], options?: { timeoutMs?: number }): Promise<RunResult>;
  /** Kills anything still running in the namespace, deletes the veth and the namespace. Idempotent. */
  close(): Promise<void>;
}

const NS_PREFIX = 'arclight-';
const HOST_IF_PREFIX = 'arh';
const PEER_IF = 'arc0';
const BLOCKS = 1 << 14; // /30 blocks in 10.231.0.0/16
const LOCK_DIR = join(tmpdir(), 'arclight-testnet-locks');

let counter = 0;

// ---------------------------------------------------------------------------
// Capability checks
// ---------------------------------------------------------------------------

let ipPathCache: string | null | undefined;

/** Absolute path of the iproute2 `ip` binary, or null. Looks in sbin too (not always on PATH). */
export function findIpBinary(): string | null {
  if (ipPathCache !== undefined) return ipPathCache;
  const dirs = [...(process.env.PATH ?? '').split(delimiter), '/usr/sbin', '/sbin', '/usr/bin', '/bin'];
  ipPathCache = null;
  for (const dir of dirs) {
    if (!dir) continue;
    const candidate = join(dir, 'ip');
    try {
      accessSync(candidate, fsConstants.X_OK);
      ipPathCache = candidate;
      break;
    } catch {
      // keep looking
    }
  }
  return ipPathCache;
}

/** Why network namespaces cannot be created here, or null if they (probably) can. */
export function networkNamespaceUnavailableReason(): string | null {
  if (process.platform !== 'linux') return `network namespaces need Linux (platform is ${process.platform})`;
  const uid = process.getuid?.();
  if (uid !== 0) return `network namespaces need root (uid is ${uid ?? 'unknown'}); run the tests as root, as .ci/run does`;
  if (!findIpBinary())
    return 'the `ip` command (Debian package iproute2) is not installed; `npm test` installs it (scripts/provision.mjs) when run as root on Debian';
  return null;
}

/** True when running as root on Linux with iproute2 available. */
export function canCreateNetworkNamespaces(): boolean {
  return networkNamespaceUnavailableReason() === null;
}

/**
 * Throws a descriptive error when namespaces cannot be created. Browser tests
 * call this instead of skipping: in CI a missing prerequisite must fail loudly.
 */
export function assertCanCreateNetworkNamespaces(): void {
  const reason = networkNamespaceUnavailableReason();
  if (reason) {
    throw new Error(`Browser end-to-end tests cannot run: ${reason}. These tests are required, not optional.`);
  }
}

// ---------------------------------------------------------------------------
// Command helpers
// ---------------------------------------------------------------------------

function ip(): string {
  const path = findIpBinary();
  if (!path) throw new Error(networkNamespaceUnavailableReason() ?? 'ip not found');
  return path;
}

class CommandError extends Error {
  constructor(
    readonly argv: string[],
    readonly code: number | string | null,
    readonly stdout: string,
    readonly stderr: string,
  ) {
    super(
      `command failed (exit ${code}): ${argv.join(' ')}` +
        (stderr.trim() ? `\n  stderr: ${stderr.trim()}` : '') +
        (stdout.trim() ? `\n  stdout: ${stdout.trim()}` : ''),
    );
  }
}

function exec(argv: string[], timeoutMs = 15_000): Promise<RunResult> {
  const [file, ...args] = argv;
  if (!file) return Promise.reject(new Error('empty argv'));
  return new Promise((resolve, reject) => {
    execFile(file, args, { timeout: timeoutMs, encoding: 'utf8', maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      if (err) {
        const e = err as NodeJS.ErrnoException & { code?: number | string; killed?: boolean };
        const code = e.killed ? `killed after ${timeoutMs} ms` : (e.code ?? null);
        reject(new CommandError(argv, code, String(stdout ?? ''), String(stderr ?? '') || e.message));
      } else {
        resolve({ stdout, stderr });
      }
    });
  });
}

function execSync(argv: string[]): string {
  const [file, ...args] = argv;
  if (!file) throw new Error('empty argv');
  try {
    return execFileSync(file, args, { encoding: 'utf8', timeout: 10_000, stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (err) {
    const e = err as { status?: number | null; stdout?: string; stderr?: string; message: string };
    throw new CommandError(argv, e.status ?? null, String(e.stdout ?? ''), String(e.stderr ?? e.message));
  }
}

const NOT_FOUND = /Cannot find device|No such file or directory|does not exist|Invalid netns name|Cannot open network namespace/i;

function isNotFound(err: unknown): boolean {
  return err instanceof CommandError && NOT_FOUND.test(err.stderr);
}

function hintFor(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  if (/Operation not permitted|Permission denied/i.test(text)) {
    return '\n  hint: creating namespaces/veth needs CAP_SYS_ADMIN and CAP_NET_ADMIN (a privileged container or a real root shell).';
  }
  if (/Unknown device type|Not supported|veth/i.test(text)) {
    return '\n  hint: the kernel may lack veth support (CONFIG_VETH).';
  }
  return '';
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

// ---------------------------------------------------------------------------
// Subnet reservation (lock file per /30, stale locks of dead pids reclaimed)
// ---------------------------------------------------------------------------

function blockAddresses(index: number): { host: string; peer: string; octets: [number, number] } {
  const base = index * 4; // offset of the /30 inside 10.231.0.0/16
  const third = base >> 8;
  const fourth = base & 0xff;
  return { host: `10.231.${third}.${fourth + 1}`, peer: `10.231.${third}.${fourth + 2}`, octets: [third, fourth] };
}

function subnetInUse(index: number): boolean {
  const { octets } = blockAddresses(index);
  let text = '';
  try {
    text = execSync([ip(), '-o', '-4', 'addr']) + execSync([ip(), '-4', 'route']);
  } catch {
    return false; // the lock file is still protecting us
  }
  for (const m of text.matchAll(/\b10\.231\.(\d+)\.(\d+)/g)) {
    const third = Number(m[1]);
    const fourth = Number(m[2]);
    if (third === octets[0] && (fourth & ~3) === octets[1]) return true;
  }
  return false;
}

function tryLock(index: number): boolean {
  mkdirSync(LOCK_DIR, { recursive: true });
  const path = join(LOCK_DIR, String(index));
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(path, 'wx');
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      let owner = NaN;
      try {
        owner = Number(readFileSync(path, 'utf8').trim());
      } catch {
        // vanished between open and read; retry
      }
      if (Number.isInteger(owner) && owner > 0 && pidAlive(owner)) return false;
      try {
        unlinkSync(path); // stale: its owner is gone
      } catch {
        // someone else reclaimed it first
      }
    }
  }
  return false;
}

function unlock(index: number): void {
  try {
    unlinkSync(join(LOCK_DIR, String(index)));
  } catch {
    // already gone
  }
}

function reserveSubnet(seq: number): number {
  return reserveBlocks(seq, 1)[0]!;
}

/**
 * Reserves `count` (a power of two) consecutive /30 blocks aligned to `count`, i.e. one subnet of
 * `4 * count` addresses; returns their indices. Never the group holding block 0.
 */
function reserveBlocks(seq: number, count: number): number[] {
  const groups = BLOCKS / count;
  // Start from a pid-derived slot so parallel processes spread out.
  const start = ((process.pid * 131 + seq * 7919) % (groups - 1)) + 1;
  for (let i = 0; i < groups - 1; i++) {
    const first = (((start - 1 + i) % (groups - 1)) + 1) * count;
    const held: number[] = [];
    let free = true;
    for (let index = first; free && index < first + count; index++) {
      free = tryLock(index);
      if (free) held.push(index);
      free &&= !subnetInUse(index);
    }
    if (free) return held;
    for (const index of held) unlock(index);
  }
  throw new Error(`no free block of ${4 * count} addresses left in 10.231.0.0/16 for a test network`);
}

// ---------------------------------------------------------------------------
// Cleanup (async for close(), sync for the process-exit safety net)
// ---------------------------------------------------------------------------

interface Resources {
  namespace: string;
  /** The veth end in the root namespace ('' when there is none to delete). */
  hostInterface: string;
  /** The /30 blocks reserved for it (lock files released on teardown). */
  subnets: readonly number[];
}

const live = new Map<string, Resources>();
let handlersInstalled = false;

function killNamespacePids(pidsOutput: string): void {
  for (const line of pidsOutput.split('\n')) {
    const pid = Number(line.trim());
    if (Number.isInteger(pid) && pid > 0 && pid !== process.pid) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already exited
      }
    }
  }
}

/** Sync teardown used from 'exit'/signal handlers and for stale resources. Never throws. */
function destroySync(r: Resources): void {
  try {
    killNamespacePids(execSync([ip(), 'netns', 'pids', r.namespace]));
  } catch {
    // namespace may not exist
  }
  for (const argv of [...(r.hostInterface ? [[ip(), 'link', 'del', r.hostInterface]] : []), [ip(), 'netns', 'del', r.namespace]]) {
    try {
      execSync(argv);
    } catch {
      // best effort
    }
  }
  for (const subnet of r.subnets) unlock(subnet);
  live.delete(r.namespace);
}

async function destroy(r: Resources): Promise<void> {
  const errors: string[] = [];
  try {
    killNamespacePids((await exec([ip(), 'netns', 'pids', r.namespace])).stdout);
  } catch (err) {
    if (!isNotFound(err)) errors.push(String((err as Error).message));
  }
  // Delete the veth explicitly: `ip netns del` only drops the name, and the
  // namespace (with its veth) lingers while any process still holds it.
  for (const argv of [...(r.hostInterface ? [[ip(), 'link', 'del', r.hostInterface]] : []), [ip(), 'netns', 'del', r.namespace]]) {
    try {
      await exec(argv);
    } catch (err) {
      if (!isNotFound(err)) errors.push(String((err as Error).message));
    }
  }
  // Verify rather than trust exit codes.
  const { stdout: nsList } = await exec([ip(), 'netns', 'list']).catch(() => ({ stdout: '' }));
  if (nsList.split('\n').some((line) => line.split(/\s+/)[0] === r.namespace)) {
    errors.push(`namespace ${r.namespace} still listed by 'ip netns list'`);
  }
  const linkGone =
    !r.hostInterface ||
    (await exec([ip(), 'link', 'show', r.hostInterface]).then(
      () => false,
      () => true,
    ));
  if (!linkGone) errors.push(`interface ${r.hostInterface} still exists`);
  for (const subnet of r.subnets) unlock(subnet);
  live.delete(r.namespace);
  if (errors.length) throw new Error(`test network cleanup incomplete:\n  ${errors.join('\n  ')}`);
}

function installSafetyNet(): void {
  if (handlersInstalled) return;
  handlersInstalled = true;
  process.on('exit', () => {
    for (const r of [...live.values()]) destroySync(r);
  });
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    const handler = (): void => {
      for (const r of [...live.values()]) destroySync(r);
      process.removeListener(signal, handler);
      // If nobody else handles the signal, restore the default behaviour (terminate).
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
    };
    process.on(signal, handler);
  }
}

/**
 * Removes namespaces and host veths left behind by test processes that died
 * without cleaning up (e.g. SIGKILLed workers). Names embed the owner pid.
 */
function sweepStale(): void {
  try {
    for (const line of execSync([ip(), 'netns', 'list']).split('\n')) {
      const name = line.split(/\s+/)[0] ?? '';
      const m = /^arclight-(\d+)-[0-9a-z]+$/.exec(name);
      if (m && !pidAlive(Number(m[1]))) destroySync({ namespace: name, hostInterface: '', subnets: [] });
    }
    for (const m of execSync([ip(), '-o', 'link']).matchAll(/^\d+:\s+(arh(\d+)-[0-9a-z]+)[@:]/gm)) {
      if (!pidAlive(Number(m[2]))) {
        try {
          execSync([ip(), 'link', 'del', m[1] as string]);
        } catch {
          // best effort
        }
      }
    }
  } catch {
    // sweeping is an optimisation; never fail creation because of it
  }
  let locks: string[] = [];
  try {
    locks = readdirSync(LOCK_DIR);
  } catch {
    return; // no lock dir yet
  }
  for (const name of locks) {
    try {
      const owner = Number(readFileSync(join(LOCK_DIR, name), 'utf8').trim());
      if (Number.isInteger(owner) && owner > 0 && !pidAlive(owner)) unlinkSync(join(LOCK_DIR, name));
    } catch {
      // raced with its owner or another sweeper
    }
  }
}

// ---------------------------------------------------------------------------
// Public entry point
// ---------------------------------------------------------------------------

/** Creates a namespace + veth pair with a fresh /30. Always `close()` it (afterAll/finally). */
export async function createTestNetwork(): Promise<TestNetwork> {
  assertCanCreateNetworkNamespaces();
  installSafetyNet();
  sweepStale();

  const seq = counter++;
  const suffix = `${process.pid}-${seq.toString(36)}`;
  const namespace = `${NS_PREFIX}${suffix}`;
  const hostInterface = `${HOST_IF_PREFIX}${suffix}`; // 'arh' + ≤7-digit pid + '-' + counter: ≤ 15 chars
  if (hostInterface.length > 15) throw new Error(`interface name too long: ${hostInterface}`);

  const subnet = reserveSubnet(seq);
  const { host: hostAddress, peer: peerAddress } = blockAddresses(subnet);
  const resources: Resources = { namespace, hostInterface, subnets: [subnet] };
  live.set(namespace, resources);

  const steps: string[][] = [
    [ip(), 'netns', 'add', namespace],
    [ip(), 'link', 'add', hostInterface, 'type', 'veth', 'peer', 'name', PEER_IF, 'netns', namespace],
    [ip(), 'addr', 'add', `${hostAddress}/30`, 'dev', hostInterface],
    [ip(), 'link', 'set', hostInterface, 'up'],
    [ip(), 'netns', 'exec', namespace, ip(), 'addr', 'add', `${peerAddress}/30`, 'dev', PEER_IF],
    [ip(), 'netns', 'exec', namespace, ip(), 'link', 'set', PEER_IF, 'up'],
    [ip(), 'netns', 'exec', namespace, ip(), 'link', 'set', 'lo', 'up'],
  ];
  try {
    for (const argv of steps) await exec(argv);
    await waitForAddress(hostInterface, hostAddress);
  } catch (err) {
    const cleanup = await destroy(resources).then(
      () => '',
      (e: unknown) => `\n  (cleanup after failure also failed: ${(e as Error).message})`,
    );
    throw new Error(
      `createTestNetwork failed while setting up ${namespace} (${hostAddress} <-> ${peerAddress}):\n  ${(err as Error).message}${hintFor(err)}${cleanup}`,
    );
  }

  let closing: Promise<void> | undefined;
  return {
    hostAddress,
    peerAddress,
    prefixLength: 30,
    namespace,
    hostInterface,
    peerInterface: PEER_IF,
    wrap: (argv) => [ip(), 'netns', 'exec', namespace, ...argv],
    run: (argv, options) => exec([ip(), 'netns', 'exec', namespace, ...argv], options?.timeoutMs ?? 30_000),
    close: () => (closing ??= destroy(resources)),
  };
}

/** IPv4 addresses on a freshly-up veth can be "tentative" for a moment; wait until usable. */
async function waitForAddress(dev: string, address: string): Promise<void> {
  const deadline = Date.now() + 5_000;
  for (;;) {
    const { stdout } = await exec([ip(), '-o', '-4', 'addr', 'show', 'dev', dev]);
    if (stdout.includes(`inet ${address}/`) && !stdout.includes('tentative')) return;
    if (Date.now() > deadline) throw new Error(`address ${address} never became ready on ${dev}: ${stdout.trim()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

// ---------------------------------------------------------------------------
// A LAN of namespaces ("hosts" on one switch)
// ---------------------------------------------------------------------------

/** One namespace on a test LAN: a "host" with one address. */
export interface LanHost {
  /** The name it was asked for (e.g. `coordinator`). */
  readonly name: string;
  /** Name of its network namespace (for `ip netns exec`). */
  readonly namespace: string;
  /** Its address on the LAN (the only one it has besides loopback). */
  readonly address: string;
  /** argv that runs `argv` inside the namespace (`ip netns exec` execs it: the pid is the command's). */
  wrap(argv: string[]): string[];
  /** Runs a command inside the namespace; rejects with stdout/stderr in the message on non-zero exit. */
  run(argv: string[], options?: { timeoutMs?: number }): Promise<RunResult>;
}

export interface TestLan<Name extends string> {
  readonly hosts: { readonly [N in Name]: LanHost };
  /** This (the test's) process's own address on the LAN: it reaches every host directly. */
  readonly hostAddress: string;
  /** Prefix length of the LAN's subnet. */
  readonly prefixLength: number;
  /** Kills everything running in its namespaces, deletes them, the switch and the veths. Idempotent. */
  close(): Promise<void>;
}

const LAN_HOST_NAME = /^[a-z][a-z0-9]{0,11}$/;
const SWITCH_SUFFIX = 'sw';

/**
 * Several namespaces ("hosts") on one Ethernet segment, for tests of more than one machine:
 *
 *     test process (hostAddress) ──veth──┐
 *     host "a" (10.231.x.y+2)    ──veth──┤  bridge br0, alone in its own "switch" namespace
 *     host "b" (10.231.x.y+3)    ──veth──┘
 *
 * One subnet (the smallest aligned block of 10.231.0.0/16 with room for every host, the test
 * process, and the network and broadcast addresses; reserved like createTestNetwork's /30s), so
 * every host reaches every other and the test process reaches them all. No namespace has a default
 * route: nothing on the LAN can send to any address outside it.
 *
 * The bridge lives in a namespace of its own rather than in the root one: there, a host with
 * br_netfilter loaded (Docker's) would pass bridged frames through the root namespace's iptables
 * FORWARD chain, whose policy may be DROP; the switch namespace has no rules. Namespaces are named
 * `arclight-<pid>-<seq><name>` (swept like createTestNetwork's when their owner dies).
 */
export async function createTestLan<const Name extends string>(names: readonly Name[]): Promise<TestLan<Name>> {
  assertCanCreateNetworkNamespaces();
  if (names.length === 0) throw new Error('createTestLan needs at least one host');
  for (const name of names) {
    if (!LAN_HOST_NAME.test(name) || name === SWITCH_SUFFIX)
      throw new Error(`bad LAN host name "${name}": 1–12 lowercase letters and digits, not "${SWITCH_SUFFIX}"`);
  }
  if (new Set(names).size !== names.length) throw new Error('LAN host names must be distinct');
  installSafetyNet();
  sweepStale();

  const seq = counter++;
  const prefix = `${NS_PREFIX}${process.pid}-${seq.toString(36)}`;
  const switchNamespace = `${prefix}${SWITCH_SUFFIX}`;
  const hostInterface = `${HOST_IF_PREFIX}${process.pid}-${seq.toString(36)}`;
  if (hostInterface.length > 15) throw new Error(`interface name too long: ${hostInterface}`);
  // Addresses: network, the test process, the hosts, broadcast.
  let size = 4;
  while (size < names.length + 3) size *= 2;
  const blocks = reserveBlocks(seq, size / 4);
  const base = blockAddresses(blocks[0]!).octets;
  const addressAt = (offset: number) => `10.231.${base[0]}.${base[1] + offset}`;
  const prefixLength = 32 - Math.log2(size);
  const hostAddress = addressAt(1);

  // Torn down in this order: the hosts (their processes first), then the switch, whose deletion
  // takes the bridge and every port with it; the switch's resources hold the veth and the blocks.
  const hostResources: Resources[] = names.map((name) => ({ namespace: `${prefix}${name}`, hostInterface: '', subnets: [] }));
  const switchResources: Resources = { namespace: switchNamespace, hostInterface, subnets: blocks };
  for (const r of [...hostResources, switchResources]) live.set(r.namespace, r);
  const teardown = async (): Promise<void> => {
    const results = await Promise.allSettled(hostResources.map(destroy));
    const errors = results.flatMap((r) => (r.status === 'rejected' ? [String((r.reason as Error).message)] : []));
    await destroy(switchResources).catch((e: unknown) => errors.push((e as Error).message));
    if (errors.length) throw new Error(errors.join('\n'));
  };

  const inSwitch = (...argv: string[]) => [ip(), '-n', switchNamespace, ...argv];
  const steps: string[][] = [
    [ip(), 'netns', 'add', switchNamespace],
    inSwitch('link', 'add', 'br0', 'type', 'bridge'),
    inSwitch('link', 'set', 'br0', 'up'),
    // The test process's port.
    [ip(), 'link', 'add', hostInterface, 'type', 'veth', 'peer', 'name', 'up0', 'netns', switchNamespace],
    inSwitch('link', 'set', 'up0', 'master', 'br0'),
    inSwitch('link', 'set', 'up0', 'up'),
    [ip(), 'addr', 'add', `${hostAddress}/${prefixLength}`, 'dev', hostInterface],
    [ip(), 'link', 'set', hostInterface, 'up'],
  ];
  names.forEach((_, i) => {
    const namespace = hostResources[i]!.namespace;
    const inHost = (...argv: string[]) => [ip(), '-n', namespace, ...argv];
    steps.push(
      [ip(), 'netns', 'add', namespace],
      inSwitch('link', 'add', `p${i}`, 'type', 'veth', 'peer', 'name', 'lan0', 'netns', namespace),
      inSwitch('link', 'set', `p${i}`, 'master', 'br0'),
      inSwitch('link', 'set', `p${i}`, 'up'),
      inHost('addr', 'add', `${addressAt(i + 2)}/${prefixLength}`, 'dev', 'lan0'),
      inHost('link', 'set', 'lan0', 'up'),
      inHost('link', 'set', 'lo', 'up'),
    );
  });
  try {
    for (const argv of steps) await exec(argv);
    await waitForAddress(hostInterface, hostAddress);
  } catch (err) {
    const cleanup = await teardown().then(
      () => '',
      (e: unknown) => `\n  (cleanup after failure also failed: ${(e as Error).message})`,
    );
    throw new Error(
      `createTestLan failed while setting up ${prefix}* (${addressAt(0)}/${prefixLength}):\n  ${(err as Error).message}${hintFor(err)}${cleanup}`,
    );
  }

  const hosts = Object.fromEntries(
    names.map((name, i) => {
      const namespace = hostResources[i]!.namespace;
      const host: LanHost = {
        name,
        namespace,
        address: addressAt(i + 2),
        wrap: (argv) => [ip(), 'netns', 'exec', namespace, ...argv],
        run: (argv, options) => exec([ip(), 'netns', 'exec', namespace, ...argv], options?.timeoutMs ?? 30_000),
      };
      return [name, host];
    }),
  ) as { [N in Name]: LanHost };
  let closing: Promise<void> | undefined;
  return { hosts, hostAddress, prefixLength, close: () => (closing ??= teardown()) };
}
