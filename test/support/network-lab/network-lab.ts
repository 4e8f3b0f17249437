/**
 * The network lab: an impaired path between one WebRTC client and one WebRTC server, neither of
 * them changed for it. A `UdpRelay` carries the media, an `ImpairedLink` per direction impairs it,
 * and the SDP each peer gets names the relay instead of the other peer (`rewriteClientSdp` for what
 * the client sends, `rewriteServerSdp` for what the server answers, or a `SignallingProxy` in front
 * of an HTTP server that does both on the way through).
 *
 * @example
 * const lab = await NetworkLab.start({ address: '127.0.0.1', down: { lossPercent: 2, delayMs: 20 }, up: { delayMs: 20 } });
 * const proxy = await lab.proxyHttp(runtime.url); // the client connects to proxy.url
 * lab.schedule([{ at: 0, down: { capMbps: 4 } }, { at: 10_000, down: { capMbps: 1 } }, { at: 25_000, down: { capMbps: 4 } }]);
 * …
 * lab.counters.down.droppedRandom; await lab.close();
 */

import { seededRandom, systemClock, type LabClock } from './clock.ts';
import { ImpairedLink, type LinkCounters } from './impaired-link.ts';
import type { LabImpairment, LinkSettings, ScheduleStep } from './impairment.ts';
import { candidateEndpoints, endpointKey, rewriteCandidate, rewriteSdp, type Endpoint } from './sdp-rewrite.ts';
import { SignallingProxy } from './signalling-proxy.ts';
import { sendRelayed, UdpRelay, type RelayCounters, type RelayedDatagram } from './udp-relay.ts';

export interface NetworkLabOptions {
  /**
   * The relay's address on the client's side: 127.0.0.1 for a client on loopback, or a test
   * namespace's `hostAddress` for a client in the namespace.
   */
  readonly clientSideAddress: string;
  /** The relay's address on the server's side (default: `clientSideAddress`). */
  readonly serverSideAddress?: string;
  /** Further addresses peers may have (e.g. the namespace's `peerAddress`); both sides' addresses are always allowed. */
  readonly allowed?: readonly string[];
  /** Initial impairment of each direction (default: clean). */
  readonly down?: LabImpairment['down'];
  readonly up?: LabImpairment['up'];
  readonly clock?: LabClock;
  /** Uniform [0, 1) source for loss and jitter, shared by both directions (default Math.random). */
  readonly random?: () => number;
  /**
   * Repeats a run's drops: each direction gets its own `seededRandom` stream (`seed` down,
   * `seed + 1` up), so the n-th datagram down meets the same fate however much went up in
   * between. Overrides `random`.
   */
  readonly seed?: number;
}

export interface LabCounters {
  readonly down: LinkCounters;
  readonly up: LinkCounters;
  readonly relay: RelayCounters;
}

/** A running schedule: `done` resolves after its last step; `cancel` stops the steps not yet applied. */
export interface RunningSchedule {
  readonly done: Promise<void>;
  cancel(): void;
}

export class NetworkLab {
  readonly down: ImpairedLink<RelayedDatagram>;
  readonly up: ImpairedLink<RelayedDatagram>;
  readonly relay: UdpRelay;
  readonly #clock: LabClock;
  readonly #proxies: SignallingProxy[] = [];
  readonly #schedules = new Set<RunningSchedule>();
  readonly #clientSideAddress: string;

