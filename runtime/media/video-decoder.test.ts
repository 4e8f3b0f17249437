import { describe, expect, it } from 'vitest';
import { solidI420 } from './frame-convert.ts';
import { videoFrameByteLength, type VideoFrame } from './frames.ts';
import { VideoDecoder } from './video-decoder.ts';
import { VideoEncoder } from './video-encoder-factory.ts';
import type { H264Profile, VideoCodec } from './video-encoder.ts';

const BACKGROUND = { y: 70, u: 120, v: 135 };
const PATCH = { y: 190, u: 90, v: 170 };

/** A flat background with a solid patch over the middle third of the frame. */
function patchFrame(width: number, height: number): VideoFrame {
  const frame = solidI420(width, height, BACKGROUND.y, BACKGROUND.u, BACKGROUND.v);
  const chromaWidth = Math.ceil(width / 2);
  const chromaHeight = Math.ceil(height / 2);
  const uOffset = width * height;
  const vOffset = uOffset + chromaWidth * chromaHeight;
  for (let y = Math.floor(height / 3); y < Math.floor((2 * height) / 3); y++) {
    for (let x = Math.floor(width / 3); x < Math.floor((2 * width) / 3); x++) {
      frame.data[y * width + x] = PATCH.y;
      const c = (y >> 1) * chromaWidth + (x >> 1);
      frame.data[uOffset + c] = PATCH.u;
      frame.data[vOffset + c] = PATCH.v;
    }
  }
  return frame;
}

function samplePlanes(frame: VideoFrame, x: number, y: number): { y: number; u: number; v: number } {
  const chromaWidth = Math.ceil(frame.width / 2);
  const uOffset = frame.width * frame.height;
  const vOffset = uOffset + chromaWidth * Math.ceil(frame.height / 2);
  const c = (y >> 1) * chromaWidth + (x >> 1);
  return { y: frame.data[y * frame.width + x]!, u: frame.data[uOffset + c]!, v: frame.data[vOffset + c]! };
}

async function encodeFrames(codec: VideoCodec, frames: VideoFrame[], profile?: H264Profile): Promise<Buffer[]> {
  const { width, height } = frames[0]!;
  const encoder = await VideoEncoder.create({ codec, width, height, fps: 30, ...(profile ? { profile } : {}) });
  try {
    const packets: Buffer[] = [];
    for (const frame of frames) {
      const out = await encoder.encode(frame);
      expect(out).toHaveLength(1);
      packets.push(out[0]!.data);
    }
    return packets;
  } finally {
    encoder.close();
  }
}

const ROUND_TRIP_CASES: ReadonlyArray<readonly [VideoCodec, number, number, H264Profile?]> = [
  ['h264', 1280, 720],
  ['h264', 642, 362],
  ['h264', 1280, 720, 'high'],
  ['h264', 1920, 1080],
  ['h264', 1920, 1080, 'high'],
  ['h264', 2560, 1440],
  ['h265', 1280, 720],
  ['h265', 642, 362],
  ['h265', 1920, 1080],
  ['h265', 2560, 1440],
  ['vp8', 1280, 720],
  ['vp8', 642, 362],
  ['vp8', 641, 361],
];

