import { describe, expect, it } from 'vitest';
import { flexfecHeaderBytes, flexfecPayload, type FecProtected } from './flexfec.ts';

const SSRC = 0x11223344;

/** A clear RTP packet: fixed header, an extension block whose bytes 4–7 hold a transport-wide number, a payload. */
function rtpPacket(sequenceNumber: number, payloadLength: number, fill: number, marker = false): FecProtected {
  const header = Buffer.alloc(12 + 8);
  header[0] = 0x90; // V=2, X=1
  header[1] = (marker ? 0x80 : 0) | 96;
  header.writeUInt16BE(sequenceNumber, 2);
  header.writeUInt32BE((0xdeadbeef + sequenceNumber) >>> 0, 4);
  header.writeUInt32BE(SSRC, 8);
  header.writeUInt16BE(0xbede, 12);
  header.writeUInt16BE(1, 14);
  header[16] = 0x31; // id 3, 2 bytes
  header.writeUInt16BE((0x4000 + sequenceNumber) & 0xffff, 17); // the transport-wide number (rewritten at send time)
  header[19] = 0;
  const payload = Buffer.alloc(payloadLength);
  for (let i = 0; i < payloadLength; i++) payload[i] = (fill + i * 7) & 0xff;
  return { sequenceNumber, header, payload, zeroAt: 17, zeroLength: 2 };
}

/** The packet as the receiver holds it for FEC: its mutable extension bytes zeroed. */
function asReceived(packet: FecProtected): Buffer {
  const bytes = Buffer.concat([packet.header, packet.payload]);
  bytes.fill(0, packet.zeroAt!, packet.zeroAt! + packet.zeroLength!);
  return bytes;
}

/**
 * Recovers the one missing packet from a repair packet and the others, by libwebrtc's rules for
 * flexfec-03 (forward_error_correction.cc, flexfec_03_header_reader_writer.cc), written here
 * independently of the sender's code: the k-bit mask, the recovery fields, the XOR.
 */
function recover(fec: Buffer, received: ReadonlyMap<number, Buffer>): { sequenceNumber: number; packet: Buffer } {
  expect(fec[0]! & 0xc0).toBe(0); // R = 0, F = 0
  expect(fec[8]).toBe(1); // one SSRC
  expect(fec.readUInt32BE(12)).toBe(SSRC);
  const base = fec.readUInt16BE(16);
  // The mask: 15 bits after k0, then 31 after k1, then 63 after k2; k = 1 ends it.
  const offsets: number[] = [];
  const readBits = (from: number, bytes: number, first: number): boolean => {
    let value = 0n;
    for (let i = 0; i < bytes; i++) value = (value << 8n) | BigInt(fec[from + i]!);
    const bits = bytes * 8 - 1;
    for (let i = 0; i < bits; i++) if ((value >> BigInt(bits - 1 - i)) & 1n) offsets.push(first + i);
    return value >> BigInt(bits) === 1n;
  };
  let headerBytes = 20;
  if (!readBits(18, 2, 0)) {
    headerBytes = 24;
    if (!readBits(20, 4, 15)) {
      headerBytes = 32;
      expect(readBits(24, 8, 46)).toBe(true);
    }
  }
  const protectedNumbers = offsets.map((o) => (base + o) & 0xffff);
  const missing = protectedNumbers.filter((n) => !received.has(n));
  expect(missing).toHaveLength(1);
  const recovered = Buffer.alloc(12 + fec.length - headerBytes);
  recovered[0] = fec[0]!;
  recovered[1] = fec[1]!;
  let length = fec.readUInt16BE(2);
  let timestamp = fec.readUInt32BE(4);
  fec.copy(recovered, 12, headerBytes);
  for (const n of protectedNumbers) {
    const packet = received.get(n);
    if (packet === undefined) continue;
    recovered[0]! ^= packet[0]!;
    recovered[1]! ^= packet[1]!;
    length ^= packet.length - 12;
    timestamp = (timestamp ^ packet.readUInt32BE(4)) >>> 0;
    for (let i = 12; i < packet.length; i++) recovered[i]! ^= packet[i]!;
  }
  recovered[0] = 0x80 | (recovered[0]! & 0x3f);
  recovered.writeUInt16BE(missing[0]!, 2);
  recovered.writeUInt32BE(timestamp, 4);
  recovered.writeUInt32BE(SSRC, 8);
  return { sequenceNumber: missing[0]!, packet: recovered.subarray(0, length + 12) };
}

describe('flexfecPayload (flexfec-03, as libwebrtc reads it)', () => {
  it('rebuilds any one lost packet of a frame byte for byte (mutable extension bytes as the receiver zeroes them)', () => {
    const frame = [rtpPacket(65533, 1100, 1), rtpPacket(65534, 1100, 2), rtpPacket(65535, 700, 3), rtpPacket(0, 41, 4, true)];
    const fec = flexfecPayload(SSRC, frame);
    expect(fec.length).toBe(20 + 8 + 1100); // header, then the longest packet after its 12 fixed bytes
    expect(fec.readUInt16BE(16)).toBe(65533); // SN base: the first packet
    expect(fec[18]! & 0x80).toBe(0x80); // k0: the 15-bit mask is the whole mask
    for (const lost of frame) {
      const received = new Map(frame.filter((p) => p !== lost).map((p) => [p.sequenceNumber, asReceived(p)] as const));
      const { sequenceNumber, packet } = recover(fec, received);
      expect(sequenceNumber).toBe(lost.sequenceNumber);
      expect(packet.equals(asReceived(lost))).toBe(true);
    }
  });

  it('covers sequence-number gaps and spans past 15 and 46 with the longer masks (k1, k2)', () => {
    expect(flexfecHeaderBytes(15)).toBe(20);
    expect(flexfecHeaderBytes(16)).toBe(24);
    expect(flexfecHeaderBytes(47)).toBe(32);
    expect(() => flexfecHeaderBytes(110)).toThrow(RangeError);
    for (const numbers of [
      [100, 102, 114, 115], // gaps; span 16: the 46-bit mask
      [10, 40, 55, 108], // span 99: the 109-bit mask
    ]) {
      const packets = numbers.map((n, i) => rtpPacket(n, 300 + i * 50, n));
      const fec = flexfecPayload(SSRC, packets);
      for (const lost of packets) {
        const received = new Map(packets.filter((p) => p !== lost).map((p) => [p.sequenceNumber, asReceived(p)] as const));
        const { packet } = recover(fec, received);
        expect(packet.equals(asReceived(lost))).toBe(true);
      }
    }
  });
});