  private constructor(options: NetworkLabOptions) {
    this.#clock = options.clock ?? systemClock;
    this.#clientSideAddress = options.clientSideAddress;
    const shared = options.random ?? Math.random;
    const downRandom = options.seed === undefined ? shared : seededRandom(options.seed);
    const upRandom = options.seed === undefined ? shared : seededRandom(options.seed + 1);
    this.down = new ImpairedLink({ clock: this.#clock, random: downRandom, deliver: sendRelayed, settings: options.down ?? {} });
    this.up = new ImpairedLink({ clock: this.#clock, random: upRandom, deliver: sendRelayed, settings: options.up ?? {} });
    this.relay = new UdpRelay({
      clientFacingAddress: options.clientSideAddress,
      serverFacingAddress: options.serverSideAddress ?? options.clientSideAddress,
      allowed: options.allowed ?? [],
      down: this.down,
      up: this.up,
    });
  }

  /** A lab with no socket open yet: sockets open as SDP is rewritten and datagrams arrive. */
  static async start(options: NetworkLabOptions): Promise<NetworkLab> {
    return new NetworkLab(options);
  }

  /** Changes either or both directions; fields left out keep their values. */
  set(change: LabImpairment): void {
    if (change.down) this.down.set(change.down);
    if (change.up) this.up.set(change.up);
  }

  /** Both directions back to a clean link. */
  clear(): void {
    this.down.clear();
    this.up.clear();
  }

  get settings(): { readonly down: LinkSettings; readonly up: LinkSettings } {
    return { down: this.down.settings, up: this.up.settings };
  }

  get counters(): LabCounters {
    return { down: this.down.counters, up: this.up.counters, relay: this.relay.counters };
  }

  /**
   * Applies each step at `at` ms from now (steps in any order; a step at 0 applies at once).
   * @example lab.schedule([{ at: 0, down: { capMbps: 4 } }, { at: 10_000, down: { capMbps: 1 } }, { at: 25_000, down: { capMbps: 4 } }])
   */
  schedule(steps: readonly ScheduleStep[]): RunningSchedule {
    const start = this.#clock.now();
    const cancels: Array<() => void> = [];
    let resolveDone!: () => void;
    const done = new Promise<void>((resolve) => (resolveDone = resolve));
    const sorted = [...steps].sort((a, b) => a.at - b.at);
    let left = sorted.length;
    const running: RunningSchedule = {
      done,
      cancel: () => {
        for (const cancel of cancels) cancel();
        this.#schedules.delete(running);
        resolveDone();
      },
    };
    this.#schedules.add(running);
    const finishOne = (): void => {
      if (--left === 0) {
        this.#schedules.delete(running);
        resolveDone();
      }
    };
    for (const step of sorted) {
      if (step.at <= 0) {
        this.set(step);
        finishOne();
      } else {
        cancels.push(
          this.#clock.at(start + step.at, () => {
            this.set(step);
            finishOne();
          }),
        );
      }
    }
    if (sorted.length === 0) resolveDone();
    return running;
  }

  /** The client's SDP (offer or answer) as the server must see it: client candidates → relay. */
  rewriteClientSdp(sdp: string): Promise<string> {
    return this.#rewrite(sdp, (endpoint) => this.relay.exposeClient(endpoint));
  }

  /** The server's SDP as the client must see it: server candidates → relay. */
  rewriteServerSdp(sdp: string): Promise<string> {
    return this.#rewrite(sdp, (endpoint) => this.relay.exposeServer(endpoint));
  }

  /** A trickled client candidate string (`candidate:…`) for the server; undefined to drop it. */
  async rewriteClientCandidate(candidate: string): Promise<string | undefined> {
    return rewriteCandidate(candidate, await this.#map(candidateEndpoints(candidate), (e) => this.relay.exposeClient(e)));
  }

  /** A trickled server candidate string for the client; undefined to drop it. */
  async rewriteServerCandidate(candidate: string): Promise<string | undefined> {
    return rewriteCandidate(candidate, await this.#map(candidateEndpoints(candidate), (e) => this.relay.exposeServer(e)));
  }

  /**
   * An HTTP proxy on the client side's address in front of `targetUrl` (a signalling server,
   * e.g. an Arclight runtime) that rewrites the SDP and candidates in JSON bodies both ways.
   */
  async proxyHttp(targetUrl: string): Promise<SignallingProxy> {
    const proxy = await SignallingProxy.start({ targetUrl, listenAddress: this.#clientSideAddress, lab: this });
    this.#proxies.push(proxy);
    return proxy;
  }

  /** Stops schedules, proxies, the links' timers and the relay's sockets. */
  async close(): Promise<void> {
    for (const schedule of [...this.#schedules]) schedule.cancel();
    await Promise.all(this.#proxies.splice(0).map((proxy) => proxy.close()));
    this.down.close();
    this.up.close();
    await this.relay.close();
  }

  async #rewrite(sdp: string, expose: (endpoint: Endpoint) => Promise<Endpoint>): Promise<string> {
    return rewriteSdp(sdp, await this.#map(candidateEndpoints(sdp), expose));
  }

  async #map(endpoints: readonly Endpoint[], expose: (endpoint: Endpoint) => Promise<Endpoint>): Promise<Map<string, Endpoint>> {
    const allowed = endpoints.filter((endpoint) => this.relay.allows(endpoint.address));
    const exposed = await Promise.all(allowed.map(expose));
    return new Map(allowed.map((endpoint, i) => [endpointKey(endpoint), exposed[i]!]));
  }
}
