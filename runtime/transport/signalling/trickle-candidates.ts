/**
 * Trickled ICE candidates from a client (`POST .../connections/{cid}/ice_candidates`): checked
 * here against the candidate grammar (RFC 8839 §5.1) and the offer they belong to, then added to
 * the werift peer answering that offer.
 *
 * Checked before werift sees them because werift buffers candidates that arrive before the offer
 * is applied and drops the bad ones silently then; a client must hear "400" for bad input
 * whenever it sends it, and nothing it sends may disturb the live peer.
 */

import type { RTCPeerConnection } from 'werift';
import { ArclightError } from '../../../protocol/errors.ts';
import type { IceCandidateEntry } from '../../../protocol/transport.ts';

/**
 * `candidate:<foundation> <component> <transport> <priority> <address> <port> typ <type> [...]`.
 * The address is IPv4, IPv6 or an mDNS name (`<uuid>.local`, what browsers hide host addresses behind).
 */
const CANDIDATE =
  /^candidate:[A-Za-z0-9+/]{1,32} [0-9]{1,3} (udp|tcp) [0-9]{1,10} ([0-9.]{7,15}|[0-9A-Fa-f:.]{2,45}|[A-Za-z0-9-]{1,63}\.local) ([0-9]{1,5}) typ (host|srflx|prflx|relay)( [\x21-\x7e]+)*$/i;

/** What the offer being answered says about its m-lines and ICE credentials. */
export interface OfferIceSections {
  /** The `a=mid` of each m-line, in order (undefined where a line has none). */
  readonly mids: readonly (string | undefined)[];
  /** The offer's ICE ufrags (session level and per m-line). */
  readonly ufrags: ReadonlySet<string>;
}

export function offerIceSections(offerSdp: string): OfferIceSections {
  const mids: (string | undefined)[] = [];
  const ufrags = new Set<string>();
  for (const line of offerSdp.split(/\r?\n/)) {
    if (line.startsWith('m=')) mids.push(undefined);
    else if (line.startsWith('a=mid:') && mids.length > 0) mids[mids.length - 1] = line.slice(6).trim();
    else if (line.startsWith('a=ice-ufrag:')) ufrags.add(line.slice(12).trim());
  }
  return { mids, ufrags };
}

/** Throws `invalid_request` (with the failing `field`) for an entry that names no candidate of this offer. */
export function assertTrickledCandidate(entry: IceCandidateEntry, index: number, offer: OfferIceSections): void {
  const field = `/candidates/${index}`;
  const match = CANDIDATE.exec(entry.candidate);
  if (!match) {
    throw new ArclightError(
      'invalid_request',
      'Not an ICE candidate: expected "candidate:<foundation> <component> <udp|tcp> <priority> <address> <port> typ <host|srflx|prflx|relay> …".',
      { field: `${field}/candidate` },
    );
  }
  if (Number(match[3]) > 65_535)
    throw new ArclightError('invalid_request', `Port ${match[3]} is out of range.`, { field: `${field}/candidate` });
  if (entry.sdp_mid === undefined && entry.sdp_m_line_index === undefined) {
    throw new ArclightError('invalid_request', 'A candidate needs sdp_mid or sdp_m_line_index.', { field });
  }
  if (entry.sdp_mid !== undefined && !offer.mids.includes(entry.sdp_mid)) {
    throw new ArclightError('invalid_request', `The offer has no m-line with mid "${entry.sdp_mid}".`, { field: `${field}/sdp_mid` });
  }
  if (entry.sdp_mid === undefined && entry.sdp_m_line_index! >= offer.mids.length) {
    throw new ArclightError(
      'invalid_request',
      `The offer has ${offer.mids.length} m-lines; sdp_m_line_index ${entry.sdp_m_line_index} is past them.`,
      { field: `${field}/sdp_m_line_index` },
    );
  }
}

/** Whether the candidate belongs to an earlier offer (another ICE generation): ignored, not an error. */
export function isStaleCandidate(entry: IceCandidateEntry, offer: OfferIceSections): boolean {
  return entry.username_fragment !== undefined && offer.ufrags.size > 0 && !offer.ufrags.has(entry.username_fragment);
}

/** Adds checked candidates (and the end-of-candidates mark) to a peer whose remote offer is applied. */
export async function addTrickledCandidates(
  pc: RTCPeerConnection,
  candidates: readonly IceCandidateEntry[],
  endOfCandidates: boolean,
): Promise<void> {
  for (const [index, entry] of candidates.entries()) {
    await nominationSettled(pc);
    try {
      await pc.addIceCandidate({
        candidate: entry.candidate,
        ...(entry.sdp_mid !== undefined ? { sdpMid: entry.sdp_mid } : {}),
        ...(entry.sdp_m_line_index !== undefined ? { sdpMLineIndex: entry.sdp_m_line_index } : {}),
      });
    } catch (error) {
      throw new ArclightError('invalid_request', `The candidate could not be added: ${(error as Error).message}`, {
        field: `/candidates/${index}`,
        cause: error,
      });
    }
  }
  // werift reads an empty candidate as end-of-candidates for every m-line of the bundle.
  if (endOfCandidates) await pc.addIceCandidate({ candidate: '' }).catch(() => {});
}

/**
 * werift agent states before its checks end: `new`, and `completed` — which werift 0.24 sets when
 * its own gathering completes, before `connected` — not ICE's "completed".
 */
const CHECKING_STATES: ReadonlySet<string> = new Set(['new', 'completed']);

/**
 * Resolves once no ICE agent of the peer is between nominating a pair and reporting `connected`.
 *
 * werift 0.24's agent goes on checking every pair it holds after it has nominated one, one check
 * every 20 ms, and reports `connected` — which starts DTLS — only when none is left. A candidate
 * trickled into that window (our client sends its offer at its first candidate and trickles the
 * rest) adds pairs that hold DTLS back, and libwebrtc's ClientHello, sent when its side is up, is
 * then lost and resent on its back-off: 100–400 ms more to ready, measured. Such a candidate
 * cannot change the outcome — the pair is nominated — so it waits until the agent is done and is
 * added then, as before. Before a nomination candidates go in at once: one may be the only path.
 */
export function nominationSettled(pc: RTCPeerConnection): Promise<void> {
  const busy = pc.iceTransports
    .map((transport) => transport.connection)
    .filter((connection) => connection.nominated !== undefined && CHECKING_STATES.has(connection.state));
  return Promise.all(
    busy.map(
      (connection) =>
        new Promise<void>((resolve) => {
          const { unSubscribe } = connection.stateChanged.subscribe((state) => {
            if (CHECKING_STATES.has(state)) return;
            unSubscribe();
            resolve();
          });
        }),
    ),
  ).then(() => {});
}