describe('VideoDecoder round trip', () => {
  const cases = ROUND_TRIP_CASES.map(([codec, width, height, profile]) => ({
    name: `${codec}${profile ? ` ${profile}` : ''} ${width}x${height}`,
    codec,
    width,
    height,
    profile,
  }));
  it.each(cases)('$name keeps the patch colour', async ({ codec, width, height, profile }) => {
    const source = patchFrame(width, height);
    const packets = await encodeFrames(codec, [source, source, source], profile);
    const decoder = await VideoDecoder.create(codec);
    try {
      for (const [index, packet] of packets.entries()) {
        const frames = await decoder.decode(packet, 1000 * index);
        expect(frames).toHaveLength(1);
        const decoded = frames[0]!;
        expect(decoded).toMatchObject({ width, height, format: 'i420', timestampUs: 1000 * index });
        expect(decoded.data.byteLength).toBe(videoFrameByteLength('i420', width, height));
        const centre = samplePlanes(decoded, width >> 1, height >> 1);
        expect(Math.abs(centre.y - PATCH.y)).toBeLessThanOrEqual(6);
        expect(Math.abs(centre.u - PATCH.u)).toBeLessThanOrEqual(6);
        expect(Math.abs(centre.v - PATCH.v)).toBeLessThanOrEqual(6);
        // A corner, to catch linesize/stride mistakes that shift or shear rows.
        const corner = samplePlanes(decoded, width - 4, height - 4);
        expect(Math.abs(corner.y - BACKGROUND.y)).toBeLessThanOrEqual(6);
        expect(Math.abs(corner.u - BACKGROUND.u)).toBeLessThanOrEqual(6);
      }
    } finally {
      decoder.close();
    }
  });
});

describe('VideoDecoder corrupt input', () => {
  it.each(['h264', 'vp8'] as const)('%s: rejects garbage and delta frames without a keyframe, then recovers', async (codec) => {
    const packets = await encodeFrames(codec, [patchFrame(320, 240), patchFrame(320, 240)]);
    const decoder = await VideoDecoder.create(codec);
    try {
      const garbage = Buffer.from(Array.from({ length: 600 }, (_, i) => (i * 7919 + 13) & 0xff));
      await expect(decoder.decode(garbage)).rejects.toThrow(/decode failed/);
      const startCodeGarbage = Buffer.concat([Buffer.from([0, 0, 0, 1]), garbage]);
      await expect(decoder.decode(startCodeGarbage)).rejects.toThrow(/decode failed/);
      await expect(decoder.decode(packets[1]!)).rejects.toThrow(/decode failed/);
      await expect(decoder.decode(Buffer.alloc(0))).rejects.toThrow(/empty/);
      // Still usable: a keyframe decodes, then the delta frame that follows it.
      expect(await decoder.decode(packets[0]!)).toHaveLength(1);
      expect(await decoder.decode(packets[1]!)).toHaveLength(1);
    } finally {
      decoder.close();
    }
  });

  it('h265: rejects data without a start code; skips undecodable units (no picture) and recovers', async () => {
    // FFmpeg's hevc decoder drops NAL units it cannot use (garbage behind a start code, slices whose
    // PPS it has not seen) with a log line instead of failing, so those resolve with no picture.
    const packets = await encodeFrames('h265', [patchFrame(320, 240), patchFrame(320, 240)]);
    const decoder = await VideoDecoder.create('h265');
    try {
      const garbage = Buffer.from(Array.from({ length: 600 }, (_, i) => (i * 7919 + 13) & 0xff));
      await expect(decoder.decode(garbage)).rejects.toThrow(/decode failed/);
      expect(await decoder.decode(Buffer.concat([Buffer.from([0, 0, 0, 1]), garbage]))).toEqual([]);
      expect(await decoder.decode(packets[1]!)).toEqual([]);
      await expect(decoder.decode(Buffer.alloc(0))).rejects.toThrow(/empty/);
      expect(await decoder.decode(packets[0]!)).toHaveLength(1);
      expect(await decoder.decode(packets[1]!)).toHaveLength(1);
    } finally {
      decoder.close();
    }
  });

  it('rejects codecs it does not know', async () => {
    await expect(VideoDecoder.create('av1' as VideoCodec)).rejects.toThrow(RangeError);
    await expect(VideoDecoder.create('constructor' as VideoCodec)).rejects.toThrow(RangeError);
  });

  it('close is idempotent and decode after close rejects', async () => {
    const decoder = await VideoDecoder.create('vp8');
    decoder.close();
    decoder.close();
    await expect(decoder.decode(Buffer.from([1, 2, 3]))).rejects.toThrow(/closed/);
  });
});
