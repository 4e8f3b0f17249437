/**
 * A viewer that costs the benchmark process as little as a viewer can: a werift peer that
 * negotiates one video codec (H.264 Constrained Baseline, `profile-level-id=42e01f`,
 * packetization-mode 1 — what Chromium gets — or VP8), receives the session's first output video
 * track and counts what arrives from the RTP alone: a frame per new RTP timestamp (a resent packet
 * of an older frame does not count), payload bytes. Nothing is depacketized or decoded, so a sweep
 * of many runtimes measures the runtimes, not the viewers' decoders (a wrtc Node viewer decodes
 * VP8 in this process; wrtc has no H.264 at all).
 *
 * The signalling is test/support/werift-peer.ts's (POST /start_session, then the offer with a
 * track mapping to /sessions/<id>/transport/webrtc/sdp_params), with the host to use as a parameter
 * (werift-peer.ts is loopback only) and every output track but that video asked to start paused
 * (`paused_tracks`: e.g. `pattern`'s tone is not sent, nor recorded).
 */

import {
  RTCPeerConnection,
  RTCRtpCodecParameters,
  useNACK,
  usePLI,
  type RTCDataChannel,
  type RTCRtpTransceiver,
  type RtpPacket,
} from 'werift';
import type { SessionResponse } from '../../protocol/session.ts';
import { sleep } from './measure.ts';

/** What Chromium's H.264 offer carries for Constrained Baseline. */
export const H264_CONSTRAINED_BASELINE = 'level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f';

export type RtpViewerCodec = 'h264' | 'vp8';

export interface RtpReceived {
  /** Frames seen: RTP timestamps newer than the last counted one. */
  frames: number;
  /** RTP payload bytes (resent packets included). */
  bytes: number;
  packets: number;
}

export interface RtpViewer {
  readonly sessionId: string;
  readonly codec: RtpViewerCodec;
  /** The negotiated video codec line from the answer, e.g. `H264/90000 …profile-level-id=42e01f`. */
  readonly negotiated: string;
  /** Counters since the viewer opened. */
  received(): RtpReceived;
  close(): Promise<void>;
}

async function waitFor(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(20);
  }
}

/** The `a=rtpmap` / `a=fmtp` of the first video payload type in an SDP answer, for the report. */
function negotiatedVideo(sdp: string): string {
  const lines = sdp.split('\r\n');
  const at = lines.findIndex((l) => l.startsWith('m=video'));
  if (at < 0) return '?';
  const pt = lines[at]!.split(' ')[3];
  const rtpmap = lines.find((l) => l.startsWith(`a=rtpmap:${pt} `))?.split(' ')[1] ?? '?';
  const fmtp = lines.find((l) => l.startsWith(`a=fmtp:${pt} `))?.split(' ')[1];
  return fmtp ? `${rtpmap} ${fmtp}` : rtpmap;
}

/**
 * Opens a session on the runtime at `runtimeUrl` (listening for ICE on `host`), or joins session
 * `sessionId` when given, and receives its first output video track in `codec`; resolves once the
 * data channel is open.
 */
export async function openRtpViewer(runtimeUrl: string, host: string, codec: RtpViewerCodec, sessionId?: string): Promise<RtpViewer> {
  const session = (await (
    sessionId === undefined
      ? await fetch(`${runtimeUrl}/start_session`, { method: 'POST', body: '{}' })
      : await fetch(`${runtimeUrl}/sessions/${encodeURIComponent(sessionId)}`)
  ).json()) as SessionResponse;
  const pc = new RTCPeerConnection({
    codecs: {
      video: [
        codec === 'h264'
          ? new RTCRtpCodecParameters({
              mimeType: 'video/H264',
              clockRate: 90000,
              rtcpFeedback: [useNACK(), usePLI()],
              parameters: H264_CONSTRAINED_BASELINE,
            })
          : new RTCRtpCodecParameters({ mimeType: 'video/VP8', clockRate: 90000, rtcpFeedback: [useNACK(), usePLI()] }),
      ],
      audio: [new RTCRtpCodecParameters({ mimeType: 'audio/opus', clockRate: 48000, channels: 2 })],
    },
    headerExtensions: { video: [], audio: [] },
    iceServers: [],
    iceUseIpv6: false,
    iceAdditionalHostAddresses: [host],
    iceInterfaceAddresses: { udp4: host },
    iceFilterCandidatePair: (pair) => pair.remoteCandidate.host === host,
  });
  let closed = false;
  try {
    const channel: RTCDataChannel = pc.createDataChannel('data');
    const tracks = session.capabilities.tracks;
    const transceivers = tracks.map((t) => pc.addTransceiver(t.kind, { direction: t.direction }));
    const videoAt = tracks.findIndex((t) => t.kind === 'video' && t.direction === 'recvonly');
    if (videoAt < 0) throw new Error('the model has no output video track');
    await pc.setLocalDescription(await pc.createOffer());
    await waitFor(() => pc.iceGatheringState === 'complete', 5_000, 'ICE gathering');
    const transport = `${runtimeUrl}/sessions/${session.session_id}/transport/webrtc`;
    const offered = await fetch(`${transport}/sdp_params`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        sdp_offer: pc.localDescription!.sdp,
        track_mapping: tracks.map((t, i) => ({ mid: transceivers[i]!.mid, name: t.name, kind: t.kind, direction: t.direction })),
        paused_tracks: tracks.filter((t, i) => t.direction === 'recvonly' && i !== videoAt).map((t) => t.name),
      }),
    });
    if (offered.status !== 202) throw new Error(`offer refused: ${offered.status} ${await offered.text()}`);
    const { sdp_answer } = (await (await fetch(`${transport}/sdp_params`)).json()) as { sdp_answer: string };
    await pc.setRemoteDescription({ type: 'answer', sdp: sdp_answer });
    await waitFor(() => channel.readyState === 'open', 15_000, 'the data channel');

    const counts: RtpReceived = { frames: 0, bytes: 0, packets: 0 };
    let last: number | undefined;
    const onRtp = (rtp: RtpPacket): void => {
      counts.packets++;
      counts.bytes += rtp.payload.length;
      const ts = rtp.header.timestamp;
      // Newer than the last counted frame (modulo 2^32): a new frame; older or equal: a packet of a
      // frame already counted (its later packets, or a resent one).
      if (last === undefined || (ts !== last && (ts - last) >>> 0 < 0x80000000)) {
        counts.frames++;
        last = ts;
      }
    };
    const video: RTCRtpTransceiver = transceivers[videoAt]!;
    for (const track of video.receiver.tracks) track.onReceiveRtp.subscribe(onRtp);
    video.onTrack.subscribe((track) => track.onReceiveRtp.subscribe(onRtp));
    return {
      sessionId: session.session_id,
      codec,
      negotiated: negotiatedVideo(sdp_answer),
      received: () => ({ ...counts }),
      close: async () => {
        if (closed) return;
        closed = true;
        await pc.close().catch(() => {});
      },
    };
  } catch (error) {
    closed = true;
    await pc.close().catch(() => {});
    throw error;
  }
}
