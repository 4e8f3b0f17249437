/**
 * The NVENC binding and NvencVideoEncoder against a FAKE NVIDIA driver (test/support/
 * fake-nvenc-driver.ts: a libcuda.so.1 whose "device memory" is host memory, and a
 * libnvidia-encode.so.1 that writes real, lossless I_PCM H.264). No GPU exists here; the fake
 * stands in for the driver only, so everything of ours runs: library loading, session set-up and
 * configuration, host and device-pointer input, forced IDRs, bitrate changes, the thread-pool
 * encode, pointer validation, backend selection. Pictures are checked by decoding the output with
 * FFmpeg. (A real GPU run is bench/gpu/nvenc.ts.)
 */
import { readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installFakeNvencDriver } from '../../test/support/fake-nvenc-driver.ts';
import { nativeAddon, nativeAddonStatus, type NativeAddon, type NvencEncoder } from './native-addon.ts';
import { ENCODER_BACKEND_CANDIDATES, chooseEncoderBackend, describeEncoderBackendSelection } from '../media/encoder-backends.ts';
import { NvencVideoEncoder } from '../media/nvenc-video-encoder.ts';
import { openVideoEncoderCount } from '../media/open-encoders.ts';
import { VideoDecoder } from '../media/video-decoder.ts';
import { VideoEncoder } from '../media/video-encoder-factory.ts';
import type { VideoFrame } from '../media/frames.ts';

const compiledIn = nativeAddonStatus().loaded && nativeAddon()!.features().nvenc;
const LOG = join(tmpdir(), `arclight-fake-nvenc-${process.pid}.jsonl`);
const W = 64;
const H = 48;

interface LogLine {
  event: string;
  [key: string]: unknown;
}

function logLines(event: string): LogLine[] {
  let text = '';
  try {
    text = readFileSync(LOG, 'utf8');
  } catch {
    return [];
  }
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as LogLine)
    .filter((l) => l.event === event);
}

/** A picture with structure: horizontal luma ramp, chroma varying by quadrant. */
function testPicture(width: number, height: number, seed = 0): VideoFrame {
  const cw = width / 2;
  const ch = height / 2;
  const data = new Uint8Array(width * height + 2 * cw * ch);
  for (let y = 0; y < height; y++) for (let x = 0; x < width; x++) data[y * width + x] = 16 + ((x * 3 + y + seed) % 219);
  for (let y = 0; y < ch; y++) {
    for (let x = 0; x < cw; x++) {
      data[width * height + y * cw + x] = x < cw / 2 ? 90 : 170;
      data[width * height + cw * ch + y * cw + x] = y < ch / 2 ? 100 : 200;
    }
  }
  return { width, height, format: 'i420', data };
}

function i420ToNv12(frame: VideoFrame, pitch: number): Uint8Array {
  const { width, height, data } = frame;
  const out = new Uint8Array(pitch * height * 1.5);
  for (let y = 0; y < height; y++) out.set(data.subarray(y * width, (y + 1) * width), y * pitch);
  const cw = width / 2;
  const ch = height / 2;
  for (let y = 0; y < ch; y++) {
    for (let x = 0; x < cw; x++) {
      out[pitch * height + y * pitch + 2 * x] = data[width * height + y * cw + x]!;
      out[pitch * height + y * pitch + 2 * x + 1] = data[width * height + cw * ch + y * cw + x]!;
    }
  }
  return out;
}

function maxDifference(a: Uint8Array, b: Uint8Array): number {
  expect(a.length).toBe(b.length);
  let worst = 0;
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i]! - b[i]!));
  return worst;
}

/** NAL unit types of an Annex-B H.264 access unit. */
function nalTypes(data: Buffer): number[] {
  const types: number[] = [];
  for (let i = 0; i + 3 < data.length; i++) {
    if (data[i] === 0 && data[i + 1] === 0 && data[i + 2] === 1) {
      types.push(data[i + 3]! & 0x1f);
      i += 3;
    }
  }
  return types;
}

