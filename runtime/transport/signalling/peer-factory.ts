/**
 * Creates the runtime's werift peer connections with the codecs and header extensions Arclight
 * streams with.
 */

import {
  RTCDtlsTransport,
  RTCPeerConnection,
  RTCRtpCodecParameters,
  RTCRtpHeaderExtensionParameters,
  type RTCRtpSender,
  useNACK,
  usePLI,
  useREMB,
  useTWCC,
} from 'werift';
import type { IceServerEntry } from '../../../protocol/transport.ts';
import type { VideoCodec } from '../../media/video-encoder.ts';
import type { IcePolicy } from './ice-policy.ts';
import { TRANSPORT_WIDE_CC_URI } from '../send/transport-feedback.ts';

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
  /**
   * Output video codecs in order of preference; each client gets the first one it offers.
   * Default `['h264', 'vp8']`, with `h265` first when its encoder backend is hardware.
   */
  readonly videoCodecs?: readonly VideoCodec[];
}

export function createRuntimePeer(options: PeerFactoryOptions): RTCPeerConnection {
  // transport-cc: receivers report each packet's arrival (transport-wide feedback), from which
  // the send path estimates the path's rate (send/congestion-controller.ts); goog-remb: receivers
  // that only report their own estimate (REMB) are followed by that, as before.
  const feedback = () => [useNACK(), usePLI(), useREMB(), useTWCC()];
  // RTX (RFC 4588) after each video codec: werift numbers it (apt = the codec before it), answers
  // an offer's rtx with `a=ssrc-group:FID <media> <rtx>`, and the send path resends NACKed packets
  // on that SSRC (send/rtp-track-sender.ts).
  const rtx = () => new RTCRtpCodecParameters({ mimeType: 'video/rtx', clockRate: 90000 });
  const { icePolicy } = options;
  const restricted = icePolicy.restricted;
  const pc = new RTCPeerConnection({
    codecs: {
      // Order is preference: H.264 for browsers (hardware decode everywhere), VP8 for peers
      // without H.264 (libwebrtc builds such as @roamhq/wrtc). Each is followed by its RTX.
      video: [
        new RTCRtpCodecParameters({
          mimeType: 'video/H264',
          clockRate: 90000,
          rtcpFeedback: feedback(),
          parameters: 'level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f',
        }),
        rtx(),
        // Main profile, level 3.1 up to 1440p; offered to clients that can take H.265 (Safari).
        new RTCRtpCodecParameters({
          mimeType: 'video/H265',
          clockRate: 90000,
          rtcpFeedback: feedback(),
          parameters: 'level-id=93;profile-id=1;tier-flag=0;tx-mode=SRST',
        }),
        rtx(),
        new RTCRtpCodecParameters({ mimeType: 'video/VP8', clockRate: 90000, rtcpFeedback: feedback() }),
        rtx(),
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
      // playout-delay: always negotiated: it carries the session's latency mode, which can change
      // mid-session. transport-wide-cc: every video packet's transport-wide sequence number, which
      // the receiver's transport-cc feedback reports on.
      video: [
        new RTCRtpHeaderExtensionParameters({ uri: PLAYOUT_DELAY_URI }),
        new RTCRtpHeaderExtensionParameters({ uri: TRANSPORT_WIDE_CC_URI }),
      ],
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
  // With RTX a video m-line announces two SSRCs (media and RTX, `a=ssrc-group:FID`); libwebrtc
  // takes SSRCs without an msid for separate tracks and refuses such an answer under Unified Plan.
  // `a=msid:arclight <track>` ties both to the transceiver's one track, and every track to one
  // stream, so receivers synchronise audio and video (clients' track events now carry that
  // stream). Inactive sections lose their SSRC lines in the answer (inactive-sections.ts).
  pc.onTransceiverAdded.subscribe((transceiver) => {
    if (transceiver.sender.streamIds.length === 0) transceiver.sender.streamIds = [SESSION_STREAM_MSID];
    routeRtxFeedback(pc, transceiver.sender);
  });
  return pc;
}

/**
 * Routes RTCP that names a sender's RTX SSRC to that sender. libwebrtc's transport-wide
 * feedback names the SSRC of the last packet it got before sending it: after an RTX packet (a
 * resend, or a bandwidth probe's padding) that is the RTX SSRC, which werift's router does not
 * know, so it dropped the feedback — and the congestion controller never heard of the packets it
 * covered (a probe's cluster lost most of its feedback). werift's router keys senders by SSRC in
 * a plain table; RTX gets the same entry as the media SSRC (werift filters receiver reports by the
 * media SSRC itself, so an RTX stream's reports change nothing).
 */
function routeRtxFeedback(pc: RTCPeerConnection, sender: RTCRtpSender): void {
  const router = (pc as unknown as { router?: { ssrcTable?: Record<number, unknown> } }).router;
  const rtxSsrc = (sender as unknown as { rtxSsrc?: number }).rtxSsrc;
  if (router?.ssrcTable !== undefined && rtxSsrc !== undefined) router.ssrcTable[rtxSsrc] = sender;
}

/**
 * One msid stream for every track the runtime sends: receivers keep the tracks of one stream in
 * one A/V sync group (with "-", no stream, Chromium synchronised nothing).
 */
const SESSION_STREAM_MSID = 'arclight';

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
