/**
 * Which client peer a renegotiation offer (`PUT sdp_params`) comes from, judged against the offer
 * the connection's current runtime peer answered. A peer is known by its DTLS certificate
 * (`a=fingerprint`), which an RTCPeerConnection keeps for its whole life; its ICE credentials
 * (`a=ice-ufrag`/`a=ice-pwd`) change only on an ICE restart.
 *
 *   same fingerprint, same ufrag and pwd  → 'same-peer'    answered in place on the current peer
 *   same fingerprint, new ufrag or pwd    → 'ice-restart'  answered by a fresh runtime peer
 *   another fingerprint (or none to tell) → 'fresh-peer'   answered by a fresh runtime peer
 */

export type OfferOrigin = 'same-peer' | 'ice-restart' | 'fresh-peer';

/** What identifies the client peer that wrote an SDP description. */
export interface PeerIdentity {
  /** Every `a=fingerprint` (session or media level), normalised, sorted, deduplicated. */
  readonly fingerprints: readonly string[];
  /** The first `a=ice-ufrag` / `a=ice-pwd` (one transport: the client bundles). */
  readonly iceUfrag: string | undefined;
  readonly icePwd: string | undefined;
}

export function peerIdentity(sdp: string): PeerIdentity {
  const fingerprints = new Set<string>();
  let iceUfrag: string | undefined;
  let icePwd: string | undefined;
  for (const line of sdp.split(/\r?\n/)) {
    if (line.startsWith('a=fingerprint:')) fingerprints.add(line.slice(14).trim().replace(/\s+/g, ' ').toLowerCase());
    else if (line.startsWith('a=ice-ufrag:')) iceUfrag ??= line.slice(12).trim();
    else if (line.startsWith('a=ice-pwd:')) icePwd ??= line.slice(10).trim();
  }
  return { fingerprints: [...fingerprints].sort(), iceUfrag, icePwd };
}

/** `current`: the offer the connection's live runtime peer answered (undefined: none). */
export function offerOrigin(current: string | undefined, offer: string): OfferOrigin {
  if (current === undefined) return 'fresh-peer';
  const before = peerIdentity(current);
  const after = peerIdentity(offer);
  // Without fingerprints on both sides there is no telling peers apart: a fresh peer is the safe reading.
  if (before.fingerprints.length === 0 || after.fingerprints.length === 0) return 'fresh-peer';
  if (before.fingerprints.join('\n') !== after.fingerprints.join('\n')) return 'fresh-peer';
  if (before.iceUfrag !== after.iceUfrag || before.icePwd !== after.icePwd) return 'ice-restart';
  return 'same-peer';
}
