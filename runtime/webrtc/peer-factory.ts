/**
 * Creates the runtime's werift peer connections with the codecs and header extensions Arclight
 * streams with.
 */

import {
  RTCDtlsTransport,
  RTCPeerConnection,
  RTCRtpCodecParameters,
  RTCRtpHeaderExtensionParameters,
  useNACK,
  usePLI,
  useREMB,
} from 'werift';
import type { IceServerEntry } from '../../protocol/transport.ts';
import type { IcePolicy } from './ice-policy.ts';
import { impairPeer, type NetworkFaults } from './network-faults.ts';

/** RTP header extension asking the receiver to render without a jitter buffer delay. */
export const PLAYOUT_DELAY_URI = 'http://www.webrtc.org/experiments/rtp-hdrext/playout-delay';

/**
 * SCTP max-message-size advertised to clients. Larger than the application limit on purpose:
 * an oversized message must reach the runtime so it can answer with a correlated
 * `message_too_large` instead of the browser silently refusing to send.
 */
export const SCTP_MAX_MESSAGE_SIZE = 1024 * 1024;

export interface PeerFactoryOptions {
  readonly icePolicy: IcePolicy;
  readonly iceServers: readonly IceServerEntry[];
  /** Deliberate impairments, for tests of loss recovery and quality reporting. Default none. */
  readonly faults?: PeerFaults;
  /**
   * Output video codecs in order of preference; each client gets the first one it offers.
   * Default `['h264', 'vp8']`, with `h265` first when its encoder backend is hardware.
   */
  readonly videoCodecs?: readonly VideoCodecPreference[];
}

export type VideoCodecPreference = 'h264' | 'h265' | 'vp8';

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
}

export function createRuntimePeer(options: PeerFactoryOptions): RTCPeerConnection {
  // goog-remb: receivers report their bandwidth estimate, which output tracks adapt to.
  const feedback = () => [useNACK(), usePLI(), useREMB()];
  const { icePolicy } = options;
  const restricted = icePolicy.restricted;
  return new RTCPeerConnection({
    codecs: {
      // Order is preference: H.264 for browsers (hardware decode everywhere), VP8 for peers
      // without H.264 (libwebrtc builds such as @roamhq/wrtc).
      video: [
        new RTCRtpCodecParameters({
          mimeType: 'video/H264',
          clockRate: 90000,
          rtcpFeedback: feedback(),
          parameters: 'level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f',
        }),
        // Main profile, level 3.1 up to 1440p; offered to clients that can take H.265 (Safari).
        new RTCRtpCodecParameters({
          mimeType: 'video/H265',
          clockRate: 90000,
          rtcpFeedback: feedback(),
          parameters: 'level-id=93;profile-id=1;tier-flag=0;tx-mode=SRST',
        }),
        new RTCRtpCodecParameters({ mimeType: 'video/VP8', clockRate: 90000, rtcpFeedback: feedback() }),
      ],
      // werift fails negotiation when an offered m-line has no codec, so Opus is always configured.
      audio: [
        new RTCRtpCodecParameters({
          mimeType: 'audio/opus',
          clockRate: 48000,
          channels: 2,
          parameters: 'minptime=10;useinbandfec=1',
        }),
      ],
    },
    headerExtensions: {
      // Always negotiated: it carries the session's latency mode, which can change mid-session.
      video: [new RTCRtpHeaderExtensionParameters({ uri: PLAYOUT_DELAY_URI })],
      audio: [],
    },
    iceServers: options.iceServers.map((server) => ({
      urls: [...server.uris],
      ...(server.credentials ? { username: server.credentials.username, credential: server.credentials.password } : {}),
    })),
    iceUseIpv6: !restricted,
    ...(restricted
      ? {
          iceAdditionalHostAddresses: [...icePolicy.hostAddresses],
          iceInterfaceAddresses: { udp4: icePolicy.hostAddresses[0] },
        }
      : {}),
    ...(icePolicy.portRange ? { icePortRange: [icePolicy.portRange[0], icePolicy.portRange[1]] as [number, number] } : {}),
    iceFilterCandidatePair: (pair) => icePolicy.allowsRemote(pair.remoteCandidate.host),
    maxMessageSize: SCTP_MAX_MESSAGE_SIZE,
  });
}

/**
 * Makes the process's DTLS certificate now. werift keeps one certificate (ECDSA P-256,
 * self-signed) per process for every peer and makes it on first use — inside the first
 * client's connect, where it cost a few tens of milliseconds (more on a loaded machine). The runtime
 * calls this at start, so no offer waits for it; later calls return the same certificate.
 */
export async function prepareDtlsCertificate(): Promise<{ readonly fingerprints: readonly { readonly value: string }[] }> {
  const certificate = await RTCDtlsTransport.SetupCertificate();
  return { fingerprints: certificate.getFingerprints() };
}

const RTP_LOSS = Symbol('arclight.rtpLoss');

/** A DTLS transport that may carry the RTP loss fault. */
type FaultyTransport = object & { [RTP_LOSS]?: () => boolean };

/**
 * Applies `faults` to a negotiated peer (call after the answer: werift creates its DTLS
 * transports while applying the descriptions). Safe to call more than once.
 */
export function applyPeerFaults(pc: RTCPeerConnection, faults: PeerFaults | undefined, random: () => number = Math.random): void {
  if (faults?.network) impairPeer(pc, faults.network);
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
