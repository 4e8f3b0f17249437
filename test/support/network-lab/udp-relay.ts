/**
 * A user-space UDP relay between a WebRTC client and any WebRTC server, a NAT in the middle of
 * the path that impairs what it forwards:
 *
 *     client C ──▶ F(S) [client-facing, one per server endpoint S] ══ up link ══▶ U(C) ──▶ S
 *     client C ◀── F(S) ◀══ down link ══ U(C) [server-facing, one per client endpoint C] ◀── S
 *
 * Each server endpoint S (an ICE candidate's ip:port) gets a client-facing socket F(S); each
 * client endpoint C gets a server-facing socket U(C). A datagram from C arriving at F(S) goes
 * through the up link and out of U(C) to S; one from S arriving at U(C) goes through the down link
 * and out of F(S) to C. The client's SDP names F(S) instead of S, the server's names U(C)
 * instead of C (`sdp-rewrite.ts`), and endpoints that appear only in traffic (peer-reflexive:
 * Chromium in a namespace without a default route has no host candidate) get their sockets on the
 * first datagram. Neither peer can reach the other except through the relay, and neither needs
 * changing.
 *
 * The relay only binds to and sends to the addresses it is given (`allowed`): loopback and the
 * test's own namespaces. A datagram from anywhere else is dropped and counted as `refused`.
 */

import { createSocket, type RemoteInfo, type Socket } from 'node:dgram';
import { once } from 'node:events';
import type { ImpairedLink } from './impaired-link.ts';
import { endpointKey, type Endpoint } from './sdp-rewrite.ts';

/** A datagram in flight through one of the relay's links. */
export interface RelayedDatagram {
  readonly data: Buffer;
  /** The relay socket it leaves from. */
  readonly via: Socket;
  readonly to: Endpoint;
}

export interface UdpRelayOptions {
  /** Address of the client-facing sockets: where the client reaches the relay. */
  readonly clientFacingAddress: string;
  /** Address of the server-facing sockets: what the server sees the client as. */
  readonly serverFacingAddress: string;
  /** Addresses the relay may exchange datagrams with (both sides). */
  readonly allowed: readonly string[];
  /** Server → client. */
  readonly down: ImpairedLink<RelayedDatagram>;
  /** Client → server. */
  readonly up: ImpairedLink<RelayedDatagram>;
}

export interface RelayCounters {
  /** Sockets facing the client (one per server endpoint) and facing the server (one per client endpoint). */
  readonly clientFacingSockets: number;
  readonly serverFacingSockets: number;
  /** Datagrams from addresses not in `allowed`, dropped unrelayed. */
  readonly refused: number;
}

interface Mapping {
  readonly socket: Socket;
  readonly ready: Promise<Endpoint>;
}

/** Delivers a relayed datagram: the links call this when its time has come. */
export function sendRelayed(datagram: RelayedDatagram): void {
  datagram.via.send(datagram.data, datagram.to.port, datagram.to.address);
}

export class UdpRelay {
  readonly #options: UdpRelayOptions;
  readonly #allowed: ReadonlySet<string>;
  /** Server endpoint → its client-facing socket. */
  readonly #clientFacing = new Map<string, Mapping>();
  /** Client endpoint → its server-facing socket. */
  readonly #serverFacing = new Map<string, Mapping>();
  #refused = 0;
  #closed = false;

  constructor(options: UdpRelayOptions) {
    this.#options = options;
    this.#allowed = new Set([...options.allowed, options.clientFacingAddress, options.serverFacingAddress]);
  }

  get counters(): RelayCounters {
    return { clientFacingSockets: this.#clientFacing.size, serverFacingSockets: this.#serverFacing.size, refused: this.#refused };
  }

  /** Whether the relay may exchange datagrams with `address`. */
  allows(address: string): boolean {
    return this.#allowed.has(address);
  }

  /** The client-facing endpoint that stands for server endpoint `server` (opened on first use). */
  exposeServer(server: Endpoint): Promise<Endpoint> {
    return this.#clientFacingFor(server).ready;
  }

  /** The server-facing endpoint that stands for client endpoint `client` (opened on first use). */
  exposeClient(client: Endpoint): Promise<Endpoint> {
    return this.#serverFacingFor(client).ready;
  }

  async close(): Promise<void> {
    this.#closed = true;
    const sockets = [...this.#clientFacing.values(), ...this.#serverFacing.values()].map((m) => m.socket);
    this.#clientFacing.clear();
    this.#serverFacing.clear();
    await Promise.all(sockets.map((socket) => new Promise<void>((resolve) => socket.close(() => resolve())).catch(() => undefined)));
  }

  #clientFacingFor(server: Endpoint): Mapping {
    const key = endpointKey(server);
    let mapping = this.#clientFacing.get(key);
    if (!mapping) {
      mapping = this.#open(this.#options.clientFacingAddress, (data, from) => {
        // From the client C to server S: up the link, out of U(C).
        const client = { address: from.address, port: from.port };
        this.#options.up.send({ data, via: this.#serverFacingFor(client).socket, to: server }, data.length);
      });
      this.#clientFacing.set(key, mapping);
    }
    return mapping;
  }

  #serverFacingFor(client: Endpoint): Mapping {
    const key = endpointKey(client);
    let mapping = this.#serverFacing.get(key);
    if (!mapping) {
      mapping = this.#open(this.#options.serverFacingAddress, (data, from) => {
        // From a server endpoint S to the client C: down the link, out of F(S).
        const server = { address: from.address, port: from.port };
        this.#options.down.send({ data, via: this.#clientFacingFor(server).socket, to: client }, data.length);
      });
      this.#serverFacing.set(key, mapping);
    }
    return mapping;
  }

  /** A socket bound to `address` (port chosen by the system) passing allowed datagrams to `onDatagram`. */
  #open(address: string, onDatagram: (data: Buffer, from: RemoteInfo) => void): Mapping {
    if (this.#closed) throw new Error('network lab: the relay is closed');
    const socket = createSocket({ type: 'udp4' });
    socket.on('message', (data, from) => {
      if (!this.#allowed.has(from.address)) {
        this.#refused++;
        return;
      }
      onDatagram(data, from);
    });
    // A send to a peer that went away reports ICMP errors here: not the relay's problem.
    socket.on('error', () => undefined);
    // Sends made before the bind completes are queued by Node until it does.
    socket.bind(0, address);
    const ready = once(socket, 'listening').then(() => {
      const bound = socket.address();
      return { address: bound.address, port: bound.port };
    });
    return { socket, ready };
  }
}
