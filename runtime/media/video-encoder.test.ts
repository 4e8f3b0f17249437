import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { convertVideoFrame, solidI420 } from './frame-convert.ts';
import type { VideoFrame } from './frames.ts';
import { VideoDecoder } from './video-decoder.ts';
import { processEncoderBackends } from './encoder-backends.ts';
import { VideoEncoder } from './video-encoder-factory.ts';
import type { EncodedVideoFrame } from './video-encoder.ts';

const NAL_NON_IDR = 1;
const NAL_IDR = 5;
const NAL_SPS = 7;
const NAL_PPS = 8;

/** nal_unit_type of every NAL in an Annex-B buffer; throws if it does not start with a start code. */
function nalTypes(data: Buffer): number[] {
  expect(data.subarray(0, 3).equals(Buffer.from([0, 0, 1])) || data.subarray(0, 4).equals(Buffer.from([0, 0, 0, 1]))).toBe(true);
  const types: number[] = [];
  for (let i = 0; i + 3 < data.length; i++) {
    if (data[i] === 0 && data[i + 1] === 0 && data[i + 2] === 1) {
      types.push(data[i + 3]! & 0x1f);
      i += 3;
    }
  }
  return types;
}

/** H.265 nal_unit_type (from the two-byte header) of every NAL in an Annex-B buffer. */
function hevcNalTypes(data: Buffer): number[] {
  expect(data.subarray(0, 4).equals(Buffer.from([0, 0, 0, 1])) || data.subarray(0, 3).equals(Buffer.from([0, 0, 1]))).toBe(true);
  const types: number[] = [];
  for (let i = 0; i + 4 < data.length; i++) {
    if (data[i] === 0 && data[i + 1] === 0 && data[i + 2] === 1) {
      types.push((data[i + 3]! >> 1) & 0x3f);
      i += 3;
    }
  }
  return types;
}

const HEVC_TRAIL_R = 1;
const HEVC_VPS = 32;
const HEVC_SPS = 33;
const HEVC_PPS = 34;
const isIrap = (type: number): boolean => type >= 16 && type <= 21;

/** First NAL payload of the given type (bytes after the one-byte NAL header). */
function nalPayload(data: Buffer, type: number): Buffer | undefined {
  for (let i = 0; i + 3 < data.length; i++) {
    if (data[i] === 0 && data[i + 1] === 0 && data[i + 2] === 1 && (data[i + 3]! & 0x1f) === type) {
      return data.subarray(i + 4);
    }
  }
  return undefined;
}

/** Smooth moving gradient, the kind of content the realtime settings are tuned for. */
function gradientFrame(width: number, height: number, step: number): VideoFrame {
  const frame = solidI420(width, height, 0, 128, 128);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) frame.data[y * width + x] = 32 + ((x + y + step * 3) % 192);
  }
  return frame;
}

function onlyOnePacket(packets: EncodedVideoFrame[]): EncodedVideoFrame {
  expect(packets).toHaveLength(1);
  return packets[0]!;
}

