/**
 * H.265 end to end at the RTP level: a client that offers H.265 (here a werift peer, as this
 * Chromium has none) gets the runtime's output as H.265 RTP; the payloads depacketize (RFC 7798)
 * and decode with node-av to the picture the model drew.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RTCPeerConnection, RTCRtpCodecParameters, useNACK, usePLI } from 'werift';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import { H265Depacketizer } from '../../runtime/rtp/h265-depacketizer.ts';
import { VideoDecoder } from '../../runtime/media/video-decoder.ts';
import type { SessionResponse } from '../../protocol/session.ts';
import pattern, { PATCH } from '../../models/examples/pattern/index.ts';
import { rgbToYuv } from '../../models/examples/shared/i420-canvas.ts';
import { waitUntil } from '../support/video-probe.ts';

const LOOPBACK = '127.0.0.1';

describe('H.265 to a client that offers it', () => {
  let runtime: Runtime;
  let client: RTCPeerConnection | undefined;
  beforeAll(async () => {
    runtime = await startRuntime({
      model: pattern as never,
      port: 0,
      host: LOOPBACK,
      ice: { hostAddresses: [LOOPBACK] },
      videoCodecs: ['h265', 'h264', 'vp8'],
    });
  });
  afterAll(async () => {
    await client?.close();
    await runtime?.close();
  });

  it('streams H.265 RTP that depacketizes and decodes to the model picture', async () => {
    const session = (await (await fetch(`${runtime.url}/start_session`, { method: 'POST', body: '{}' })).json()) as SessionResponse;
    client = new RTCPeerConnection({
      codecs: {
        video: [new RTCRtpCodecParameters({ mimeType: 'video/H265', clockRate: 90000, rtcpFeedback: [useNACK(), usePLI()] })],
        audio: [new RTCRtpCodecParameters({ mimeType: 'audio/opus', clockRate: 48000, channels: 2 })],
      },
      iceServers: [],
      iceUseIpv6: false,
      iceAdditionalHostAddresses: [LOOPBACK],
      iceInterfaceAddresses: { udp4: LOOPBACK },
      iceFilterCandidatePair: (pair) => pair.remoteCandidate.host === LOOPBACK,
    });
    client.createDataChannel('data');
    const video = client.addTransceiver('video', { direction: 'recvonly' });
    client.addTransceiver('audio', { direction: 'recvonly' });

    const depacketizer = new H265Depacketizer();
    const decoder = await VideoDecoder.create('h265');
    let decoded = 0;
    let centre: { y: number; u: number; v: number } | undefined;
    let chain = Promise.resolve();
    video.onTrack.subscribe((track) => {
      track.onReceiveRtp.subscribe((rtp) => {
        const unit = depacketizer.push({ payload: rtp.payload, marker: rtp.header.marker, sequenceNumber: rtp.header.sequenceNumber, timestamp: rtp.header.timestamp });
        if (depacketizer.needsKeyframe) void video.receiver.sendRtcpPLI(rtp.header.ssrc);
        if (!unit) return;
        chain = chain.then(async () => {
          for (const frame of await decoder.decode(unit.data)) {
            decoded++;
            const x = PATCH.x + PATCH.size / 2;
            const y = PATCH.y + PATCH.size / 2;
            const cw = frame.width / 2;
            const uv = (y / 2) * cw + x / 2;
            const luma = frame.width * frame.height;
            centre = { y: frame.data[y * frame.width + x]!, u: frame.data[luma + uv]!, v: frame.data[luma * 1.25 + uv]! };
          }
        });
      });
    });

    await client.setLocalDescription(await client.createOffer());
    await waitUntil(() => client!.iceGatheringState === 'complete', 5_000, 'ICE gathering');
    const transport = `${runtime.url}/sessions/${session.session_id}/transport/webrtc`;
    const offer = await fetch(`${transport}/sdp_params`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        sdp_offer: client.localDescription!.sdp,
        track_mapping: client.getTransceivers().map((t, i) => ({ mid: t.mid, ...session.capabilities.tracks[i]! })).map(({ mid, name, kind, direction }) => ({ mid, name, kind, direction })),
      }),
    });
    expect(offer.status).toBe(202);
    const answer = (await (await fetch(`${transport}/sdp_params`)).json()) as { sdp_answer: string };
    expect(answer.sdp_answer).toMatch(/a=rtpmap:\d+ H265\/90000/);
    await client.setRemoteDescription({ type: 'answer', sdp: answer.sdp_answer });

    await waitUntil(() => decoded >= 30, 20_000, '30 decoded H.265 frames');
    const red = rgbToYuv(0xe0, 0x10, 0x10);
    expect(Math.abs(centre!.y - red.y)).toBeLessThan(12);
    expect(Math.abs(centre!.v - red.v)).toBeLessThan(12);
    decoder.close();
  });
});
