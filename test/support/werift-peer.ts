/**
 * A werift client peer for RTP-level tests: it offers exactly the codecs and header extensions
 * a test names (e.g. H.265, which no browser here has), negotiates with the runtime over the
 * 2.9.0 signalling on loopback, and exposes the raw RTP of the output video track.
 */
import {
  RTCPeerConnection,
  RTCRtpCodecParameters,
  RTCRtpHeaderExtensionParameters,
  useNACK,
  usePLI,
  type RTCDataChannel,
  type RTCRtpTransceiver,
  type RtpPacket,
} from 'werift';
import type { SessionResponse } from '../../protocol/session.ts';
import type { VideoFrame } from '../../runtime/media/frames.ts';
import { VideoDecoder } from '../../runtime/media/video-decoder.ts';
import type { DepacketizedFrame } from '../../runtime/transport/rtp/depacketized-frame.ts';
import { H264Depacketizer } from '../../runtime/transport/rtp/h264-depacketizer.ts';
import { H265Depacketizer } from '../../runtime/transport/rtp/h265-depacketizer.ts';
import { waitUntil } from './video-probe.ts';

const LOOPBACK = '127.0.0.1';

export interface WeriftPeer {
  readonly pc: RTCPeerConnection;
  readonly session: SessionResponse;
  /** The transceiver of the session's first output video track. */
  readonly video: RTCRtpTransceiver;
  readonly channel: RTCDataChannel;
  /** Negotiated header extension ids by URI. */
  readonly extensionIds: ReadonlyMap<string, number>;
  /** Calls `listener` for every RTP packet of the output video, whether its track exists yet or not. */
  onVideoRtp(listener: (rtp: RtpPacket) => void): void;
  /** The transceiver of the model track with this name. */
  transceiver(track: string): RTCRtpTransceiver;
  /** Like `onVideoRtp`, for any track by name. */
  onTrackRtp(track: string, listener: (rtp: RtpPacket) => void): void;
  close(): Promise<void>;
}

export async function openWeriftPeer(
  runtimeUrl: string,
  options: { videoMime: string; videoParameters?: string; headerExtensions?: string[] },
): Promise<WeriftPeer> {
  const session = (await (await fetch(`${runtimeUrl}/start_session`, { method: 'POST', body: '{}' })).json()) as SessionResponse;
  const pc = new RTCPeerConnection({
    codecs: {
      video: [
        new RTCRtpCodecParameters({
          mimeType: options.videoMime,
          clockRate: 90000,
          rtcpFeedback: [useNACK(), usePLI()],
          ...(options.videoParameters ? { parameters: options.videoParameters } : {}),
        }),
      ],
      audio: [new RTCRtpCodecParameters({ mimeType: 'audio/opus', clockRate: 48000, channels: 2 })],
    },
    headerExtensions: { video: (options.headerExtensions ?? []).map((uri) => new RTCRtpHeaderExtensionParameters({ uri })), audio: [] },
    iceServers: [],
    iceUseIpv6: false,
    iceAdditionalHostAddresses: [LOOPBACK],
    iceInterfaceAddresses: { udp4: LOOPBACK },
    iceFilterCandidatePair: (pair) => pair.remoteCandidate.host === LOOPBACK,
  });
  const channel = pc.createDataChannel('data');
  const transceivers = session.capabilities.tracks.map((t) => pc.addTransceiver(t.kind, { direction: t.direction }));
  await pc.setLocalDescription(await pc.createOffer());
  await waitUntil(() => pc.iceGatheringState === 'complete', 5_000, 'ICE gathering');
  const transport = `${runtimeUrl}/sessions/${session.session_id}/transport/webrtc`;
  const offered = await fetch(`${transport}/sdp_params`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      sdp_offer: pc.localDescription!.sdp,
      track_mapping: session.capabilities.tracks.map((t, i) => ({
        mid: transceivers[i]!.mid,
        name: t.name,
        kind: t.kind,
        direction: t.direction,
      })),
    }),
  });
  if (offered.status !== 202) throw new Error(`offer refused: ${offered.status} ${await offered.text()}`);
  const { sdp_answer } = (await (await fetch(`${transport}/sdp_params`)).json()) as { sdp_answer: string };
  await pc.setRemoteDescription({ type: 'answer', sdp: sdp_answer });
  const extensionIds = new Map<string, number>();
  for (const line of sdp_answer.split('\r\n')) {
    const match = /^a=extmap:(\d+) (\S+)/.exec(line);
    if (match) extensionIds.set(match[2]!, Number(match[1]));
  }
  const index = session.capabilities.tracks.findIndex((t) => t.kind === 'video' && t.direction === 'recvonly');
  await waitUntil(() => channel.readyState === 'open', 10_000, 'the data channel');
  const video = transceivers[index]!;
  const transceiver = (name: string): RTCRtpTransceiver => {
    const at = session.capabilities.tracks.findIndex((t) => t.name === name);
    if (at < 0) throw new Error(`the model has no track ${name}`);
    return transceivers[at]!;
  };
  const subscribeRtp = (target: RTCRtpTransceiver, listener: (rtp: RtpPacket) => void): void => {
    for (const track of target.receiver.tracks) track.onReceiveRtp.subscribe((rtp) => listener(rtp));
    target.onTrack.subscribe((track) => track.onReceiveRtp.subscribe((rtp) => listener(rtp)));
  };
  return {
    pc,
    session,
    video,
    channel,
    extensionIds,
    onVideoRtp: (listener) => subscribeRtp(video, listener),
    transceiver,
    onTrackRtp: (name, listener) => subscribeRtp(transceiver(name), listener),
    close: () => pc.close(),
  };
}

/**
 * Depacketizes and decodes (node-av) a peer's video track as it arrives, asking for a keyframe
 * (PLI) whenever the depacketizer lost the picture. `onFrame` gets each decoded picture with the
 * RTP timestamp and first bytes (Annex-B access unit / VP8 frame) it was decoded from.
 */
export async function decodeTrack(
  peer: WeriftPeer,
  track: string,
  codec: 'h264' | 'h265',
  onFrame: (frame: VideoFrame, unit: DepacketizedFrame) => void,
): Promise<{ close(): void }> {
  const depacketizer = codec === 'h264' ? new H264Depacketizer() : new H265Depacketizer();
  const decoder = await VideoDecoder.create(codec);
  const transceiver = peer.transceiver(track);
  let chain = Promise.resolve();
  peer.onTrackRtp(track, (rtp) => {
    const unit = depacketizer.push({
      payload: rtp.payload,
      marker: rtp.header.marker,
      sequenceNumber: rtp.header.sequenceNumber,
      timestamp: rtp.header.timestamp,
    });
    if (depacketizer.needsKeyframe) void transceiver.receiver.sendRtcpPLI(rtp.header.ssrc);
    if (!unit) return;
    chain = chain
      .then(async () => {
        for (const frame of await decoder.decode(unit.data)) onFrame(frame, unit);
      })
      .catch(() => {});
  });
  return { close: () => void chain.then(() => decoder.close()) };
}