describe('VideoEncoder h264', () => {
  it('emits Annex-B: SPS+PPS+IDR first and after requestKeyframe, non-IDR otherwise, one packet per frame', async () => {
    const encoder = await VideoEncoder.create({ codec: 'h264', width: 1280, height: 720, fps: 30 });
    try {
      const first = onlyOnePacket(await encoder.encode(gradientFrame(1280, 720, 0)));
      expect(first.codec).toBe('h264');
      expect(first.keyframe).toBe(true);
      const firstTypes = nalTypes(first.data);
      expect(firstTypes).toEqual(expect.arrayContaining([NAL_SPS, NAL_PPS, NAL_IDR]));
      expect(firstTypes.indexOf(NAL_SPS)).toBeLessThan(firstTypes.indexOf(NAL_IDR));
      expect(firstTypes.indexOf(NAL_PPS)).toBeLessThan(firstTypes.indexOf(NAL_IDR));

      // Constrained Baseline: profile_idc 66 with constraint_set1; level 3.1 at 720p30.
      const sps = nalPayload(first.data, NAL_SPS)!;
      expect(sps[0]).toBe(66);
      expect(sps[1]! & 0x40).toBe(0x40);
      expect(sps[2]).toBe(31);

      for (let i = 1; i < 5; i++) {
        const packet = onlyOnePacket(await encoder.encode(gradientFrame(1280, 720, i)));
        expect(packet.keyframe).toBe(false);
        const types = nalTypes(packet.data);
        expect(types).toContain(NAL_NON_IDR);
        expect(types).not.toContain(NAL_IDR);
        expect(types).not.toContain(NAL_SPS);
      }

      encoder.requestKeyframe();
      const forced = onlyOnePacket(await encoder.encode(gradientFrame(1280, 720, 5)));
      expect(forced.keyframe).toBe(true);
      expect(nalTypes(forced.data)).toEqual(expect.arrayContaining([NAL_SPS, NAL_PPS, NAL_IDR]));

      const after = onlyOnePacket(await encoder.encode(gradientFrame(1280, 720, 6)));
      expect(after.keyframe).toBe(false);
      expect(nalTypes(after.data)).not.toContain(NAL_IDR);

      expect(encoder.stats).toMatchObject({ framesIn: 7, packetsOut: 7, keyframesOut: 2 });
      expect(encoder.stats.lastEncodeMs).toBeGreaterThan(0);
    } finally {
      encoder.close();
    }
  });

  it('keeps the source timestamp on the packet', async () => {
    const encoder = await VideoEncoder.create({ codec: 'h264', width: 320, height: 240, fps: 30 });
    try {
      const frame = { ...solidI420(320, 240, 100, 128, 128), timestampUs: 123_456_789 };
      const packet = onlyOnePacket(await encoder.encode(frame));
      expect(packet.timestampUs).toBe(123_456_789);
    } finally {
      encoder.close();
    }
  });

  it('rejects odd sizes, which 4:2:0 H.264 cannot carry', async () => {
    await expect(VideoEncoder.create({ codec: 'h264', width: 641, height: 360, fps: 30 })).rejects.toThrow(/even/);
  });

  it('profile high: SPS says High (profile_idc 100), still one packet per frame in order (no B-frames)', async () => {
    const encoder = await VideoEncoder.create({ codec: 'h264', width: 1280, height: 720, fps: 30, profile: 'high' });
    const decoder = await VideoDecoder.create('h264');
    try {
      const first = onlyOnePacket(await encoder.encode({ ...gradientFrame(1280, 720, 0), timestampUs: 0 }));
      expect(first.keyframe).toBe(true);
      const sps = nalPayload(first.data, NAL_SPS)!;
      expect(sps[0]).toBe(100);
      expect(sps[2]).toBe(31);
      expect(await decoder.decode(first.data)).toHaveLength(1);
      for (let i = 1; i < 6; i++) {
        if (i === 4) encoder.requestKeyframe();
        const packet = onlyOnePacket(await encoder.encode({ ...gradientFrame(1280, 720, i), timestampUs: i }));
        expect(packet.timestampUs).toBe(i);
        expect(packet.keyframe).toBe(i === 4);
        expect(nalTypes(packet.data).includes(NAL_IDR)).toBe(i === 4);
        const [decoded] = await decoder.decode(packet.data, i);
        expect(decoded!.timestampUs).toBe(i);
      }
    } finally {
      encoder.close();
      decoder.close();
    }
  });

  it('rejects a profile for other codecs, and unknown profiles', async () => {
    await expect(VideoEncoder.create({ codec: 'vp8', width: 64, height: 64, fps: 30, profile: 'high' })).rejects.toThrow(RangeError);
    await expect(VideoEncoder.create({ codec: 'h264', width: 64, height: 64, fps: 30, profile: 'main' as 'high' })).rejects.toThrow(
      /profile/,
    );
  });

  it('encodes with the selected backend, or the one it is given', async () => {
    const encoder = await VideoEncoder.create({ codec: 'h264', width: 64, height: 64, fps: 30 });
    try {
      expect(encoder.backend).toBe(await processEncoderBackends.select('h264'));
    } finally {
      encoder.close();
    }
    const vp8 = await processEncoderBackends.select('vp8');
    await expect(VideoEncoder.create({ codec: 'h264', width: 64, height: 64, fps: 30, backend: vp8 })).rejects.toThrow(
      /libvpx backend encodes vp8/,
    );
  });
});

