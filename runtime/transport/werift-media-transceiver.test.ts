import { describe, expect, it } from 'vitest';
import type { RTCRtpTransceiver } from 'werift';
import { transportCongestion, type TransportWideFeedback } from './send/transport-feedback.ts';
import { WeriftMediaTransceiver } from './werift-media-transceiver.ts';

/** A werift transceiver as far as the estimate reads it: its sender, on a connection's DTLS transport. */
function transceiverOn(dtlsTransport: object): WeriftMediaTransceiver {
  const sender = { dtlsTransport, receiverEstimatedMaxBitrate: 0n };
  return new WeriftMediaTransceiver({ sender } as unknown as RTCRtpTransceiver);
}

const EMPTY_FEEDBACK: TransportWideFeedback = {
  baseSequenceNumber: 0,
  packetStatusCount: 0,
  referenceTime: 0,
  packetChunks: [],
  recvDeltas: [],
};

describe('WeriftMediaTransceiver.estimatedBitrateKbps', () => {
  it('gives each video track of a transport-cc connection its weighted share of the one estimate', () => {
    const dtls = {};
    const main = transceiverOn(dtls);
    const depth = transceiverOn(dtls);
    const congestion = transportCongestion(dtls);
    congestion.onFeedback(EMPTY_FEEDBACK); // the client sends transport-wide feedback: its estimate rules
    const total = congestion.controller.targetBps / 1000;
    expect(main.estimatedBitrateKbps()).toBe(total);
    congestion.noteSender(main.werift.sender, 2000);
    congestion.noteSender(depth.werift.sender, 500);
    expect(main.estimatedBitrateKbps()).toBeCloseTo(total * 0.8);
    expect(depth.estimatedBitrateKbps()).toBeCloseTo(total * 0.2);
  });
});
