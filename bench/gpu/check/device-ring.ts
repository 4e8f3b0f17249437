/**
 * What the GPU check's "model" renders: a ring of distinct pictures uploaded to CUDA memory once,
 * which the frame benchmark and the child runtime's model hand out as CudaVideoFrames — the state a
 * real model leaves after its kernels ran, with no host copy per frame.
 *
 * The picture: eight colour bars in the top half (the same in every frame: what a receiver checks
 * after decoding), and below them a diagonal gradient and a box that move every frame, so x264 has
 * motion to encode. Every 2×2 block is one colour, so 4:2:0 chroma is the same whichever way a
 * converter subsamples it, and a check can expect exact values (within rounding).
 */
import type { CudaVideoFrame } from '../../../runtime/media/frames.ts';
import { convertToYuv, yuvByteLength } from '../../../runtime/media/colour-convert.ts';
import type { CudaBuffer, NativeAddon } from '../../../runtime/native/native-addon.ts';
import { rgbToYuv, type Yuv } from '../../../models/examples/shared/i420-canvas.ts';

export type RingLayout = 'nv12' | 'rgba';

/** Bar colours, left to right (RGB). */
export const BAR_COLOURS: readonly (readonly [number, number, number])[] = [
  [235, 235, 235],
  [235, 235, 16],
  [16, 235, 235],
  [16, 235, 16],
  [235, 16, 235],
  [235, 16, 16],
  [16, 16, 235],
  [40, 40, 40],
];
const BAR_YUV: readonly Yuv[] = BAR_COLOURS.map(([r, g, b]) => rgbToYuv(r, g, b));

/** Rows padded as cuMemAllocPitch would (256-byte alignment). */
export function ringPitch(width: number, layout: RingLayout): number {
  const row = layout === 'rgba' ? width * 4 : width;
  return Math.ceil(row / 256) * 256;
}

/** Bytes one frame spans on the device at `pitch`. */
export function ringSlotBytes(height: number, pitch: number, layout: RingLayout): number {
  return layout === 'rgba' ? pitch * height : pitch * height * 1.5;
}

/** Frame `k` of the picture as packed RGBA. */
export function ringPictureRgba(width: number, height: number, k: number): Uint8Array {
  const rgba = new Uint8Array(width * height * 4);
  const pixels = new Uint32Array(rgba.buffer);
  const little = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;
  const pack = (r: number, g: number, b: number): number =>
    (little ? (255 << 24) | (b << 16) | (g << 8) | r : (r << 24) | (g << 16) | (b << 8) | 255) >>> 0;
  const bars = BAR_COLOURS.map(([r, g, b]) => pack(r, g, b));
  const barWidth = width / BAR_COLOURS.length;
  const half = (height >> 2) << 1; // even
  const box = { x: ((k * 12) % Math.max(2, width - 128)) & ~1, y: half + (((k * 6) % Math.max(2, height - half - 64)) & ~1), size: 64 };
  for (let y = 0; y < height; y += 2) {
    for (let x = 0; x < width; x += 2) {
      let colour: number;
      if (y < half) colour = bars[Math.min(bars.length - 1, Math.floor(x / barWidth))]!;
      else if (x >= box.x && x < box.x + box.size && y >= box.y && y < box.y + box.size) colour = pack(240, 200, 20);
      else {
        const t = ((x + y * 2 + k * 8) >> 1) & 255;
        colour = pack(t, 255 - t, (t * 3) & 255);
      }
      const i = y * width + x;
      pixels[i] = colour;
      pixels[i + 1] = colour;
      pixels[i + width] = colour;
      pixels[i + width + 1] = colour;
    }
  }
  return rgba;
}

/** Packed I420 → NV12 laid out at `pitch` (luma rows, then interleaved UV rows). */
function nv12AtPitch(i420: Uint8Array, width: number, height: number, pitch: number): Uint8Array {
  const out = new Uint8Array(pitch * height * 1.5);
  for (let y = 0; y < height; y++) out.set(i420.subarray(y * width, (y + 1) * width), y * pitch);
  const cw = width / 2;
  const u = width * height;
  const v = u + cw * (height / 2);
  for (let y = 0; y < height / 2; y++) {
    const row = pitch * height + y * pitch;
    for (let x = 0; x < cw; x++) {
      out[row + 2 * x] = i420[u + y * cw + x]!;
      out[row + 2 * x + 1] = i420[v + y * cw + x]!;
    }
  }
  return out;
}

