/**
 * The runtime's ICE agents query no STUN server nobody configured: werift's default is
 * stun.l.google.com:19302, asked on every answer (and waited for). Checked on the agents of a real
 * answer to a libwebrtc offer; a configured STUN server is kept.
 */

import wrtc from '@roamhq/wrtc';
import { describe, expect, it } from 'vitest';
import type { TrackCapability } from '../../../protocol/capabilities.ts';
import { answerOffer } from './answer-offer.ts';
import { IcePolicy } from './ice-policy.ts';
import { withoutImplicitStun } from './no-implicit-stun.ts';
import { createRuntimePeer } from './peer-factory.ts';

const LOOPBACK = '127.0.0.1';
const TRACKS: readonly TrackCapability[] = [{ name: 'main_video', kind: 'video', direction: 'recvonly', width: 64, height: 64 }];

async function libwebrtcOffer(): Promise<{ sdp: string; close: () => void }> {
  const client = new wrtc.RTCPeerConnection({ iceServers: [] }) as unknown as RTCPeerConnection;
  client.createDataChannel('data');
  client.addTransceiver('video', { direction: 'recvonly' });
  await client.setLocalDescription(await client.createOffer());
  return { sdp: client.localDescription!.sdp, close: () => client.close() };
}

describe('no implicit STUN server', () => {
  it("leaves a runtime peer's ICE agents without one when none is configured", async () => {
    const offer = await libwebrtcOffer();
    const server = createRuntimePeer({ icePolicy: new IcePolicy({ hostAddresses: [LOOPBACK] }), iceServers: [] });
    try {
      await answerOffer(server, offer.sdp, TRACKS, undefined, new IcePolicy({ hostAddresses: [LOOPBACK] }));
      expect(server.iceTransports.length).toBeGreaterThan(0);
      for (const transport of server.iceTransports) expect(transport.connection.stunServer).toBeUndefined();
    } finally {
      offer.close();
      await server.close();
    }
  });

  it('keeps a STUN server the runtime was given', async () => {
    const offer = await libwebrtcOffer();
    const server = createRuntimePeer({
      icePolicy: new IcePolicy({ hostAddresses: [LOOPBACK] }),
      iceServers: [{ uris: [`stun:${LOOPBACK}:3478`] }],
    });
    try {
      await server.setRemoteDescription({ type: 'offer', sdp: offer.sdp });
      withoutImplicitStun(server);
      for (const transport of server.iceTransports) expect(transport.connection.stunServer).toEqual([LOOPBACK, 3478]);
    } finally {
      offer.close();
      await server.close();
    }
  });
});
