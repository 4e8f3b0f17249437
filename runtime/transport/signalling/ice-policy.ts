/**
 * Which addresses ICE may use. In production the runtime gathers on every interface. Tests (and
 * operators who must pin traffic to one interface) name the host addresses: then the runtime
 * advertises only those, and only checks remote candidates in the same IPv4 /24 — so it never
 * sends a packet to any other address (werift would otherwise advertise and pair every interface).
 * Clients' own checks still reach it from anywhere (they become peer-reflexive candidates).
 *
 * Behind a 1:1 NAT (a cloud VM's public IP, a Kubernetes node's external address, a Docker host
 * publishing the UDP range) the runtime cannot see its public address: `publicAddress` names it,
 * and every host candidate is also advertised at that address with the same port, as a
 * server-reflexive candidate. werift has no NAT 1:1 setting of its own; the answer SDP is
 * rewritten here.
 */

import { isIP } from 'node:net';

export interface IcePolicyOptions {
  /** Host addresses to gather on and advertise, e.g. `['127.0.0.1']`. Empty or absent: all interfaces. */
  readonly hostAddresses?: readonly string[];
  /**
   * UDP port range for ICE sockets, inclusive, e.g. `[40000, 40999]` for a firewall rule or a
   * published container port range. Each client connection holds one port per host address
   * while it is open (its media and data channel share it), so the range bounds how many
   * connections the runtime can hold at once. Default: any free port.
   */
  readonly portRange?: readonly [number, number];
  /**
   * The address clients reach this host at when it differs from the interface's own (a 1:1 NAT:
   * cloud public IP, Kubernetes node external IP, Docker host). The answer then also offers each
   * host candidate of the same IP family at this address and the same port (`typ srflx`, with
   * `raddr`/`rport` the host candidate), so the NAT must forward each port of `portRange` to the
   * same port here. IPv4 or IPv6 literal. Default: none (host candidates only).
   */
  readonly publicAddress?: string;
}

export class IcePolicy {
  readonly #hostAddresses: readonly string[];
  readonly #remotePrefixes: readonly string[];
  readonly portRange: readonly [number, number] | undefined;
  readonly publicAddress: string | undefined;

  constructor(options: IcePolicyOptions = {}) {
    this.#hostAddresses = options.hostAddresses ?? [];
    this.#remotePrefixes = this.#hostAddresses.map(prefix24);
    const range = options.portRange;
    if (range !== undefined) {
      const [min, max] = range;
      if (!Number.isInteger(min) || !Number.isInteger(max) || min < 1 || max > 65535 || min >= max) {
        // werift's icePortRange needs min < max ("must not be the same value").
        throw new TypeError(`ice.portRange must be two ports [min, max] with 1 ≤ min < max ≤ 65535; got [${String(min)}, ${String(max)}]`);
      }
    }
    this.portRange = range;
    if (options.publicAddress !== undefined && isIP(options.publicAddress) === 0) {
      throw new TypeError(`ice.publicAddress must be an IPv4 or IPv6 address; got "${options.publicAddress}"`);
    }
    this.publicAddress = options.publicAddress;
  }

  get restricted(): boolean {
    return this.#hostAddresses.length > 0;
  }

  get hostAddresses(): readonly string[] {
    return this.#hostAddresses;
  }

  /** May the runtime send connectivity checks to this remote address? */
  allowsRemote(address: string): boolean {
    if (!this.restricted) return true;
    return this.#remotePrefixes.includes(prefix24(address));
  }

  /** May this local candidate address be advertised? */
  allowsLocal(address: string): boolean {
    return !this.restricted || this.#hostAddresses.includes(address);
  }

  /** Removes `a=candidate` lines whose address this policy does not allow. */
  filterSdp(sdp: string): string {
    if (!this.restricted) return sdp;
    return sdp
      .split('\r\n')
      .filter((line) => {
        if (!line.startsWith('a=candidate:')) return true;
        const address = line.split(' ')[4];
        return address !== undefined && this.allowsLocal(address);
      })
      .join('\r\n');
  }

  /** The candidates the runtime's answer offers: `filterSdp`, then the public address's. */
  advertisedSdp(sdp: string): string {
    return this.publicAddress === undefined ? this.filterSdp(sdp) : withPublicCandidates(this.filterSdp(sdp), this.publicAddress);
  }
}

/** RFC 8445 type preferences: a host candidate's local preference is kept for its public twin. */
const SRFLX_TYPE_PREFERENCE = 100;

/**
 * After each UDP host candidate of `publicAddress`'s IP family, a server-reflexive candidate at
 * `publicAddress` with the same port (what a 1:1 NAT maps it to), its base as `raddr`/`rport`.
 */
export function withPublicCandidates(sdp: string, publicAddress: string): string {
  const family = isIP(publicAddress);
  const out: string[] = [];
  for (const line of sdp.split('\r\n')) {
    out.push(line);
    if (!line.startsWith('a=candidate:')) continue;
    // a=candidate:<foundation> <component> <transport> <priority> <address> <port> typ <type> [extensions]
    const fields = line.slice('a=candidate:'.length).split(' ');
    const [foundation, component, transport, priority, address, port, typ, type, ...extensions] = fields;
    if (typ !== 'typ' || type !== 'host' || transport?.toLowerCase() !== 'udp') continue;
    if (address === undefined || address === publicAddress || isIP(address) !== family) continue;
    const componentId = Number(component);
    const localPreference = (Number(priority) >>> 8) & 0xffff;
    const srflxPriority = SRFLX_TYPE_PREFERENCE * 2 ** 24 + localPreference * 2 ** 8 + (256 - componentId);
    // A foundation of its own (another type, so another foundation): the host one with a suffix.
    const twin = `${(foundation ?? '').slice(0, 31)}p`;
    out.push(
      `a=candidate:${twin} ${component} ${transport} ${srflxPriority} ${publicAddress} ${port} typ srflx raddr ${address} rport ${port}${extensions.length ? ` ${extensions.join(' ')}` : ''}`,
    );
  }
  return out.join('\r\n');
}

function prefix24(address: string): string {
  const parts = address.split('.');
  return parts.length === 4 ? parts.slice(0, 3).join('.') : address;
}
