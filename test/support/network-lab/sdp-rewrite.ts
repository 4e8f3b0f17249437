/**
 * Rewrites the ICE candidates in SDP (and in trickled candidate strings) so that each peer sees
 * the relay's sockets instead of the other peer's. Pure functions: `candidateEndpoints` lists
 * what needs a relay socket, the relay opens them, and `rewriteSdp` / `rewriteCandidate` swap
 * the addresses with the map it returns.
 *
 * Only UDP candidates survive; TCP candidates and those whose address the map has no entry for
 * (another interface, an mDNS name) are removed, so no path bypasses the relay. A rewritten
 * candidate is `typ host` (the relay's socket is a host address to the peer that receives it)
 * and loses its `raddr`/`rport`; its other extension attributes stay.
 */

export interface Endpoint {
  readonly address: string;
  readonly port: number;
}

export const endpointKey = (endpoint: Endpoint): string => `${endpoint.address}:${endpoint.port}`;

interface ParsedCandidate {
  readonly foundation: string;
  readonly component: string;
  readonly transport: string;
  readonly priority: string;
  readonly address: string;
  readonly port: number;
  readonly type: string;
  /** Extension attributes after typ/raddr/rport, as name-value pairs. */
  readonly extensions: readonly string[];
}

/** Parses `candidate:…` (with or without a leading `a=`); undefined when it is not one. */
export function parseCandidate(text: string): ParsedCandidate | undefined {
  const match = /^(?:a=)?candidate:(\S+) (\d+) (\S+) (\d+) (\S+) (\d+) typ (\S+)(.*)$/i.exec(text.trim());
  if (!match) return undefined;
  const rest = match[8]!.trim().split(/\s+/).filter(Boolean);
  const extensions: string[] = [];
  for (let i = 0; i + 1 < rest.length; i += 2) {
    if (rest[i] === 'raddr' || rest[i] === 'rport') continue;
    extensions.push(rest[i]!, rest[i + 1]!);
  }
  return {
    foundation: match[1]!,
    component: match[2]!,
    transport: match[3]!,
    priority: match[4]!,
    address: match[5]!,
    port: Number(match[6]),
    type: match[7]!,
    extensions,
  };
}

/** The UDP endpoints of every candidate in `text` (an SDP, or one candidate string). */
export function candidateEndpoints(text: string): Endpoint[] {
  const found = new Map<string, Endpoint>();
  for (const line of text.split(/\r?\n/)) {
    const candidate = parseCandidate(line);
    if (candidate && candidate.transport.toLowerCase() === 'udp')
      found.set(endpointKey(candidate), { address: candidate.address, port: candidate.port });
  }
  return [...found.values()];
}

/** One candidate string with its endpoint swapped, or undefined when it is to be removed. */
export function rewriteCandidate(text: string, map: ReadonlyMap<string, Endpoint>): string | undefined {
  const candidate = parseCandidate(text);
  if (!candidate || candidate.transport.toLowerCase() !== 'udp') return undefined;
  const to = map.get(endpointKey(candidate));
  if (!to) return undefined;
  const prefix = /^\s*a=/.test(text) ? 'a=' : '';
  const tail = candidate.extensions.length ? ` ${candidate.extensions.join(' ')}` : '';
  return `${prefix}candidate:${candidate.foundation} ${candidate.component} udp ${candidate.priority} ${to.address} ${to.port} typ host${tail}`;
}

/**
 * `sdp` with every candidate rewritten through `map` (or removed), duplicates (two candidates
 * mapped onto one relay socket) dropped, each media section's `c=` line set to the address of its
 * first remaining candidate, and `a=rtcp:` lines (which name the old address) removed.
 */
export function rewriteSdp(sdp: string, map: ReadonlyMap<string, Endpoint>): string {
  const eol = sdp.includes('\r\n') ? '\r\n' : '\n';
  const lines = sdp.split(/\r?\n/);
  const out: string[] = [];
  // Per media section: where its c= line is, and the endpoints already written.
  let connectionLine = -1;
  let sectionAddress: string | undefined;
  let seen = new Set<string>();
  const closeSection = (): void => {
    if (connectionLine >= 0 && sectionAddress !== undefined) out[connectionLine] = `c=IN IP4 ${sectionAddress}`;
  };
  for (const line of lines) {
    if (line.startsWith('m=')) {
      closeSection();
      connectionLine = -1;
      sectionAddress = undefined;
      seen = new Set();
    }
    if (line.startsWith('c=')) {
      connectionLine = out.length;
      out.push(line);
      continue;
    }
    if (line.startsWith('a=rtcp:')) continue;
    if (line.startsWith('a=candidate:')) {
      const rewritten = rewriteCandidate(line, map);
      if (rewritten === undefined) continue;
      const endpoint = candidateEndpoints(rewritten)[0]!;
      const tupleKey = `${parseCandidate(rewritten)!.component} ${endpointKey(endpoint)}`;
      if (seen.has(tupleKey)) continue;
      seen.add(tupleKey);
      sectionAddress ??= endpoint.address;
      out.push(rewritten);
      continue;
    }
    out.push(line);
  }
  closeSection();
  return out.join(eol);
}
