/**
 * Retransmission timing for werift's SCTP association (the data channel's transport).
 *
 * werift uses RFC 4960's original values: an initial RTO of 3 s and a floor of 1 s. Observed
 * here (werift 0.24.4 ↔ libwebrtc): the first DATA chunk werift sends on a fresh association
 * (the DCEP ACK) is often not acknowledged, and later messages on the channel are not delivered
 * until it is retransmitted — 3 s after the channel opened. A model's greeting, a command reply,
 * or a session-ended notice then arrives seconds late or not at all. RFC 9260 allows an initial
 * RTO of 1 s; on the low-RTT paths a runtime serves, libwebrtc's own SCTP uses far shorter
 * timers. We start at 200 ms with a 100 ms floor, and keep werift's back-off and 60 s ceiling.
 *
 * werift keeps these fields private in its typings, so this reaches them structurally and
 * does nothing if a werift upgrade renames them (the e2e test of the session-ended notice
 * would then fail and point here).
 */

import type { RTCPeerConnection } from 'werift';

const INITIAL_RTO_SECONDS = 0.2;
const MIN_RTO_SECONDS = 0.1;
const MAX_RTO_SECONDS = 60;

interface SctpTimers {
  rto: number;
  srtt?: number;
  rttvar?: number;
  flightSize?: number;
  outboundQueue?: unknown[];
  updateRto?: (rttSeconds: number) => void;
}

function association(pc: RTCPeerConnection): SctpTimers | undefined {
  const sctp = (pc.sctpTransport as { sctp?: unknown } | undefined)?.sctp as SctpTimers | undefined;
  return sctp && typeof sctp.rto === 'number' ? sctp : undefined;
}

/** Call once the remote description is set (the association exists, not yet started). */
export function tuneSctpRetransmission(pc: RTCPeerConnection): void {
  const sctp = association(pc);
  if (!sctp) return;
  sctp.rto = INITIAL_RTO_SECONDS;
  // RFC 9260 §6.3.1 estimator with our floor instead of werift's 1 s.
  sctp.updateRto = function updateRto(this: SctpTimers, r: number): void {
    if (this.srtt === undefined) {
      this.rttvar = r / 2;
      this.srtt = r;
    } else {
      this.rttvar = (3 / 4) * (this.rttvar ?? 0) + (1 / 4) * Math.abs((this.srtt ?? 0) - r);
      this.srtt = (7 / 8) * this.srtt + (1 / 8) * r;
    }
    this.rto = Math.max(MIN_RTO_SECONDS, Math.min(this.srtt + 4 * (this.rttvar ?? 0), MAX_RTO_SECONDS));
  };
}

/** Resolves once every data-channel message sent so far is acknowledged, or after `timeoutMs`. */
export async function drainDataChannel(pc: RTCPeerConnection, timeoutMs: number): Promise<void> {
  const sctp = association(pc);
  if (!sctp || sctp.flightSize === undefined) return;
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline && ((sctp.flightSize ?? 0) > 0 || (sctp.outboundQueue?.length ?? 0) > 0)) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/**
 * Closes a runtime peer so the client notices at once. werift's close() alone leaves a libwebrtc
 * client on a frozen picture until ICE consent runs out (about 6 s here): it shuts DTLS before
 * SCTP, so nothing reaches the client. Closing the data channel first (an SCTP stream reset the
 * client acts on: its channel closes within tens of milliseconds), then SCTP, then the peer
 * fixes that for clients that watch their channel (ours does; 2.9.0 only watches the peer).
 */
export async function closePeer(pc: RTCPeerConnection, channel?: { readyState: string; close(): void }): Promise<void> {
  try {
    if (channel?.readyState === 'open') {
      channel.close();
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await pc.sctpTransport?.stop();
  } catch {
    // the association may already be gone
  }
  await pc.close();
}
