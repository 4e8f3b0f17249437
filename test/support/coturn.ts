/**
 * A throwaway coturn (Debian package `coturn`, `turnserver`) for TURN tests.
 *
 * Each server is private to one test:
 *   - a fresh temp directory holds its config, pid file and user database, removed at stop;
 *   - it listens (UDP only, no TLS/DTLS/TCP, no CLI) and relays on ONE address — 127.0.0.1 or
 *     the host end of a test network namespace (./netns.ts) — on a port picked here;
 *   - it relays only to the peers the test names: every other IPv4 address is denied
 *     (`denied-peer-ip=0.0.0.0-255.255.255.255` + `allowed-peer-ip`, the allow list winning),
 *     so a relay can never send test traffic anywhere else — and coturn's own defaults refuse
 *     loopback peers, so a test on 127.0.0.1 must list 127.0.0.1 (it sets
 *     `allow-loopback-peers` then);
 *   - authentication is the TURN REST-API shared secret (`use-auth-secret`,
 *     `static-auth-secret`): the runtime's `ice.turn` issues credentials with the same secret.
 *
 * coturn runs as our child under `setpriv --pdeathsig KILL`, so it dies with the test process
 * however that ends; `stop()` ends it (SIGTERM, then SIGKILL) and removes its directory.
 * Needs `turnserver` (scripts/provision.mjs, which `npm test` runs first, installs `coturn`); when it is missing this throws: TURN tests are
 * required, not optional.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { createSocket } from 'node:dgram';
import { accessSync, constants as fsConstants, rmSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { isIPv4 } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface CoturnOptions {
  /** The one address coturn listens and relays on: 127.0.0.1 or a test network's host address. */
  readonly address: string;
  /** Peers the relay may send to (the runtime's ICE addresses); everything else is denied. */
  readonly allowedPeers: readonly string[];
  /** Relay ports, inclusive. Default a block of 64 derived from the pid inside 50000–59999. */
  readonly relayPorts?: readonly [number, number];
}

export interface CoturnServer {
  readonly address: string;
  readonly port: number;
  /** The shared secret (coturn static-auth-secret); give it to the runtime's `ice.turn`. */
  readonly secret: string;
  readonly realm: string;
  /** `turn:<address>:<port>?transport=udp` */
  readonly url: string;
  readonly relayPorts: readonly [number, number];
  /** coturn's log so far (verbose: allocations, permissions, usernames). */
  log(): string;
  stop(): Promise<void>;
}

const TURNSERVER_CANDIDATES = ['/usr/bin/turnserver', '/usr/sbin/turnserver'];
const REALM = 'arclight.test';
const START_TIMEOUT_MS = 15_000;
const LOG_TAIL_CHARS = 64 * 1024;

/** Path of `turnserver`, or a descriptive error. */
export function findTurnserver(): string {
  for (const candidate of TURNSERVER_CANDIDATES) {
    try {
      accessSync(candidate, fsConstants.X_OK);
      return candidate;
    } catch {
      // next
    }
  }
  throw new Error(
    `turnserver not found (looked at ${TURNSERVER_CANDIDATES.join(', ')}). Install the Debian package \`coturn\` (\`npm test\` does, through scripts/provision.mjs, when run as root on Debian).`,
  );
}

function hasSetpriv(): boolean {
  try {
    accessSync('/usr/bin/setpriv', fsConstants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** A UDP port that was free on `address` a moment ago. */
function freeUdpPort(address: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = createSocket('udp4');
    socket.once('error', reject);
    socket.bind(0, address, () => {
      const { port } = socket.address();
      socket.close(() => resolve(port));
    });
  });
}

/** One STUN Binding request to `address:port`; resolves true when a Binding success response comes back. */
function stunBinding(address: string, port: number, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createSocket('udp4');
    const transaction = randomBytes(12);
    const request = Buffer.alloc(20);
    request.writeUInt16BE(0x0001, 0); // Binding request
    request.writeUInt16BE(0, 2); // no attributes
    request.writeUInt32BE(0x2112a442, 4); // magic cookie
    transaction.copy(request, 8);
    const done = (ok: boolean): void => {
      clearTimeout(timer);
      socket.close();
      resolve(ok);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    socket.on('error', () => done(false));
    socket.on('message', (message) => {
      if (message.length >= 20 && message.readUInt16BE(0) === 0x0101 && message.subarray(8, 20).equals(transaction)) done(true);
    });
    socket.bind(0, address, () => socket.send(request, port, address));
  });
}