describe('VideoEncoder h265', () => {
  it('emits Annex-B: VPS+SPS+PPS+IDR first and after requestKeyframe, TRAIL otherwise, one packet per frame', async () => {
    const encoder = await VideoEncoder.create({ codec: 'h265', width: 1280, height: 720, fps: 30 });
    try {
      expect(encoder.codec).toBe('h265');
      const keyframes: number[] = [];
      for (let i = 0; i < 8; i++) {
        if (i === 5) encoder.requestKeyframe();
        const packet = onlyOnePacket(await encoder.encode({ ...gradientFrame(1280, 720, i), timestampUs: 1000 + i }));
        expect(packet.codec).toBe('h265');
        expect(packet.timestampUs).toBe(1000 + i);
        const types = hevcNalTypes(packet.data);
        expect(packet.keyframe).toBe(types.some(isIrap));
        if (packet.keyframe) {
          keyframes.push(i);
          // Parameter sets first, then the IDR (19 IDR_W_RADL or 20 IDR_N_LP: an IDR, not a CRA).
          expect(types.slice(0, 3)).toEqual([HEVC_VPS, HEVC_SPS, HEVC_PPS]);
          expect(types.slice(3).every((t) => t === 19 || t === 20)).toBe(true);
          // general_profile_idc (after sps_video_parameter_set_id etc., one byte): 1 = Main.
          const sps = packet.data.subarray(packet.data.indexOf(Buffer.from([0, 0, 1, HEVC_SPS << 1])) + 5);
          expect(sps[1]! & 0x1f).toBe(1);
        } else {
          expect(types.every((t) => t === HEVC_TRAIL_R)).toBe(true);
        }
      }
      expect(keyframes).toEqual([0, 5]);
      expect(encoder.stats).toMatchObject({ framesIn: 8, packetsOut: 8, keyframesOut: 2 });
    } finally {
      encoder.close();
    }
  });

  it('rejects odd sizes, which 4:2:0 H.265 cannot carry', async () => {
    await expect(VideoEncoder.create({ codec: 'h265', width: 640, height: 361, fps: 30 })).rejects.toThrow(/even/);
  });
});

describe('VideoEncoder vp8', () => {
  it('marks keyframes consistently with the VP8 frame tag and honours requestKeyframe', async () => {
    const encoder = await VideoEncoder.create({ codec: 'vp8', width: 1280, height: 720, fps: 30 });
    try {
      const flags: boolean[] = [];
      for (let i = 0; i < 8; i++) {
        if (i === 5) encoder.requestKeyframe();
        const packet = onlyOnePacket(await encoder.encode(gradientFrame(1280, 720, i)));
        expect(packet.codec).toBe('vp8');
        // VP8 frame tag: bit 0 of the first byte is 0 for a key frame.
        const tagSaysKey = (packet.data[0]! & 0x01) === 0;
        expect(packet.keyframe).toBe(tagSaysKey);
        if (tagSaysKey) expect(packet.data.subarray(3, 6).equals(Buffer.from([0x9d, 0x01, 0x2a]))).toBe(true);
        flags.push(packet.keyframe);
      }
      expect(flags).toEqual([true, false, false, false, false, true, false, false]);
      expect(encoder.stats).toMatchObject({ framesIn: 8, packetsOut: 8, keyframesOut: 2 });
    } finally {
      encoder.close();
    }
  });
});