function rgbaAtPitch(rgba: Uint8Array, width: number, height: number, pitch: number): Uint8Array {
  if (pitch === width * 4) return rgba;
  const out = new Uint8Array(pitch * height);
  for (let y = 0; y < height; y++) out.set(rgba.subarray(y * width * 4, (y + 1) * width * 4), y * pitch);
  return out;
}

/** `slots` distinct frames in one device allocation. */
export interface DeviceRing {
  readonly width: number;
  readonly height: number;
  readonly layout: RingLayout;
  readonly pitch: number;
  readonly slots: number;
  /** The frame in slot `i % slots`, as a model emits it. */
  frame(i: number): CudaVideoFrame;
  /** Packed I420 of slot 0 (BT.601 limited range): what a download of it should give back. */
  readonly expectedSlot0: Uint8Array;
  /** Seconds spent drawing and uploading. */
  readonly uploadSeconds: number;
  free(): void;
}

export function uploadDeviceRing(
  addon: NativeAddon,
  options: { width: number; height: number; layout: RingLayout; slots: number; device?: number },
): DeviceRing {
  const { width, height, layout, slots } = options;
  const started = performance.now();
  const pitch = ringPitch(width, layout);
  const slotBytes = ringSlotBytes(height, pitch, layout);
  const buffer: CudaBuffer = new addon.CudaBuffer(slotBytes * slots, options.device ?? 0);
  let expectedSlot0: Uint8Array = new Uint8Array(0);
  try {
    for (let slot = 0; slot < slots; slot++) {
      const rgba = ringPictureRgba(width, height, slot);
      const i420 = layout === 'nv12' || slot === 0 ? convertToYuv(rgba, { width, height, format: 'rgba' }) : undefined;
      if (slot === 0) expectedSlot0 = i420!;
      buffer.upload(
        layout === 'nv12' ? nv12AtPitch(i420!, width, height, pitch) : rgbaAtPitch(rgba, width, height, pitch),
        slot * slotBytes,
      );
    }
  } catch (error) {
    buffer.free();
    throw error;
  }
  const uploadSeconds = (performance.now() - started) / 1000;
  return {
    width,
    height,
    layout,
    pitch,
    slots,
    expectedSlot0,
    uploadSeconds,
    frame: (i) => ({
      width,
      height,
      format: 'cuda',
      cuda: { devicePtr: buffer.devicePtr + BigInt((i % slots) * slotBytes), pitch, layout, device: options.device ?? 0 },
    }),
    free: () => buffer.free(),
  };
}

/** How far a packed I420 picture is from the expected one: the largest difference, and how many samples differ by more than `tolerance`. */
export function compareI420(
  actual: Uint8Array,
  expected: Uint8Array,
  tolerance: number,
): { maxDiff: number; over: number; sizeMatches: boolean } {
  if (actual.length !== expected.length) return { maxDiff: 255, over: Math.max(actual.length, expected.length), sizeMatches: false };
  let maxDiff = 0;
  let over = 0;
  for (let i = 0; i < actual.length; i++) {
    const d = Math.abs(actual[i]! - expected[i]!);
    if (d > maxDiff) maxDiff = d;
    if (d > tolerance) over++;
  }
  return { maxDiff, over, sizeMatches: true };
}

/**
 * The bars of a decoded picture (packed I420) against their colours: the largest Y/U/V difference
 * at the centre of each bar, half-way down the bar band. A decoded stream of this picture should
 * be within a few levels; a wrong layout, a colour swap or a frame of something else is far off.
 */
export function barsDistance(i420: Uint8Array, width: number, height: number): number {
  if (i420.length < yuvByteLength(width, height)) return 255;
  const cw = width / 2;
  const y = ((height >> 2) >> 1) << 1; // half-way down the bars (which fill the top half)
  let worst = 0;
  BAR_YUV.forEach((expected, i) => {
    const x = Math.floor(((i + 0.5) * width) / BAR_YUV.length) & ~1;
    const c = (y / 2) * cw + x / 2;
    const got = { y: i420[y * width + x]!, u: i420[width * height + c]!, v: i420[width * height * 1.25 + c]! };
    worst = Math.max(worst, Math.abs(got.y - expected.y), Math.abs(got.u - expected.u), Math.abs(got.v - expected.v));
  });
  return worst;
}