// ---------------------------------------------------------------------------
// A minimal TURN client (RFC 8656 Allocate with the long-term credential mechanism), written
// from the RFC rather than taken from werift, to check credentials against coturn independently.
// ---------------------------------------------------------------------------

const MAGIC_COOKIE = 0x2112a442;
const ATTR = {
  USERNAME: 0x0006,
  MESSAGE_INTEGRITY: 0x0008,
  ERROR_CODE: 0x0009,
  REALM: 0x0014,
  NONCE: 0x0015,
  XOR_RELAYED_ADDRESS: 0x0016,
  REQUESTED_TRANSPORT: 0x0019,
  LIFETIME: 0x000d,
} as const;
const ALLOCATE_REQUEST = 0x0003;
const ALLOCATE_SUCCESS = 0x0103;
const ALLOCATE_ERROR = 0x0113;
const REFRESH_REQUEST = 0x0004;
const CREATE_PERMISSION_REQUEST = 0x0008;
const CREATE_PERMISSION_SUCCESS = 0x0108;
const XOR_PEER_ADDRESS = 0x0012;

/** XOR-PEER-ADDRESS for an IPv4 address (port 9, discard: a permission names only the address). */
function xorPeerAddress(address: string): Buffer {
  const value = Buffer.alloc(8);
  value[1] = 0x01;
  value.writeUInt16BE(9 ^ (MAGIC_COOKIE >>> 16), 2);
  address.split('.').forEach((octet, i) => (value[4 + i] = Number(octet) ^ ((MAGIC_COOKIE >>> (24 - 8 * i)) & 0xff)));
  return value;
}

function errorCode(attributes: Map<number, Buffer>): number {
  const error = attributes.get(ATTR.ERROR_CODE);
  return error ? (error[2]! & 0x7) * 100 + error[3]! : 0;
}

function attribute(type: number, value: Buffer): Buffer {
  const padded = Buffer.alloc(4 + Math.ceil(value.length / 4) * 4);
  padded.writeUInt16BE(type, 0);
  padded.writeUInt16BE(value.length, 2);
  value.copy(padded, 4);
  return padded;
}

/** A STUN message; with `key`, MESSAGE-INTEGRITY over it (RFC 8489 §14.5). */
function stunMessage(type: number, transaction: Buffer, attributes: Buffer[], key?: Buffer): Buffer {
  const body = Buffer.concat(attributes);
  const header = Buffer.alloc(20);
  header.writeUInt16BE(type, 0);
  header.writeUInt16BE(body.length + (key ? 24 : 0), 2);
  header.writeUInt32BE(MAGIC_COOKIE, 4);
  transaction.copy(header, 8);
  const message = Buffer.concat([header, body]);
  if (!key) return message;
  return Buffer.concat([message, attribute(ATTR.MESSAGE_INTEGRITY, createHmac('sha1', key).update(message).digest())]);
}

function parseAttributes(message: Buffer): Map<number, Buffer> {
  const attributes = new Map<number, Buffer>();
  let offset = 20;
  while (offset + 4 <= message.length) {
    const type = message.readUInt16BE(offset);
    const length = message.readUInt16BE(offset + 2);
    if (!attributes.has(type)) attributes.set(type, message.subarray(offset + 4, offset + 4 + length));
    offset += 4 + Math.ceil(length / 4) * 4;
  }
  return attributes;
}

function exchange(
  socket: ReturnType<typeof createSocket>,
  request: Buffer,
  transaction: Buffer,
  address: string,
  port: number,
  timeoutMs: number,
): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const onMessage = (message: Buffer): void => {
      if (message.length < 20 || !message.subarray(8, 20).equals(transaction)) return;
      clearTimeout(timer);
      socket.off('message', onMessage);
      resolve(message);
    };
    const timer = setTimeout(() => {
      socket.off('message', onMessage);
      reject(new Error(`no answer from ${address}:${port} within ${timeoutMs} ms`));
    }, timeoutMs);
    socket.on('message', onMessage);
    socket.send(request, port, address);
  });
}

