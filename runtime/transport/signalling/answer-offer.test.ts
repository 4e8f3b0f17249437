/**
 * The runtime's answer makes it the DTLS server where the offer lets it choose (issue 26): as a
 * DTLS client werift waits a fixed 100 ms after ICE before its ClientHello; as the server it
 * answers the client's at once. Checked on the SDP and on a real wrtc ↔ werift connect on loopback.
 */

import wrtc from '@roamhq/wrtc';
import { describe, expect, it } from 'vitest';
import type { TrackCapability } from '../../../protocol/capabilities.ts';
import { answerOffer, dtlsServerWherePossible } from './answer-offer.ts';
import { IcePolicy } from './ice-policy.ts';
import { createRuntimePeer } from './peer-factory.ts';

const LOOPBACK = '127.0.0.1';
const TRACKS: readonly TrackCapability[] = [{ name: 'main_video', kind: 'video', direction: 'recvonly', width: 64, height: 64 }];

const answerWith = (setup: string) =>
  `v=0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\na=setup:${setup}\r\na=mid:0\r\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\na=setup:${setup}\r\na=mid:1\r\n`;

describe('dtlsServerWherePossible', () => {
  it('answers passive (the DTLS server) on every m-line when the offer says actpass', () => {
    const rewrite = dtlsServerWherePossible(answerWith('actpass'));
    expect(rewrite).toBeDefined();
    const answer = rewrite!(answerWith('active'));
    expect(answer.match(/^a=setup:passive\r$/gm)).toHaveLength(2);
    expect(answer).not.toMatch(/a=setup:active/);
  });

  it('leaves the role alone when the offer names one (active: werift answers passive itself; passive: the answer must be active)', () => {
    expect(dtlsServerWherePossible(answerWith('active'))).toBeUndefined();
    expect(dtlsServerWherePossible(answerWith('passive'))).toBeUndefined();
  });
});

describe('answerOffer', () => {
  it('answers a libwebrtc offer as the DTLS server, and the peers connect over loopback with werift serving DTLS', async () => {
    const server = createRuntimePeer({ icePolicy: new IcePolicy({ hostAddresses: [LOOPBACK] }), iceServers: [] });
    const client = new wrtc.RTCPeerConnection({ iceServers: [] }) as unknown as RTCPeerConnection;
    try {
      const channel = client.createDataChannel('data');
      client.addTransceiver('video', { direction: 'recvonly' });
      await client.setLocalDescription(await client.createOffer());
      await new Promise<void>((resolve) => {
        if (client.iceGatheringState === 'complete') return resolve();
        client.addEventListener('icegatheringstatechange', () => client.iceGatheringState === 'complete' && resolve());
      });
      const offer = client.localDescription!.sdp;
      expect(offer).toMatch(/a=setup:actpass/);
      const { answerSdp } = await answerOffer(server, offer, TRACKS, undefined, new IcePolicy({ hostAddresses: [LOOPBACK] }));
      expect(answerSdp.match(/^a=setup:\w+/gm)?.every((line) => line === 'a=setup:passive')).toBe(true);
      await client.setRemoteDescription({ type: 'answer', sdp: answerSdp });
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`not connected in 10 s (${client.connectionState}, channel ${channel.readyState})`)),
          10_000,
        );
        const check = () => {
          if (client.connectionState === 'connected' && channel.readyState === 'open') {
            clearTimeout(timer);
            resolve();
          }
        };
        client.addEventListener('connectionstatechange', check);
        channel.addEventListener('open', check);
        check();
      });
      expect(server.dtlsTransports.map((t) => t.role)).toEqual(['server']);
    } finally {
      client.close();
      await server.close();
    }
  }, 20_000);
});