describe('VideoEncoder input handling', () => {
  it.each(['h264', 'h265', 'vp8'] as const)(
    '%s: copies caller pixels, so the buffer can be rewritten right after encode',
    async (codec) => {
      const encoder = await VideoEncoder.create({ codec, width: 320, height: 240, fps: 30 });
      const decoder = await VideoDecoder.create(codec);
      try {
        const frame = solidI420(320, 240, 60, 128, 128);
        const first = onlyOnePacket(await encoder.encode(frame));
        frame.data.fill(200, 0, 320 * 240); // reuse the same buffer for the next frame
        const second = onlyOnePacket(await encoder.encode(frame));
        const [a] = await decoder.decode(first.data);
        const [b] = await decoder.decode(second.data);
        expect(Math.abs(a!.data[120 * 320 + 160]! - 60)).toBeLessThanOrEqual(6);
        expect(Math.abs(b!.data[120 * 320 + 160]! - 200)).toBeLessThanOrEqual(6);
      } finally {
        encoder.close();
        decoder.close();
      }
    },
  );

  it('accepts rgba input', async () => {
    const encoder = await VideoEncoder.create({ codec: 'h264', width: 640, height: 360, fps: 30 });
    const decoder = await VideoDecoder.create('h264');
    try {
      const rgba = new Uint8Array(640 * 360 * 4);
      for (let i = 0; i < rgba.length; i += 4) rgba.set([200, 40, 40, 255], i);
      const frame: VideoFrame = { width: 640, height: 360, format: 'rgba', data: rgba };
      const packet = onlyOnePacket(await encoder.encode(frame));
      const [decoded] = await decoder.decode(packet.data);
      const expected = convertVideoFrame(frame, 'i420').data;
      const centre = 180 * 640 + 320;
      expect(Math.abs(decoded!.data[centre]! - expected[centre]!)).toBeLessThanOrEqual(6);
      const back = convertVideoFrame(decoded!, 'rgba').data;
      expect(Math.abs(back[centre * 4]! - 200)).toBeLessThanOrEqual(12);
      expect(Math.abs(back[centre * 4 + 1]! - 40)).toBeLessThanOrEqual(12);
      expect(Math.abs(back[centre * 4 + 2]! - 40)).toBeLessThanOrEqual(12);
    } finally {
      encoder.close();
      decoder.close();
    }
  });

  it('scales frames whose size differs from the encoder size', async () => {
    const encoder = await VideoEncoder.create({ codec: 'vp8', width: 640, height: 360, fps: 30 });
    const decoder = await VideoDecoder.create('vp8');
    try {
      const small = onlyOnePacket(await encoder.encode(solidI420(320, 180, 150, 100, 160)));
      const rgbaLarge: VideoFrame = convertVideoFrame(solidI420(1280, 720, 150, 100, 160), 'rgba');
      const large = onlyOnePacket(await encoder.encode(rgbaLarge));
      for (const packet of [small, large]) {
        const [decoded] = await decoder.decode(packet.data);
        expect(decoded).toMatchObject({ width: 640, height: 360, format: 'i420' });
        expect(Math.abs(decoded!.data[180 * 640 + 320]! - 150)).toBeLessThanOrEqual(6);
      }
    } finally {
      encoder.close();
      decoder.close();
    }
  });

  it('rejects frames whose data is shorter than their shape', async () => {
    const encoder = await VideoEncoder.create({ codec: 'vp8', width: 64, height: 64, fps: 30 });
    try {
      await expect(encoder.encode({ width: 64, height: 64, format: 'i420', data: new Uint8Array(10) })).rejects.toThrow(RangeError);
      // The encoder is still usable after a rejected call.
      expect(await encoder.encode(solidI420(64, 64, 16, 128, 128))).toHaveLength(1);
    } finally {
      encoder.close();
    }
  });

  it('close is idempotent and encode after close rejects', async () => {
    const encoder = await VideoEncoder.create({ codec: 'h264', width: 64, height: 64, fps: 30 });
    await encoder.encode(solidI420(64, 64, 16, 128, 128));
    encoder.close();
    encoder.close();
    await expect(encoder.encode(solidI420(64, 64, 16, 128, 128))).rejects.toThrow(/closed/);
  });

  it('close during an in-flight encode lets it finish, then frees; queued encodes reject', async () => {
    // In flight = on node-av's thread pool (a synchronous encode cannot be interrupted).
    const encoder = await VideoEncoder.create({ codec: 'h264', width: 320, height: 240, fps: 30, syncBelowMs: 0 });
    const pending = encoder.encode(solidI420(320, 240, 16, 128, 128));
    const queued = encoder.encode(solidI420(320, 240, 16, 128, 128));
    // framesIn counts once the pixels are in; the encode is then on a worker thread in sendFrame.
    while (encoder.stats.framesIn === 0) await new Promise((resolve) => setImmediate(resolve));
    encoder.close();
    await expect(pending).resolves.toHaveLength(1);
    await expect(queued).rejects.toThrow(/closed/);
  });
});

