/**
 * A test-only network impairment at a runtime peer's UDP sockets: random loss, a one-way delay
 * each way and blackouts, for every datagram in and out (STUN, DTLS, SCTP, SRTP, SRTCP).
 *
 * netem needs a kernel module that neither the development machines nor CI have, so the
 * impairment sits in the runtime instead: a test creates a `NetworkFaults`, passes it as
 * `faults: { network }` in RuntimeOptions, and switches it while a session runs. It wraps each
 * socket's `send` (which werift's `UdpTransport.send` and our `IceDatagramWriter` both call)
 * and its 'message' listeners (werift's receive path). Never active by default: without a
 * `NetworkFaults` no socket is touched.
 *
 * Loss is drawn separately for each direction, as netem on both ends of a link would: with 5 %
 * a round trip loses ~10 %. Delay is one way, so `delayMs: 75` gives a 150 ms RTT; datagrams
 * keep their order even when the delay changes mid-flight (as netem's default FIFO does).
 * TURN relays and ICE-TCP are not impaired (the runtime's own peers use plain UDP in tests).
 */

import type { RemoteInfo, Socket } from 'node:dgram';
import type { RTCPeerConnection } from 'werift';
import { StunProtocol, UdpTransport } from 'werift';

export interface NetworkImpairment {
  /** Percentage (0–100) of datagrams dropped at random, in each direction. */
  readonly lossPercent?: number;
  /** Added to every datagram, in each direction, ms. */
  readonly delayMs?: number;
}

export interface NetworkFaultCounters {
  /** Datagrams dropped by loss or a blackout (both directions). */
  dropped: number;
  /** Datagrams held back by the delay (both directions). */
  delayed: number;
  /** Datagrams that went through (at once or after the delay). */
  delivered: number;
}

export type Direction = 'inbound' | 'outbound';

export interface NetworkFaultsOptions {
  /** Uniform [0, 1) draws for loss; injectable so tests are deterministic. */
  readonly random?: () => number;
  /** Clock for blackouts, ms. */
  readonly now?: () => number;
}

export class NetworkFaults {
  readonly counters: NetworkFaultCounters = { dropped: 0, delayed: 0, delivered: 0 };
  #lossProbability = 0;
  #delayMs = 0;
  #blackoutUntil = -Infinity;
  #blackoutDirection: Direction | 'both' = 'both';
  readonly #random: () => number;
  readonly #now: () => number;

  constructor(options: NetworkFaultsOptions = {}) {
    this.#random = options.random ?? Math.random;
    this.#now = options.now ?? (() => performance.now());
  }

  /** Replaces loss and delay (an omitted field becomes 0). A blackout in progress goes on. */
  set(impairment: NetworkImpairment): void {
    this.#lossProbability = Math.min(Math.max(impairment.lossPercent ?? 0, 0), 100) / 100;
    this.#delayMs = Math.max(impairment.delayMs ?? 0, 0);
  }

  /**
   * Drops every datagram for `ms` from now (datagrams already delayed still arrive): both ways,
   * or one way — 'outbound' is an outage of the client's downlink while its RTCP (NACK, PLI)
   * still reaches the runtime.
   */
  blackout(ms: number, direction: Direction | 'both' = 'both'): void {
    this.#blackoutUntil = this.#now() + ms;
    this.#blackoutDirection = direction;
  }

  /** No loss, no delay, no blackout. */
  clear(): void {
    this.set({});
    this.#blackoutUntil = -Infinity;
  }

  /** The clock blackouts and delays are measured on, ms. */
  now(): number {
    return this.#now();
  }

  get delayMs(): number {
    return this.#delayMs;
  }

