/**
 * Faults a test injects into the runtime's werift peers: outgoing RTP loss, a network
 * impairment of every datagram (network-faults.ts), and a blackhole that drops everything a peer
 * sends. Test-only, and kept here with the other injectors (encoder-faults.ts, network-faults.ts)
 * so no production option type names them: tests start a runtime with them through
 * `startRuntimeWithFaults` (start-runtime-with-faults.ts), which hands them to the werift adapter.
 */

import type { RTCPeerConnection } from 'werift';
import { impairPeer, type NetworkFaults } from './network-faults.ts';

/**
 * Faults injected into a runtime peer (tests only).
 *
 * Not werift's own `PeerConfig.debug.outboundPacketLoss`: in werift 0.24.4 that drops a packet
 * when `percent / 100 < Math.random()`, i.e. it drops (100 − percent) % of them, and it applies
 * to every DTLS/SRTP/SRTCP send, the data channel's SCTP included.
 */
export interface PeerFaults {
  /**
   * Drops this percentage (0–100) of outgoing RTP packets, at random, retransmissions
   * included. Applied as a packet goes to the socket, so a dropped packet is still in the NACK
   * history and can be retransmitted; RTCP, DTLS and SCTP (the data channel) are never dropped.
   */
  readonly outboundRtpLossPercent?: number;
  /**
   * Loss, delay and blackouts for every datagram the peer sends and receives, switchable while
   * the session runs (see network-faults.ts). One object may impair all peers of a runtime.
   */
  readonly network?: NetworkFaults;
  /**
   * Sends no resends at all: NACKs and reported losses go unanswered (and nothing is numbered for
   * them), so only forward error correction can repair a loss (test/e2e/flexfec.browser.test.ts).
   */
  readonly noResends?: boolean;
}

const RTP_LOSS = Symbol('arclight.rtpLoss');
const NO_RESENDS = Symbol('arclight.noResends');

/** A DTLS transport that may carry the RTP loss and no-resend faults. */
type FaultyTransport = object & { [RTP_LOSS]?: () => boolean; [NO_RESENDS]?: boolean };

/**
 * Applies `faults` to a negotiated peer (call after the answer: werift creates its DTLS
 * transports while applying the descriptions). Safe to call more than once.
 */
export function applyPeerFaults(pc: RTCPeerConnection, faults: PeerFaults | undefined, random: () => number = Math.random): void {
  if (faults?.network) impairPeer(pc, faults.network);
  if (faults?.noResends) for (const transport of pc.dtlsTransports) (transport as FaultyTransport)[NO_RESENDS] = true;
  const percent = faults?.outboundRtpLossPercent ?? 0;
  if (!(percent > 0)) return;
  const probability = Math.min(percent, 100) / 100;
  for (const transport of pc.dtlsTransports) {
    (transport as FaultyTransport)[RTP_LOSS] = () => random() < probability;
  }
}

/**
 * The RTP loss fault of a DTLS transport, if one was applied: a draw per packet, true = drop.
 * The runtime's RTP senders (rtp-track-sender.ts) draw for every packet they write, first
 * sends and retransmissions alike, after the packet is in their NACK history.
 */
export function rtpLossFault(transport: object): (() => boolean) | undefined {
  return (transport as FaultyTransport)[RTP_LOSS];
}

/** Whether the no-resend fault was applied to a DTLS transport (the loss repair sends nothing then). */
export function noResendsFault(transport: object): boolean {
  return (transport as FaultyTransport)[NO_RESENDS] === true;
}

/**
 * Test fault switch (the idea of LiveKit's `simulateScenario`): from now on every datagram this
 * peer sends — STUN, DTLS, SCTP, SRTP — is dropped, as when the network between runtime and
 * client breaks. The client's ICE then sees no answers and goes `disconnected`, which is how a
 * real, recoverable network drop looks to it (closing the peer instead makes the client's next
 * packets draw ICMP port-unreachable errors, which libwebrtc may turn into a fatal `failed`).
 */
export function blackholePeer(pc: RTCPeerConnection): void {
  for (const transport of pc.dtlsTransports) (transport as FaultyTransport)[RTP_LOSS] = () => true;
  for (const ice of pc.iceTransports) {
    const protocols = (ice.connection as unknown as { protocols?: Array<{ transport?: { send?: unknown } }> }).protocols ?? [];
    for (const protocol of protocols) {
      if (protocol.transport && typeof protocol.transport.send === 'function') protocol.transport.send = async () => {};
    }
  }
}