describe('VideoEncoder execution: synchronous for fast encodes, thread pool for slow ones', () => {
  async function encodeSequence(syncBelowMs: number): Promise<Array<{ keyframe: boolean; bytes: number }>> {
    const encoder = await VideoEncoder.create({ codec: 'h264', width: 320, height: 240, fps: 30, syncBelowMs });
    const out: Array<{ keyframe: boolean; bytes: number }> = [];
    for (let i = 0; i < 12; i++) {
      if (i === 6) encoder.requestKeyframe();
      const frames = await encoder.encode(solidI420(320, 240, 16 + i * 10, 128, 128));
      out.push(...frames.map((f) => ({ keyframe: f.keyframe, bytes: f.data.length })));
    }
    encoder.close();
    return out;
  }

  it('gives the same stream either way: one packet per frame, keyframes where asked', async () => {
    const threadPool = await encodeSequence(0);
    const synchronous = await encodeSequence(Infinity);
    expect(threadPool.map((p) => p.keyframe)).toEqual([true, false, false, false, false, false, true, false, false, false, false, false]);
    expect(synchronous).toEqual(threadPool);
  });

  it('moves to the thread pool when encodes average above the limit', async () => {
    const encoder = await VideoEncoder.create({ codec: 'h264', width: 320, height: 240, fps: 30, syncBelowMs: 1e-6 });
    await encoder.encode(solidI420(320, 240, 16, 128, 128)); // first: synchronous (no average yet)
    expect(encoder.stats.threadPoolEncodes).toBe(0);
    await encoder.encode(solidI420(320, 240, 40, 128, 128));
    await encoder.encode(solidI420(320, 240, 60, 128, 128));
    expect(encoder.stats).toMatchObject({ framesIn: 3, threadPoolEncodes: 2 });
    encoder.close();
    const fast = await VideoEncoder.create({ codec: 'h264', width: 320, height: 240, fps: 30, syncBelowMs: Infinity });
    for (let i = 0; i < 3; i++) await fast.encode(solidI420(320, 240, 16 + i, 128, 128));
    expect(fast.stats).toMatchObject({ framesIn: 3, threadPoolEncodes: 0 });
    fast.close();
  });
});

describe('VideoEncoder under GC pressure', () => {
  it('survives forced GC while encoding from a rewritten, dropped buffer (child process with --expose-gc)', () => {
    const encoderUrl = new URL('./video-encoder-factory.ts', import.meta.url).href;
    // The child ends with an explicit process.exit(0): a process that opened libx264 can
    // crash in Node's normal exit path, which is not what this test is about.
    const script = `
      import { VideoEncoder } from ${JSON.stringify(encoderUrl)};
      if (typeof globalThis.gc !== 'function') throw new Error('run with --expose-gc');
      const encoders = [
        await VideoEncoder.create({ codec: 'h264', width: 640, height: 360, fps: 30 }),
        await VideoEncoder.create({ codec: 'vp8', width: 640, height: 360, fps: 30 }),
        await VideoEncoder.create({ codec: 'h265', width: 640, height: 360, fps: 30 }),
      ];
      let packets = 0;
      for (let i = 0; i < 300; i++) {
        // A fresh buffer every few frames, rewritten between frames, then dropped for GC.
        const width = 640, height = 360;
        let data = new Uint8Array(width * height * 3 / 2);
        data.fill(16 + (i % 200));
        const frame = { width, height, format: 'i420', data };
        const pending = encoders.map((e) => e.encode(frame));
        data.fill(255 - (i % 200)); // the caller rewrites while encodes are queued
        if (i % 3 === 0) for (const e of encoders) e.requestKeyframe();
        const results = await Promise.all(pending);
        for (const r of results) packets += r.length;
        data = null;
        if (i % 5 === 0) globalThis.gc();
        // Every 10th frame an RGBA frame of another size, through the swscale path.
        if (i % 10 === 0) {
          const rgba = new Uint8Array(320 * 240 * 4).fill(i % 256);
          const p = encoders.map((e) => e.encode({ width: 320, height: 240, format: 'rgba', data: rgba }));
          rgba.fill(0);
          for (const r of await Promise.all(p)) packets += r.length;
          globalThis.gc();
        }
      }
      for (const e of encoders) e.close();
      globalThis.gc();
      console.log('packets', packets);
      process.exit(packets === 3 * 330 ? 0 : 3);
    `;
    const result = spawnSync(process.execPath, ['--expose-gc', '--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: fileURLToPath(new URL('../..', import.meta.url)),
      encoding: 'utf8',
      timeout: 120_000,
    });
    expect(result.stderr).not.toMatch(/Error/);
    expect(result.stdout).toContain('packets 990');
    expect(result.signal).toBeNull();
    expect(result.status).toBe(0);
  }, 150_000);
});
