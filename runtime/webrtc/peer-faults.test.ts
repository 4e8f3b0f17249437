import { describe, expect, it } from 'vitest';
import type { RTCPeerConnection } from 'werift';
import { applyPeerFaults } from './peer-factory.ts';

function fakePeer() {
  const sent: number[] = [];
  const transport = {
    sendRtp: async (payload: Buffer, _header?: unknown) => {
      sent.push(payload[0]!);
      return payload.length;
    },
    sendData: async () => {},
  };
  return { pc: { dtlsTransports: [transport, transport] } as unknown as RTCPeerConnection, transport, sent };
}

const header = { serializeSize: 12 } as never;

describe('applyPeerFaults', () => {
  it('drops the given share of RTP, still reporting the bytes, and nothing else', async () => {
    const { pc, transport, sent } = fakePeer();
    const sendData = transport.sendData;
    let i = 0;
    // Deterministic "random": every 4th packet draws below 0.25.
    applyPeerFaults(pc, { outboundRtpLossPercent: 25 }, () => ((i++ % 4) === 3 ? 0.1 : 0.9));
    applyPeerFaults(pc, { outboundRtpLossPercent: 25 }, () => 0); // a second call does not stack
    const sizes: number[] = [];
    for (let n = 0; n < 8; n++) sizes.push(await transport.sendRtp(Buffer.from([n, 0, 0]), header));
    expect(sent).toEqual([0, 1, 2, 4, 5, 6]);
    expect(sizes).toEqual([3, 3, 3, 15, 3, 3, 3, 15]); // dropped: payload + header bytes
    expect(transport.sendData).toBe(sendData); // SCTP (the data channel) untouched
  });

  it('does nothing without faults or with 0 %', async () => {
    for (const faults of [undefined, {}, { outboundRtpLossPercent: 0 }]) {
      const { pc, transport, sent } = fakePeer();
      const original = transport.sendRtp;
      applyPeerFaults(pc, faults, () => 0);
      expect(transport.sendRtp).toBe(original);
      await transport.sendRtp(Buffer.from([7]));
      expect(sent).toEqual([7]);
    }
  });
});
