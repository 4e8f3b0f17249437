/**
 * Model output → encoder input: RGB/RGBA/BGR pixels, uint8 or float32 (0–1 or 0–255), interleaved
 * (HWC) or planar (CHW, a tensor's usual layout), into I420 or NV12, BT.601 limited range — the
 * matrix swscale and frame-convert.ts use. This runs on every frame of a model that produces
 * tensors, so the native addon does it when built (vectorised, rows over threads); otherwise the
 * JavaScript here, which computes in float64 and rounds once — the reference the native code is
 * tested against (within 1 LSB).
 *
 * @example
 * ```ts
 * import { convertToYuv } from 'arclight/runtime';
 * const data = convertToYuv(tensor.data as Float32Array, { width: 512, height: 512, format: 'rgb', layout: 'chw', scale: 1 });
 * await session.emit('main_video', { width: 512, height: 512, format: 'i420', data });
 * ```
 */

import { nativeAddon, type YuvSourceFormat, type YuvSourceLayout, type YuvTarget } from '../native/native-addon.ts';

export type { YuvSourceFormat, YuvSourceLayout, YuvTarget };

export interface YuvConvertOptions {
  readonly width: number;
  readonly height: number;
  readonly format: YuvSourceFormat;
  /** Default `hwc` (interleaved). */
  readonly layout?: YuvSourceLayout;
  /** Float input: the value of full intensity, 1 (default) or 255. Ignored for uint8. */
  readonly scale?: 1 | 255;
  /** Default `i420`. */
  readonly target?: YuvTarget;
  /** Native only: rows split over this many threads. Default 1. */
  readonly threads?: number;
  /** Default `auto`: native when built, else JavaScript. */
  readonly implementation?: 'auto' | 'native' | 'js';
  /** Write here (exactly yuvByteLength bytes) instead of a new array. */
  readonly into?: Uint8Array;
}

const MAX_SIDE = 16384;

/** Bytes of a 4:2:0 frame (I420 or NV12) of this size. */
export function yuvByteLength(width: number, height: number): number {
  return width * height + 2 * Math.ceil(width / 2) * Math.ceil(height / 2);
}

/** Converts `src` (see YuvConvertOptions); throws TypeError/RangeError for a wrong shape. */
export function convertToYuv(src: Uint8Array | Float32Array, options: YuvConvertOptions): Uint8Array {
  const { width, height, format } = options;
  const layout = options.layout ?? 'hwc';
  const target = options.target ?? 'i420';
  const scale = options.scale ?? 1;
  const threads = options.threads ?? 1;
  if (!Number.isInteger(width) || !Number.isInteger(height) || width < 1 || height < 1 || width > MAX_SIDE || height > MAX_SIDE) {
    throw new RangeError(`convertToYuv: width and height must be integers 1–${MAX_SIDE}, got ${width}x${height}`);
  }
  if (format !== 'rgb' && format !== 'rgba' && format !== 'bgr')
    throw new TypeError(`convertToYuv: format must be rgb, rgba or bgr, got ${String(format)}`);
  if (layout !== 'hwc' && layout !== 'chw') throw new TypeError(`convertToYuv: layout must be hwc or chw, got ${String(layout)}`);
  if (target !== 'i420' && target !== 'nv12') throw new TypeError(`convertToYuv: target must be i420 or nv12, got ${String(target)}`);
  if (scale !== 1 && scale !== 255) throw new TypeError(`convertToYuv: scale must be 1 or 255, got ${String(scale)}`);
  if (!(src instanceof Uint8Array) && !(src instanceof Float32Array))
    throw new TypeError('convertToYuv: src must be a Uint8Array or a Float32Array');
  const channels = format === 'rgba' ? 4 : 3;
  if (src.length !== width * height * channels) {
    throw new RangeError(`convertToYuv: ${width}x${height} ${format} needs ${width * height * channels} samples, got ${src.length}`);
  }
  const dst = options.into ?? new Uint8Array(yuvByteLength(width, height));
  if (dst.length !== yuvByteLength(width, height))
    throw new RangeError(`convertToYuv: into must be ${yuvByteLength(width, height)} bytes, got ${dst.length}`);
  const implementation = options.implementation ?? 'auto';
  const addon = implementation === 'js' ? undefined : nativeAddon();
  if (implementation === 'native' && !addon) throw new TypeError('convertToYuv: the native addon is not loaded (see nativeAddonStatus())');
  if (addon) addon.convertToYuv(src, dst, width, height, format, layout, scale, target, Math.max(1, Math.floor(threads)));
  else convertInJs(src, dst, width, height, format, layout, src instanceof Float32Array ? 255 / scale : 1, target);
  return dst;
}

