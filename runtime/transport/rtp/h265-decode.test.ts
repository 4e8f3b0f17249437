/**
 * Acceptance for H.265 over RTP without a browser (the Chromium we test with has no WebRTC H.265):
 * libx265 access units -> H265Packetizer -> RTP fields -> H265Depacketizer -> FFmpeg's hevc decoder,
 * checked pixel by pixel against what was encoded.
 */
import { describe, expect, it } from 'vitest';
import { solidI420 } from '../../media/frame-convert.ts';
import type { VideoFrame } from '../../media/frames.ts';
import { VideoDecoder } from '../../media/video-decoder.ts';
import { VideoEncoder } from '../../media/video-encoder-factory.ts';
import type { DepacketizedFrame, RtpPacketFields } from './depacketized-frame.ts';
import { H265Depacketizer } from './h265-depacketizer.ts';
import { H265Packetizer, h265NalType } from './h265-packetizer.ts';

const WIDTH = 1280;
const HEIGHT = 720;
const PATCH_SIZE = 160;
const BACKGROUND = { y: 70, u: 120, v: 135 };
const PATCH = { y: 190, u: 90, v: 170 };
/** Rows of a fixed fine texture at the top: makes each IDR large enough to need many FUs. */
const TEXTURE_ROWS = 240;
const MAX_PAYLOAD = 1200;

const texture = ((): Uint8Array => {
  const rows = new Uint8Array(WIDTH * TEXTURE_ROWS);
  for (let y = 0; y < TEXTURE_ROWS; y++) {
    for (let x = 0; x < WIDTH; x++) rows[y * WIDTH + x] = 40 + ((x * 5 + y * 3) % 160);
  }
  return rows;
})();

function patchX(index: number): number {
  return 200 + ((index * 24) % (WIDTH - 400));
}

/** Flat background, a fixed texture at the top, and a solid patch that moves right frame by frame. */
function frameAt(index: number): VideoFrame {
  const frame = solidI420(WIDTH, HEIGHT, BACKGROUND.y, BACKGROUND.u, BACKGROUND.v);
  frame.data.set(texture, 0);
  const chromaWidth = WIDTH / 2;
  const uOffset = WIDTH * HEIGHT;
  const vOffset = uOffset + chromaWidth * (HEIGHT / 2);
  const x0 = patchX(index);
  const y0 = 400;
  for (let y = y0; y < y0 + PATCH_SIZE; y++) {
    frame.data.fill(PATCH.y, y * WIDTH + x0, y * WIDTH + x0 + PATCH_SIZE);
    if (y % 2 === 0) {
      const c = (y >> 1) * chromaWidth + (x0 >> 1);
      frame.data.fill(PATCH.u, uOffset + c, uOffset + c + PATCH_SIZE / 2);
      frame.data.fill(PATCH.v, vOffset + c, vOffset + c + PATCH_SIZE / 2);
    }
  }
  return frame;
}

function sample(frame: VideoFrame, x: number, y: number): { y: number; u: number; v: number } {
  const chromaWidth = frame.width / 2;
  const uOffset = frame.width * frame.height;
  const vOffset = uOffset + chromaWidth * (frame.height / 2);
  const c = (y >> 1) * chromaWidth + (x >> 1);
  return { y: frame.data[y * frame.width + x]!, u: frame.data[uOffset + c]!, v: frame.data[vOffset + c]! };
}

function expectClose(actual: { y: number; u: number; v: number }, expected: { y: number; u: number; v: number }): void {
  expect(Math.abs(actual.y - expected.y)).toBeLessThanOrEqual(8);
  expect(Math.abs(actual.u - expected.u)).toBeLessThanOrEqual(8);
  expect(Math.abs(actual.v - expected.v)).toBeLessThanOrEqual(8);
}

/** The decoded picture shows frame `index`: the patch where it was, background where it was not. */
function expectShowsFrame(decoded: VideoFrame, index: number): void {
  expect(decoded).toMatchObject({ width: WIDTH, height: HEIGHT, format: 'i420' });
  const x0 = patchX(index);
  expectClose(sample(decoded, x0 + PATCH_SIZE / 2, 400 + PATCH_SIZE / 2), PATCH);
  // Just left of the patch (where the previous frame's patch partly was) and a far corner.
  expectClose(sample(decoded, x0 - 12, 400 + PATCH_SIZE / 2), BACKGROUND);
  expectClose(sample(decoded, WIDTH - 8, HEIGHT - 8), BACKGROUND);
  // Texture pixels.
  for (const [x, y] of [
    [501, 37],
    [64, 200],
  ] as const) {
    expect(Math.abs(decoded.data[y * WIDTH + x]! - texture[y * WIDTH + x]!)).toBeLessThanOrEqual(12);
  }
}