export type AllocateResult =
  | {
      readonly ok: true;
      readonly relayed: { readonly address: string; readonly port: number };
      /** Per peer asked for: 200 when the server permits relaying to it, else its error code (403: forbidden peer). */
      readonly permissions: Readonly<Record<string, number>>;
    }
  | { readonly ok: false; readonly code: number; readonly reason: string };

/**
 * Asks the TURN server at `address:port` for a UDP relay with `username`/`password` (the
 * unauthenticated request, its 401 with REALM and NONCE, then the authenticated one), then for a
 * permission to each of `peers` (a request to the server only: nothing is sent to the peers).
 * Frees the allocation again when it succeeds.
 */
export async function tryAllocate(
  address: string,
  port: number,
  username: string,
  password: string,
  peers: readonly string[] = [],
): Promise<AllocateResult> {
  const socket = createSocket('udp4');
  await new Promise<void>((resolve) => socket.bind(0, address, resolve));
  try {
    const transport = Buffer.from([17, 0, 0, 0]); // UDP
    const first = randomBytes(12);
    const challenge = await exchange(
      socket,
      stunMessage(ALLOCATE_REQUEST, first, [attribute(ATTR.REQUESTED_TRANSPORT, transport)]),
      first,
      address,
      port,
      3_000,
    );
    const challengeAttributes = parseAttributes(challenge);
    const realm = challengeAttributes.get(ATTR.REALM);
    const nonce = challengeAttributes.get(ATTR.NONCE);
    if (!realm || !nonce) throw new Error('the TURN server sent no REALM/NONCE challenge');
    const key = createHash('md5')
      .update(`${username}:${realm.toString('utf8')}:${password}`)
      .digest();
    const second = randomBytes(12);
    const credentials = [
      attribute(ATTR.USERNAME, Buffer.from(username, 'utf8')),
      attribute(ATTR.REALM, realm),
      attribute(ATTR.NONCE, nonce),
    ];
    const answer = await exchange(
      socket,
      stunMessage(ALLOCATE_REQUEST, second, [attribute(ATTR.REQUESTED_TRANSPORT, transport), ...credentials], key),
      second,
      address,
      port,
      3_000,
    );
    const attributes = parseAttributes(answer);
    const type = answer.readUInt16BE(0);
    if (type === ALLOCATE_ERROR) {
      return { ok: false, code: errorCode(attributes), reason: attributes.get(ATTR.ERROR_CODE)?.subarray(4).toString('utf8') ?? '' };
    }
    if (type !== ALLOCATE_SUCCESS) throw new Error(`unexpected STUN message type 0x${type.toString(16)}`);
    const relayed = attributes.get(ATTR.XOR_RELAYED_ADDRESS);
    if (!relayed || relayed[1] !== 0x01) throw new Error('no IPv4 XOR-RELAYED-ADDRESS in the Allocate success');
    const relayedPort = relayed.readUInt16BE(2) ^ (MAGIC_COOKIE >>> 16);
    const relayedAddress = [...relayed.subarray(4, 8)].map((byte, i) => byte ^ ((MAGIC_COOKIE >>> (24 - 8 * i)) & 0xff)).join('.');
    const permissions: Record<string, number> = {};
    for (const peer of peers) {
      const id = randomBytes(12);
      const reply = await exchange(
        socket,
        stunMessage(CREATE_PERMISSION_REQUEST, id, [attribute(XOR_PEER_ADDRESS, xorPeerAddress(peer)), ...credentials], key),
        id,
        address,
        port,
        3_000,
      );
      permissions[peer] = reply.readUInt16BE(0) === CREATE_PERMISSION_SUCCESS ? 200 : errorCode(parseAttributes(reply));
    }
    // Free it (Refresh with LIFETIME 0).
    const lifetime = Buffer.alloc(4);
    const third = randomBytes(12);
    await exchange(
      socket,
      stunMessage(REFRESH_REQUEST, third, [attribute(ATTR.LIFETIME, lifetime), ...credentials], key),
      third,
      address,
      port,
      3_000,
    ).catch(() => undefined);
    return { ok: true, relayed: { address: relayedAddress, port: relayedPort }, permissions };
  } finally {
    socket.close();
  }
}

const live = new Set<{ child: ChildProcess; directory: string }>();
let exitHandlerInstalled = false;