/** BT.601 limited range of RGB (200, 40, 40). */
const RED_YUV = { y: 91, u: 104, v: 198 };

function expectColour(frame: VideoFrame, yuv: { y: number; u: number; v: number }): void {
  const { width, height, data } = frame;
  const chroma = (width / 2) * (height / 2);
  expect(Math.abs(data[0]! - yuv.y)).toBeLessThanOrEqual(2);
  expect(Math.abs(data[width * height]! - yuv.u)).toBeLessThanOrEqual(2);
  expect(Math.abs(data[width * height + chroma]! - yuv.v)).toBeLessThanOrEqual(2);
}

async function decodeAll(packets: Buffer[]): Promise<VideoFrame[]> {
  const decoder = await VideoDecoder.create('h264');
  const frames: VideoFrame[] = [];
  try {
    for (const packet of packets) frames.push(...(await decoder.decode(packet)));
    frames.push(...(await decoder.decode(Buffer.alloc(0)).catch(() => [])));
  } finally {
    decoder.close();
  }
  return frames;
}

describe.runIf(compiledIn)('NVENC against a fake NVIDIA driver (no GPU here: the driver libraries are test doubles)', () => {
  let addon: NativeAddon;

  beforeAll(async () => {
    await installFakeNvencDriver(LOG);
    addon = nativeAddon()!;
  }, 120_000);

  afterAll(() => {
    rmSync(LOG, { force: true });
  });

  it('probes as available and lists both codecs', async () => {
    const probe = await addon.nvencProbe();
    expect(probe).toMatchObject({ available: true, compiledIn: true, codecs: ['h264', 'h265'], driverApi: '11.1' });
    expect(probe.deviceName).toMatch(/fake/i);
    const missing = await addon.nvencProbe(1);
    expect(missing).toMatchObject({ available: false, reason: 'no CUDA device 1 (1 present)' });
  });

  it('reports a GPU without an NVENC engine (H100/H200) as unavailable, saying so', async () => {
    process.env['ARCLIGHT_FAKE_NVENC_MODE'] = 'no-encoder';
    try {
      const probe = await addon.nvencProbe();
      expect(probe.available).toBe(false);
      expect(probe.reason).toMatch(/^opening an NVENC session failed: NV_ENC_ERR_UNSUPPORTED_DEVICE.*: this GPU has no NVENC engine/);
      await expect(addon.openNvencEncoder({ codec: 'h264', width: W, height: H, fps: 30, bitrateKbps: 500, input: 'i420' })).rejects.toThrow(
        /NV_ENC_ERR_UNSUPPORTED_DEVICE/,
      );
    } finally {
      delete process.env['ARCLIGHT_FAKE_NVENC_MODE'];
    }
  });

  it('configures a low-latency session: no B-frames, no automatic IDRs, CBR with a VBV, the preset and tuning asked for', async () => {
    const encoder = await addon.openNvencEncoder({
      codec: 'h264', width: W, height: H, fps: 60, bitrateKbps: 4000, input: 'i420', preset: 3, vbvMs: 250,
      intraRefresh: { period: 120, frames: 30 },
    });
    encoder.close();
    const init = logLines('initialize').at(-1)!;
    expect(init).toMatchObject({
      codec: 'h264', width: W, height: H, frameRateNum: 60, frameRateDen: 1, preset: 'p3', tuning: 'ultra_low_latency', rateControl: 'cbr',
      averageBitRate: 4_000_000, maxBitRate: 4_000_000, vbvBufferSize: 1_000_000, gopLength: 0xffffffff, frameIntervalP: 1,
      idrPeriod: 0xffffffff, repeatSPSPPS: true, enableIntraRefresh: true, intraRefreshPeriod: 120, intraRefreshCnt: 30,
      zeroReorderDelay: true, enablePTD: true, profile: expect.stringMatching(/baseline/i),
    });
    const vbr = await addon.openNvencEncoder({ codec: 'h265', width: W, height: H, fps: 30, bitrateKbps: 1000, input: 'nv12', rateControl: 'vbr', tuning: 'low-latency' });
    vbr.close();
    expect(logLines('initialize').at(-1)).toMatchObject({ codec: 'hevc', rateControl: 'vbr', tuning: 'low_latency', averageBitRate: 1_000_000, maxBitRate: 1_500_000, enableIntraRefresh: false });
  });

  it('encodes host I420 off the JS thread into H.264 that decodes to the same picture; IDRs only when forced', async () => {
    const encoder = await addon.openNvencEncoder({ codec: 'h264', width: W, height: H, fps: 30, bitrateKbps: 500, input: 'i420' });
    try {
      const pictures = [0, 1, 2, 3].map((seed) => testPicture(W, H, seed * 7));
      const packets = [];
      for (const [i, picture] of pictures.entries()) {
        packets.push(await encoder.encode(picture.data, i === 2, 1000 + i));
      }
      // The first picture is an IDR (with SPS/PPS), then P, then the forced IDR, then P.
      expect(packets.map((p) => p.keyframe)).toEqual([true, false, true, false]);
      expect(nalTypes(packets[0]!.data)).toEqual([7, 8, 5]);
      expect(nalTypes(packets[1]!.data)).toEqual([1]);
      expect(nalTypes(packets[2]!.data)).toEqual([7, 8, 5]);
      expect(packets.map((p) => p.timestampUs)).toEqual([1000, 1001, 1002, 1003]);
      const decoded = await decodeAll(packets.map((p) => p.data));
      expect(decoded).toHaveLength(4);
      for (const [i, frame] of decoded.entries()) expect(maxDifference(frame.data, pictures[i]!.data), `frame ${i}`).toBe(0);
      expect(logLines('encode').slice(-4).map((l) => [l['input'], l['forceIdr']])).toEqual([
        ['host', false], ['host', false], ['host', true], ['host', false],
      ]);
    } finally {
      encoder.close();
    }
  });

  it('changes the bitrate between frames without re-initialising or an IDR', async () => {
    const encoder = await addon.openNvencEncoder({ codec: 'h264', width: W, height: H, fps: 30, bitrateKbps: 2000, input: 'i420' });
    try {
      const picture = testPicture(W, H);
      await encoder.encode(picture.data, false, 0);
      const initializes = logLines('initialize').length;
      encoder.setBitrate(800);
      const after = await encoder.encode(picture.data, false, 1);
      expect(after.keyframe).toBe(false);
      expect(logLines('initialize')).toHaveLength(initializes);
      expect(logLines('reconfigure').at(-1)).toMatchObject({ averageBitRate: 800_000, maxBitRate: 800_000, vbvBufferSize: 400_000, resetEncoder: false, forceIDR: false });
    } finally {
      encoder.close();
    }
  });

  it('encodes from a CUDA device pointer (NV12 and RGBA) without a host copy, and refuses pointers outside their allocation', async () => {
    const encoder = await addon.openNvencEncoder({ codec: 'h264', width: W, height: H, fps: 30, bitrateKbps: 500, input: 'i420' });
    const pitch = 128;
    const gpu = new addon.CudaBuffer(pitch * H * 1.5);
    try {
      const picture = testPicture(W, H, 3);
      gpu.upload(i420ToNv12(picture, pitch));
      const nv12 = await encoder.encode({ devicePtr: gpu.devicePtr, pitch, format: 'nv12' }, false, 7);
      // Registered once, mapped per frame: a second frame from the same buffer reuses it.
      const again = await encoder.encode({ devicePtr: gpu.devicePtr, pitch, format: 'nv12' }, false, 8);
      const encodes = logLines('encode').slice(-2);
      expect(encodes.map((l) => [l['input'], l['bufferFormat']])).toEqual([['cuda', 'NV12'], ['cuda', 'NV12']]);
      const decoded = await decodeAll([nv12.data, again.data]);
      expect(maxDifference(decoded[0]!.data, picture.data)).toBe(0);

      // Past the end of the allocation, on the JS thread, before NVENC sees it.
      expect(() => encoder.encode({ devicePtr: gpu.devicePtr + 64n, pitch, format: 'nv12' }, false, 9)).toThrow(
        new RangeError(`the frame (${pitch * H * 1.5} bytes at pitch ${pitch}) runs past the end of its CUDA allocation (${pitch * H * 1.5} bytes)`),
      );
      expect(() => encoder.encode({ devicePtr: 0x1234n, pitch, format: 'nv12' }, false, 9)).toThrow(/^devicePtr is not CUDA device memory/);
      expect(() => encoder.encode({ devicePtr: gpu.devicePtr, pitch: 32 }, false, 9)).toThrow(/pitch 32 is less than a row \(64 bytes\)/);
      expect(() => encoder.encode({ devicePtr: gpu.devicePtr, pitch, format: 'yuv' as 'nv12' }, false, 9)).toThrow(TypeError);
      // A frame that fits is still encodable afterwards.
      expect((await encoder.encode({ devicePtr: gpu.devicePtr, pitch, format: 'nv12' }, true, 10)).keyframe).toBe(true);

      // RGBA, the layout a model's tensor-to-image kernel typically writes: a per-picture format.
      const rgbaGpu = new addon.CudaBuffer(W * 4 * H);
      try {
        const rgba = new Uint8Array(W * 4 * H);
        for (let i = 0; i < rgba.length; i += 4) rgba.set([200, 40, 40, 255], i);
        rgbaGpu.upload(rgba);
        const red = await encoder.encode({ devicePtr: rgbaGpu.devicePtr, pitch: W * 4, format: 'rgba' }, true, 11);
        expect(logLines('encode').at(-1)).toMatchObject({ input: 'cuda', bufferFormat: 'ABGR' });
        expectColour((await decodeAll([red.data]))[0]!, RED_YUV);
      } finally {
        rgbaGpu.free();
      }
    } finally {
      encoder.close();
      gpu.free();
    }
    expect(() => gpu.devicePtr).toThrow(/freed/);
    // Closing unregistered the device pointer and freed every buffer.
    expect(logLines('destroy').at(-1)).toMatchObject({ leakedInputBuffers: 0, leakedBitstreamBuffers: 0, leakedRegistrations: 0, leakedMappings: 0 });
  });

  it('takes one encode at a time, and close() during an encode frees the session after it', async () => {
    const encoder: NvencEncoder = await addon.openNvencEncoder({ codec: 'h264', width: W, height: H, fps: 30, bitrateKbps: 500, input: 'i420' });
    const picture = testPicture(W, H);
    const first = encoder.encode(picture.data, false, 0);
    expect(() => encoder.encode(picture.data, false, 1)).toThrow(/one encode at a time/);
    encoder.close();
    expect(encoder.closed).toBe(true);
    // The encode in flight finishes (or fails cleanly); nothing crashes.
    await first.then((p) => expect(p.data.length).toBeGreaterThan(0), (e: Error) => expect(e.message).toMatch(/closed/));
    expect(() => encoder.encode(picture.data, false, 2)).toThrow(/closed/);
    expect(() => encoder.encode(new Uint8Array(10), false, 2)).toThrow(/closed/);
  });

  it('checks host frame sizes and argument types before queueing', async () => {
    const encoder = await addon.openNvencEncoder({ codec: 'h264', width: W, height: H, fps: 30, bitrateKbps: 500, input: 'i420' });
    try {
      expect(() => encoder.encode(new Uint8Array(10), false, 0)).toThrow(new RangeError(`frame holds 10 bytes; ${W}x${H} needs exactly ${W * H * 1.5}`));
      expect(() => encoder.encode(new Float32Array(10) as unknown as Uint8Array, false, 0)).toThrow(TypeError);
      expect(() => encoder.encode(new Uint8Array(W * H * 1.5), 'yes' as unknown as boolean, 0)).toThrow(/forceIdr must be a boolean/);
      expect(() => encoder.encode(new Uint8Array(W * H * 1.5), false, -1)).toThrow(RangeError);
      expect(() => encoder.setBitrate(0)).toThrow(RangeError);
    } finally {
      encoder.close();
    }
  });

  it('is the backend the runtime selects for H.264 and H.265, and VideoEncoder encodes RGBA of another size through it', async () => {
    const h264 = await chooseEncoderBackend('h264', ENCODER_BACKEND_CANDIDATES.h264);
    expect(h264.backend).toMatchObject({ name: 'arclight_nvenc_h264', hardware: true, implementation: 'native-nvenc' });
    expect(describeEncoderBackendSelection(h264)).toBe('h264: arclight_nvenc_h264 (hardware)');
    const h265 = await chooseEncoderBackend('h265', ENCODER_BACKEND_CANDIDATES.h265);
    expect(h265.backend.name).toBe('arclight_nvenc_hevc');

    const encoder = await VideoEncoder.create({ codec: 'h264', width: W, height: H, fps: 30, backend: h264.backend });
    try {
      expect(encoder).toBeInstanceOf(NvencVideoEncoder);
      // A flat RGBA picture twice the size: scaled and converted to I420 before NVENC.
      const rgba = new Uint8Array(W * 2 * H * 2 * 4);
      for (let i = 0; i < rgba.length; i += 4) rgba.set([200, 40, 40, 255], i);
      const first = await encoder.encode({ width: W * 2, height: H * 2, format: 'rgba', data: rgba });
      const second = await encoder.encode(testPicture(W, H));
      encoder.requestKeyframe();
      const third = await encoder.encode(testPicture(W, H));
      expect([first, second, third].map((out) => out.map((u) => u.keyframe))).toEqual([[true], [false], [true]]);
      encoder.setBitrate(300);
      expect(encoder.bitrateKbps).toBe(300);
      expect(encoder.stats).toMatchObject({ framesIn: 3, packetsOut: 3, keyframesOut: 2 });
      const [red] = await decodeAll([first[0]!.data]);
      expectColour(red!, RED_YUV);
    } finally {
      encoder.close();
    }
    await expect(encoder.encode(testPicture(W, H))).rejects.toThrow(/closed/);
  });

  it('loses the device mid-stream at ARCLIGHT_FAKE_NVENC_FAIL_AFTER_FRAMES (fault injection): every encode fails after, in fresh sessions too', async () => {
    // The fake counts the pictures of every session in this process; its log has one line for each.
    const encodedSoFar = logLines('encode').length;
    process.env['ARCLIGHT_FAKE_NVENC_FAIL_AFTER_FRAMES'] = String(encodedSoFar + 2);
    const before = openVideoEncoderCount();
    const h264 = ENCODER_BACKEND_CANDIDATES.h264[0]!.backend;
    try {
      const encoder = await VideoEncoder.create({ codec: 'h264', width: W, height: H, fps: 30, backend: h264 });
      try {
        expect(openVideoEncoderCount()).toBe(before + 1);
        await encoder.encode(testPicture(W, H));
        await encoder.encode(testPicture(W, H));
        await expect(encoder.encode(testPicture(W, H))).rejects.toThrow(/NV_ENC_ERR_DEVICE_NOT_EXIST/);
      } finally {
        encoder.close();
      }
      const fresh = await VideoEncoder.create({ codec: 'h264', width: W, height: H, fps: 30, backend: h264 });
      try {
        await expect(fresh.encode(testPicture(W, H))).rejects.toThrow(/NV_ENC_ERR_DEVICE_NOT_EXIST/);
      } finally {
        fresh.close();
      }
      expect(openVideoEncoderCount()).toBe(before);
      expect(logLines('error').at(-1)).toMatchObject({ message: expect.stringMatching(/the device is gone/) });
    } finally {
      delete process.env['ARCLIGHT_FAKE_NVENC_FAIL_AFTER_FRAMES'];
    }
  });
});