function convertInJs(
  src: Uint8Array | Float32Array,
  dst: Uint8Array,
  width: number,
  height: number,
  format: YuvSourceFormat,
  layout: YuvSourceLayout,
  toByte: number,
  target: YuvTarget,
): void {
  const channels = format === 'rgba' ? 4 : 3;
  const plane = width * height;
  const [ri, gi, bi] = format === 'bgr' ? [2, 1, 0] : [0, 1, 2];
  // One pass into three planes of [0, 255] values, whatever the source's order, layout and type;
  // then straight loops over them (no per-sample calls: this is the no-compiler fallback).
  const r = new Float32Array(plane);
  const g = new Float32Array(plane);
  const b = new Float32Array(plane);
  const clampTo = (v: number) => (v < 0 ? 0 : v > 255 ? 255 : v);
  if (layout === 'hwc') {
    for (let i = 0, o = 0; i < plane; i++, o += channels) {
      r[i] = clampTo(src[o + ri]! * toByte);
      g[i] = clampTo(src[o + gi]! * toByte);
      b[i] = clampTo(src[o + bi]! * toByte);
    }
  } else {
    const rOff = ri * plane;
    const gOff = gi * plane;
    const bOff = bi * plane;
    for (let i = 0; i < plane; i++) {
      r[i] = clampTo(src[rOff + i]! * toByte);
      g[i] = clampTo(src[gOff + i]! * toByte);
      b[i] = clampTo(src[bOff + i]! * toByte);
    }
  }
  for (let i = 0; i < plane; i++) dst[i] = byte(16 + (65.738 * r[i]! + 129.057 * g[i]! + 25.064 * b[i]!) / 256);
  const cw = Math.ceil(width / 2);
  const ch = Math.ceil(height / 2);
  for (let cy = 0; cy < ch; cy++) {
    const y0 = 2 * cy;
    const rows = y0 + 1 < height ? 2 : 1;
    for (let cx = 0; cx < cw; cx++) {
      const x0 = 2 * cx;
      const cols = x0 + 1 < width ? 2 : 1;
      // The mean of the 2x2 block; edge blocks of odd sizes average the pixels that exist.
      let rs = 0;
      let gs = 0;
      let bs = 0;
      for (let dy = 0; dy < rows; dy++) {
        const row = (y0 + dy) * width + x0;
        for (let dx = 0; dx < cols; dx++) {
          rs += r[row + dx]!;
          gs += g[row + dx]!;
          bs += b[row + dx]!;
        }
      }
      const n = rows * cols;
      const rm = rs / n;
      const gm = gs / n;
      const bm = bs / n;
      const u = byte(128 + (-37.945 * rm - 74.494 * gm + 112.439 * bm) / 256);
      const v = byte(128 + (112.439 * rm - 94.154 * gm - 18.285 * bm) / 256);
      const c = cy * cw + cx;
      if (target === 'i420') {
        dst[plane + c] = u;
        dst[plane + cw * ch + c] = v;
      } else {
        dst[plane + 2 * c] = u;
        dst[plane + 2 * c + 1] = v;
      }
    }
  }
}

function byte(v: number): number {
  const r = Math.round(v);
  return r < 0 ? 0 : r > 255 ? 255 : r;
}
