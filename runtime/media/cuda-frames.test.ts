/**
 * CUDA frames through an output track, against the FAKE NVIDIA driver (no GPU here; see
 * test/support/fake-nvenc-driver.ts): emit() copies them device to device, NVENC encodes them from
 * GPU memory, and a VP8 viewer and the recorder's tap get host copies with the right pixels.
 */
import { readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installFakeNvencDriver } from '../../test/support/fake-nvenc-driver.ts';
import { createLogger } from '../../server-kit/log.ts';
import { nativeAddon, nativeAddonStatus, type NativeAddon } from '../native/native-addon.ts';
import { convertToYuv } from './colour-convert.ts';
import { cudaFrameSpan, downloadCudaFrame, type CudaLayout } from './cuda-frames.ts';
import type { CudaVideoFrame, VideoFrame } from './frames.ts';
import { OutputVideoTrack, type VideoSink } from './output-video-track.ts';
import type { VideoCodec } from './video-encoder.ts';

const compiledIn = nativeAddonStatus().loaded && nativeAddon()!.features().nvenc;
const LOG = join(tmpdir(), `arclight-cuda-frames-${process.pid}.jsonl`);
const W = 64;
const H = 48;

/** Packed I420 with a luma ramp and two chroma halves. */
function picture(): Uint8Array {
  const data = new Uint8Array(W * H * 1.5);
  for (let y = 0; y < H; y++) for (let x = 0; x < W; x++) data[y * W + x] = 16 + ((x * 3 + y) % 200);
  const c = (W / 2) * (H / 2);
  for (let i = 0; i < c; i++) {
    data[W * H + i] = i % (W / 2) < W / 4 ? 90 : 170;
    data[W * H + c + i] = 200;
  }
  return data;
}

/** The picture in `layout` at `pitch`, as a model's kernel would leave it in GPU memory. */
function pitched(layout: CudaLayout, pitch: number, i420: Uint8Array): Uint8Array {
  const out = new Uint8Array(cudaFrameSpan(layout, pitch, H));
  const c = (W / 2) * (H / 2);
  if (layout === 'rgba' || layout === 'bgra') {
    for (let y = 0; y < H; y++) for (let x = 0; x < W; x++) out.set(layout === 'rgba' ? [x, y, 7, 255] : [7, y, x, 255], y * pitch + x * 4);
    return out;
  }
  for (let y = 0; y < H; y++) out.set(i420.subarray(y * W, (y + 1) * W), y * pitch);
  for (let y = 0; y < H / 2; y++) {
    for (let x = 0; x < W / 2; x++) {
      const u = i420[W * H + y * (W / 2) + x]!;
      const v = i420[W * H + c + y * (W / 2) + x]!;
      if (layout === 'nv12') out.set([u, v], pitch * H + y * pitch + 2 * x);
      else {
        out[pitch * H + y * (pitch / 2) + x] = u;
        out[pitch * H + (pitch / 2) * (H / 2) + y * (pitch / 2) + x] = v;
      }
    }
  }
  return out;
}

function sink(codec: VideoCodec, received: number[]): VideoSink {
  return {
    connectionId: received.length + (codec === 'vp8' ? 100 : 0),
    codec,
    sendFrame(_payloads, rtpTimestamp) {
      received.push(rtpTimestamp);
      return rtpTimestamp;
    },
  };
}