/** RTP fields as a sender would set them: 90 kHz timestamps, sequence numbers wrapping at 2^16. */
class RtpSender {
  #seq = 65_500;
  packets(payloads: readonly Buffer[], index: number): RtpPacketFields[] {
    const timestamp = (0xffff_0000 + index * 3000) >>> 0;
    return payloads.map((payload, k) => ({
      payload,
      marker: k === payloads.length - 1,
      sequenceNumber: this.#seq++ & 0xffff,
      timestamp,
    }));
  }
}

describe('H.265 over RTP into the decoder', () => {
  it('decodes a libx265 stream after packetizing and depacketizing, pixel for pixel', async () => {
    const encoder = await VideoEncoder.create({ codec: 'h265', width: WIDTH, height: HEIGHT, fps: 30 });
    const decoder = await VideoDecoder.create('h265');
    const packetizer = new H265Packetizer(MAX_PAYLOAD);
    const depacketizer = new H265Depacketizer();
    const sender = new RtpSender();
    const count = 24;
    const payloadTypes = new Set<number>();
    let packetCount = 0;
    let decodedCount = 0;
    try {
      for (let i = 0; i < count; i++) {
        if (i === 12) encoder.requestKeyframe();
        const [encoded] = await encoder.encode({ ...frameAt(i), timestampUs: i * 33_333 });
        const payloads = packetizer.packetize(encoded!.data);
        const packets = sender.packets(payloads, i);
        packetCount += packets.length;
        const frames: DepacketizedFrame[] = [];
        for (const packet of packets) {
          expect(packet.payload.length).toBeLessThanOrEqual(MAX_PAYLOAD);
          payloadTypes.add(h265NalType(packet.payload));
          const frame = depacketizer.push(packet);
          if (frame) frames.push(frame);
        }
        expect(frames).toHaveLength(1);
        const [frame] = frames;
        expect(frame!.keyframe).toBe(encoded!.keyframe);
        expect(frame!.keyframe).toBe(i === 0 || i === 12);
        expect(frame!.timestamp).toBe(packets[0]!.timestamp);
        // No AUD or anything else dropped: the depacketized unit is what the encoder wrote,
        // start codes normalised to four bytes.
        expect(frame!.data.equals(normaliseStartCodes(encoded!.data))).toBe(true);

        const pictures = await decoder.decode(frame!.data, i);
        expect(pictures).toHaveLength(1);
        expect(pictures[0]!.timestampUs).toBe(i);
        expectShowsFrame(pictures[0]!, i);
        decodedCount++;
      }
      expect(decodedCount).toBe(count);
      expect(depacketizer.needsKeyframe).toBe(false);
      // The keyframes' parameter sets went as an AP, their IDR slices as FUs.
      expect(payloadTypes.has(48)).toBe(true);
      expect(payloadTypes.has(49)).toBe(true);
      expect(packetCount).toBeGreaterThan(65_536 - 65_500); // the sequence numbers wrapped
    } finally {
      encoder.close();
      decoder.close();
    }
  });

  it('after a lost packet, withholds frames until the requested keyframe, which decodes', async () => {
    const encoder = await VideoEncoder.create({ codec: 'h265', width: WIDTH, height: HEIGHT, fps: 30 });
    const decoder = await VideoDecoder.create('h265');
    const packetizer = new H265Packetizer(MAX_PAYLOAD);
    const depacketizer = new H265Depacketizer();
    const sender = new RtpSender();
    const delivered: number[] = [];
    let pliAt = -1;
    try {
      for (let i = 0; i < 12; i++) {
        // The receiver's PLI reaches the sender two frames later.
        if (pliAt >= 0 && i === pliAt + 2) encoder.requestKeyframe();
        const [encoded] = await encoder.encode(frameAt(i));
        let packets = sender.packets(packetizer.packetize(encoded!.data), i);
        if (i === 4) packets = packets.slice(1); // the first packet of frame 4 is lost
        for (const packet of packets) {
          const frame = depacketizer.push(packet);
          if (depacketizer.needsKeyframe && pliAt < 0) pliAt = i;
          if (!frame) continue;
          delivered.push(i);
          const pictures = await decoder.decode(frame.data);
          expect(pictures).toHaveLength(1);
          expectShowsFrame(pictures[0]!, i);
        }
      }
      expect(pliAt).toBe(4);
      expect(delivered).toEqual([0, 1, 2, 3, 6, 7, 8, 9, 10, 11]);
      expect(depacketizer.needsKeyframe).toBe(false);
    } finally {
      encoder.close();
      decoder.close();
    }
  });
});

/** Annex-B with every start code four bytes long, as the depacketizer writes it. */
function normaliseStartCodes(data: Buffer): Buffer {
  const parts: Buffer[] = [];
  let start = data.indexOf(Buffer.from([0, 0, 1]));
  while (start !== -1) {
    const next = data.indexOf(Buffer.from([0, 0, 1]), start + 3);
    let end = next === -1 ? data.length : next;
    while (end > start + 3 && data[end - 1] === 0) end--;
    parts.push(Buffer.from([0, 0, 0, 1]), data.subarray(start + 3, end));
    start = next;
  }
  return Buffer.concat(parts);
}