function installExitHandler(): void {
  if (exitHandlerInstalled) return;
  exitHandlerInstalled = true;
  process.on('exit', () => {
    for (const server of live) {
      server.child.kill('SIGKILL');
      rmSync(server.directory, { recursive: true, force: true });
    }
  });
}

/** Starts coturn on `options.address`; resolves once it answers a STUN Binding request. Always `stop()` it. */
export async function startCoturn(options: CoturnOptions): Promise<CoturnServer> {
  const turnserver = findTurnserver();
  if (!isIPv4(options.address)) throw new Error(`startCoturn: address must be an IPv4 literal; got "${options.address}"`);
  for (const peer of options.allowedPeers) {
    if (!isIPv4(peer)) throw new Error(`startCoturn: allowed peers must be IPv4 literals; got "${peer}"`);
  }
  installExitHandler();
  const directory = await mkdtemp(join(tmpdir(), 'arclight-coturn-'));
  const secret = randomBytes(24).toString('hex');
  const port = await freeUdpPort(options.address);
  const base = 50_000 + (process.pid % 150) * 64;
  const relayPorts: readonly [number, number] = options.relayPorts ?? [base, base + 63];
  const loopbackPeer = options.allowedPeers.some((peer) => peer.startsWith('127.'));
  const config = [
    `listening-ip=${options.address}`,
    `relay-ip=${options.address}`,
    `listening-port=${port}`,
    `min-port=${relayPorts[0]}`,
    `max-port=${relayPorts[1]}`,
    `realm=${REALM}`,
    'use-auth-secret',
    `static-auth-secret=${secret}`,
    'fingerprint',
    'no-tls',
    'no-dtls',
    'no-tcp',
    'no-tcp-relay',
    'no-cli',
    'no-rfc5780',
    'no-multicast-peers',
    ...(loopbackPeer ? ['allow-loopback-peers'] : []),
    // Relay to the named peers and nowhere else (allowed-peer-ip is checked before denied-peer-ip).
    'denied-peer-ip=0.0.0.0-255.255.255.255',
    ...options.allowedPeers.map((peer) => `allowed-peer-ip=${peer}`),
    `pidfile=${join(directory, 'turnserver.pid')}`,
    `userdb=${join(directory, 'turndb')}`,
    'log-file=stdout',
    'simple-log',
    'verbose',
  ];
  const configPath = join(directory, 'turnserver.conf');
  await writeFile(configPath, config.join('\n') + '\n', { mode: 0o600 });

  const argv = [turnserver, '-c', configPath];
  const [file, ...args] = hasSetpriv() ? ['/usr/bin/setpriv', '--pdeathsig', 'KILL', ...argv] : argv;
  const child = spawn(file!, args, { cwd: directory, stdio: ['ignore', 'pipe', 'pipe'] });
  const entry = { child, directory };
  live.add(entry);
  let output = '';
  const append = (chunk: string): void => {
    output = (output + chunk).slice(-LOG_TAIL_CHARS);
  };
  child.stdout!.setEncoding('utf8').on('data', append);
  child.stderr!.setEncoding('utf8').on('data', append);
  let exited = false;
  const exit = new Promise<void>((resolve) => {
    child.once('exit', (code, signal) => {
      exited = true;
      append(`\n[turnserver exited: ${signal ?? `code ${code}`}]`);
      resolve();
    });
    child.once('error', (error) => {
      exited = true;
      append(`\n[turnserver failed to start: ${error.message}]`);
      resolve();
    });
  });

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopping ??= (async () => {
      if (!exited) {
        child.kill('SIGTERM');
        const killer = setTimeout(() => child.kill('SIGKILL'), 5_000);
        await exit;
        clearTimeout(killer);
      }
      live.delete(entry);
      await rm(directory, { recursive: true, force: true });
    })());

  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    if (exited) {
      await stop();
      throw new Error(`turnserver exited during start-up on ${options.address}:${port}\n--- log ---\n${output}`);
    }
    if (await stunBinding(options.address, port, 300)) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`turnserver did not answer STUN on ${options.address}:${port} within ${START_TIMEOUT_MS} ms\n--- log ---\n${output}`);
    }
  }

  return {
    address: options.address,
    port,
    secret,
    realm: REALM,
    url: `turn:${options.address}:${port}?transport=udp`,
    relayPorts,
    log: () => output,
    stop,
  };
}