describe.runIf(compiledIn)('CUDA frames on an output track (fake NVIDIA driver: no GPU here)', () => {
  let addon: NativeAddon;

  beforeAll(async () => {
    await installFakeNvencDriver(LOG);
    addon = nativeAddon()!;
  }, 120_000);

  afterAll(() => rmSync(LOG, { force: true }));

  it('downloads every layout to packed I420 on the thread pool, RGB layouts colour-converted as convertToYuv does', async () => {
    const i420 = picture();
    for (const [layout, pitch] of [
      ['nv12', 128],
      ['i420', 96],
      ['rgba', 256],
      ['bgra', 320],
    ] as const) {
      const gpu = new addon.CudaBuffer(cudaFrameSpan(layout, pitch, H));
      try {
        gpu.upload(pitched(layout, pitch, i420));
        const copy = await downloadCudaFrame({ buffer: gpu, width: W, height: H, pitch, layout, device: 0 });
        expect(copy.frame).toMatchObject({ width: W, height: H, format: 'i420' });
        expect(copy.copyMs).toBeGreaterThanOrEqual(0);
        expect(copy.convertMs).toBeGreaterThanOrEqual(0);
        if (layout === 'nv12' || layout === 'i420') {
          expect(Buffer.from(copy.frame.data).equals(Buffer.from(i420)), layout).toBe(true);
        } else {
          // The same picture packed as RGBA, through the runtime's own converter: identical bytes.
          const rgba = new Uint8Array(W * H * 4);
          for (let y = 0; y < H; y++) for (let x = 0; x < W; x++) rgba.set([x, y, 7, 255], (y * W + x) * 4);
          const expected = convertToYuv(rgba, { width: W, height: H, format: 'rgba' });
          expect(Buffer.from(copy.frame.data).equals(Buffer.from(expected)), layout).toBe(true);
        }
      } finally {
        gpu.free();
      }
    }
  });

  it("checks a download's shape before queueing it, and a buffer freed mid-download stays valid until it settles", async () => {
    const gpu = new addon.CudaBuffer(cudaFrameSpan('nv12', W, H));
    try {
      expect(() => gpu.downloadFrame({ width: W, height: H, pitch: W - 2, layout: 'nv12' })).toThrow(
        new RangeError(`pitch must be at least ${W}`),
      );
      expect(() => gpu.downloadFrame({ width: W, height: H + 2, pitch: W, layout: 'nv12' })).toThrow(/runs past the end of this buffer/);
      expect(() => gpu.downloadFrame({ width: W + 1, height: H, pitch: W * 2, layout: 'nv12' })).toThrow(RangeError);
      expect(() => gpu.downloadFrame({ width: W, height: H, pitch: W, layout: 'yuyv' as 'nv12' })).toThrow(TypeError);
      gpu.upload(pitched('nv12', W, picture()));
      const pending = gpu.downloadFrame({ width: W, height: H, pitch: W, layout: 'nv12' });
      gpu.free();
      expect(Buffer.from((await pending).data).equals(Buffer.from(picture()))).toBe(true);
      expect(() => gpu.downloadFrame({ width: W, height: H, pitch: W, layout: 'nv12' })).toThrow('CudaBuffer is freed');
    } finally {
      gpu.free();
    }
  });

  it('reports the device as the driver does (the fake: compute capability 0.0, 1 GiB, its library path)', async () => {
    const info = await addon.cudaDeviceInfo(0);
    expect(info).toMatchObject({
      ordinal: 0,
      name: 'Arclight fake GPU (test double)',
      computeCapability: '0.0',
      multiprocessors: 1,
      totalMemoryBytes: 2 ** 30,
      driverVersion: '0.0',
    });
    expect(info.freeMemoryBytes).toBeLessThanOrEqual(2 ** 30);
    expect(info.driverLibrary).toBe(process.env['ARCLIGHT_LIBCUDA']);
    await expect(addon.cudaDeviceInfo(5)).rejects.toThrow(/^cuDeviceGet\(5\) failed: CUDA_ERROR_INVALID_DEVICE \(101\)/);
  });

  it('encodes emitted CUDA frames on NVENC from GPU memory, and gives a VP8 viewer and the tap host copies', async () => {
    const track = new OutputVideoTrack(
      { name: 'main_video', kind: 'video', direction: 'recvonly', width: W, height: H },
      30,
      createLogger({}, 'error'),
    );
    const h264: number[] = [];
    const vp8: number[] = [];
    const tapped: VideoFrame[] = [];
    track.setFrameTap((frame) => tapped.push({ ...frame, data: frame.data.slice() }));
    for (const s of [sink('h264', h264), sink('vp8', vp8)]) {
      track.addSink(s, { paused: false });
      track.sinkReady(s);
    }
    const pitch = 128;
    const i420 = picture();
    const modelBuffer = new addon.CudaBuffer(cudaFrameSpan('nv12', pitch, H));
    try {
      modelBuffer.upload(pitched('nv12', pitch, i420));
      const frame: CudaVideoFrame = {
        width: W,
        height: H,
        format: 'cuda',
        cuda: { devicePtr: modelBuffer.devicePtr, pitch, layout: 'nv12' },
      };
      for (let i = 0; i < 8; i++) {
        await track.emit(frame);
        // emit() copied it: the model may overwrite its buffer at once without changing what is sent.
        if (i === 0) modelBuffer.upload(new Uint8Array(cudaFrameSpan('nv12', pitch, H)));
        modelBuffer.upload(pitched('nv12', pitch, i420));
      }
      // A pointer outside its allocation is the model's error, at emit(), and nothing is queued.
      const emitted = track.framesEmitted;
      await expect(track.emit({ ...frame, cuda: { ...frame.cuda, devicePtr: modelBuffer.devicePtr + 256n } })).rejects.toThrow(
        /runs past the end of its CUDA allocation/,
      );
      await expect(track.emit({ ...frame, cuda: { ...frame.cuda, pitch: 10 } })).rejects.toThrow(RangeError);
      expect(track.framesEmitted).toBe(emitted);
      const deadline = Date.now() + 10_000;
      while ((h264.length < 4 || vp8.length < 4) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    } finally {
      await track.close();
      modelBuffer.free();
    }
    expect(h264.length).toBeGreaterThanOrEqual(4);
    expect(vp8.length).toBeGreaterThanOrEqual(4);
    // NVENC read every frame from GPU memory (the registered NV12 copy), never from the host.
    const encodes = readFileSync(LOG, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { event: string; input?: string; bufferFormat?: string })
      .filter((e) => e.event === 'encode');
    const modelEncodes = encodes.filter((e) => e.input === 'cuda');
    expect(modelEncodes.length).toBeGreaterThanOrEqual(4);
    expect(new Set(modelEncodes.map((e) => e.bufferFormat))).toEqual(new Set(['NV12']));
    // The tap (the recorder) saw the picture itself, not the zeros written after the first emit.
    expect(tapped.length).toBeGreaterThanOrEqual(4);
    for (const frame of tapped) expect(Buffer.from(frame.data).equals(Buffer.from(i420))).toBe(true);
  }, 60_000);
});