  /** Whether a blackout is on for `direction` (default: for either). */
  blackedOut(direction?: Direction): boolean {
    if (!(this.#now() < this.#blackoutUntil)) return false;
    return direction === undefined || this.#blackoutDirection === 'both' || this.#blackoutDirection === direction;
  }

  /**
   * Decides the fate of one datagram going `direction`: 'drop', or the delay (ms, 0 = at once)
   * before it is delivered. Counts it.
   */
  decide(direction: Direction): 'drop' | number {
    if (this.blackedOut(direction) || (this.#lossProbability > 0 && this.#random() < this.#lossProbability)) {
      this.counters.dropped++;
      return 'drop';
    }
    if (this.#delayMs > 0) this.counters.delayed++;
    return this.#delayMs;
  }

  /** A delay line for one direction of one socket (see `DelayLine`). */
  createLine(direction: Direction): DelayLine {
    return new DelayLine(this, direction);
  }
}

/**
 * Delivers datagrams of one direction in the order they came, each no earlier than its delay
 * allows: a datagram never overtakes an earlier one, even after the delay was lowered.
 */
export class DelayLine {
  readonly #faults: NetworkFaults;
  readonly #direction: Direction;
  readonly #queue: Array<{ readonly due: number; readonly deliver: () => void }> = [];

  constructor(faults: NetworkFaults, direction: Direction) {
    this.#faults = faults;
    this.#direction = direction;
  }

  /** `deliver` runs now, later or never, as the faults decide; says which. */
  pass(deliver: () => void): 'delivered' | 'delayed' | 'dropped' {
    const fate = this.#faults.decide(this.#direction);
    if (fate === 'drop') return 'dropped';
    if (fate === 0 && this.#queue.length === 0) {
      this.#faults.counters.delivered++;
      deliver();
      return 'delivered';
    }
    const due = Math.max(this.#faults.now() + fate, this.#queue.at(-1)?.due ?? -Infinity);
    this.#queue.push({ due, deliver });
    if (this.#queue.length === 1) this.#arm();
    return 'delayed';
  }

  /** Datagrams waiting for their time. */
  get pending(): number {
    return this.#queue.length;
  }

  #arm(): void {
    const head = this.#queue[0];
    if (head === undefined) return;
    // A pending delayed datagram must not keep a test process alive.
    setTimeout(() => this.#flush(), Math.max(0, head.due - this.#faults.now())).unref();
  }

  #flush(): void {
    // Timers fire up to ~1 ms early or late; deliver everything due within that.
    const now = this.#faults.now() + 1;
    while (this.#queue.length > 0 && this.#queue[0]!.due <= now) {
      const { deliver } = this.#queue.shift()!;
      this.#faults.counters.delivered++;
      try {
        deliver();
      } catch {
        // A socket closed while the datagram waited: as on a real network, it is lost.
      }
    }
    this.#arm();
  }
}

const IMPAIRED = Symbol('arclight.networkFaults');

type SendArgs = unknown[];
type MessageListener = (message: Buffer, remote: RemoteInfo) => void;
type ImpairableSocket = Socket & { [IMPAIRED]?: NetworkFaults };

/**
 * Puts `faults` on a UDP socket, both ways. Idempotent: a socket is wrapped once.
 * Listeners for 'message' added after this are not impaired (werift adds its one at creation).
 */
export function impairSocket(socket: Socket, faults: NetworkFaults): void {
  const impairable = socket as ImpairableSocket;
  if (impairable[IMPAIRED]) return;
  impairable[IMPAIRED] = faults;

  const outbound = faults.createLine('outbound');
  const send = socket.send.bind(socket) as (...args: SendArgs) => void;
  (socket as unknown as { send: (...args: SendArgs) => void }).send = (...args: SendArgs) => {
    const callback = typeof args.at(-1) === 'function' ? (args.at(-1) as (error: Error | null) => void) : undefined;
    // A delayed datagram must carry the bytes it had when it was sent: callers may reuse buffers.
    // (The runtime's RTP send history reuses its slots.)
    if ((faults.delayMs > 0 || outbound.pending > 0) && Buffer.isBuffer(args[0])) args[0] = Buffer.from(args[0]);
    // A dropped datagram was still "sent" as far as the sender knows (the loss is further on).
    if (outbound.pass(() => send(...args)) === 'dropped' && callback) queueMicrotask(() => callback(null));
  };

  const inbound = faults.createLine('inbound');
  const listeners = socket.listeners('message') as MessageListener[];
  socket.removeAllListeners('message');
  socket.on('message', (message: Buffer, remote: RemoteInfo) => {
    inbound.pass(() => {
      for (const listener of listeners) listener.call(socket, message, remote);
    });
  });
}

/**
 * Puts `faults` on every UDP socket of a peer's ICE transports, now and whenever it gathers a
 * new local candidate later (an ICE restart on a new address opens a new socket).
 */
export function impairPeer(pc: RTCPeerConnection, faults: NetworkFaults): void {
  const impairAll = (): void => {
    for (const ice of pc.iceTransports) {
      const protocols = (ice.connection as unknown as { protocols?: readonly unknown[] }).protocols ?? [];
      for (const protocol of protocols) {
        if (protocol instanceof StunProtocol && protocol.transport instanceof UdpTransport) impairSocket(protocol.transport.socket, faults);
      }
    }
  };
  impairAll();
  pc.onIceCandidate.subscribe(() => impairAll());
}
