/**
 * Which addresses ICE may use. In production the runtime gathers on every interface. Tests (and
 * operators who must pin traffic to one interface) name the host addresses: then the runtime
 * advertises only those, and only checks remote candidates in the same IPv4 /24 — so it never
 * sends a packet to any other address (werift would otherwise advertise and pair every interface).
 */

export interface IcePolicyOptions {
  /** Host addresses to gather on and advertise, e.g. `['127.0.0.1']`. Empty or absent: all interfaces. */
  readonly hostAddresses?: readonly string[];
  /** UDP port range for ICE sockets, e.g. `[40000, 40999]` for a firewall rule. */
  readonly portRange?: readonly [number, number];
}

export class IcePolicy {
  readonly #hostAddresses: readonly string[];
  readonly #remotePrefixes: readonly string[];
  readonly portRange: readonly [number, number] | undefined;

  constructor(options: IcePolicyOptions = {}) {
    this.#hostAddresses = options.hostAddresses ?? [];
    this.#remotePrefixes = this.#hostAddresses.map(prefix24);
    this.portRange = options.portRange;
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
}

function prefix24(address: string): string {
  const parts = address.split('.');
  return parts.length === 4 ? parts.slice(0, 3).join('.') : address;
}
