/**
 * RTX (RFC 4588) negotiation: a libwebrtc client (wrtc) offers `rtx` for each video codec; the
 * runtime's answer keeps it (`apt=` the chosen codec) and announces the RTX SSRC the send path
 * resends on (rtp-track-sender.ts) in `a=ssrc-group:FID <media> <rtx>`, with an msid that ties
 * both SSRCs to one track, which libwebrtc requires to accept the answer.
 */

import wrtc from '@roamhq/wrtc';
import { describe, expect, it } from 'vitest';
import type { TrackCapability } from '../../../protocol/capabilities.ts';
import { answerOffer } from '../signalling/answer-offer.ts';
import { IcePolicy } from '../signalling/ice-policy.ts';
import { createRuntimePeer } from '../signalling/peer-factory.ts';

const LOOPBACK = '127.0.0.1';
const TRACKS: readonly TrackCapability[] = [{ name: 'main_video', kind: 'video', direction: 'recvonly', width: 64, height: 64 }];

describe('RTX negotiation', () => {
  it('answers a libwebrtc offer with rtx for the chosen codec and the RTX SSRC in an FID group, and the client accepts it', async () => {
    const policy = new IcePolicy({ hostAddresses: [LOOPBACK] });
    const server = createRuntimePeer({ icePolicy: policy, iceServers: [] });
    const client = new wrtc.RTCPeerConnection({ iceServers: [] }) as unknown as RTCPeerConnection;
    try {
      client.createDataChannel('data');
      client.addTransceiver('video', { direction: 'recvonly' });
      await client.setLocalDescription(await client.createOffer());
      const offer = client.localDescription!.sdp;
      expect(offer).toMatch(/a=rtpmap:\d+ rtx\/90000/);
      const { answerSdp } = await answerOffer(server, offer, TRACKS, undefined, policy);
      const video = answerSdp.slice(answerSdp.indexOf('m=video'), answerSdp.indexOf('m=application'));
      const transceiver = server.getTransceivers().find((t) => t.kind === 'video')!;
      const codec = transceiver.sender.codec!;
      const rtx = /a=rtpmap:(\d+) rtx\/90000/.exec(video);
      expect(rtx, video).not.toBeNull();
      expect(video).toContain(`a=fmtp:${rtx![1]} apt=${codec.payloadType}`);
      const { ssrc, rtxSsrc } = transceiver.sender;
      expect(video).toContain(`a=ssrc-group:FID ${ssrc} ${rtxSsrc}`);
      expect(video).toMatch(new RegExp(`a=ssrc:${rtxSsrc} cname:`));
      expect(video).toMatch(/^a=msid:arclight \S+\r$/m);
      // libwebrtc refuses two SSRCs without an msid ("more than one track … Unified Plan").
      await client.setRemoteDescription({ type: 'answer', sdp: answerSdp });
    } finally {
      client.close();
      await server.close();
    }
  });
});
