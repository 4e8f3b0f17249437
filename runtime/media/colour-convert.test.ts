/**
 * Colour conversion against a plain float64 reference, on random pixels at odd sizes, for every
 * source format, layout, sample type and target: the JavaScript path and — where built (always in
 * CI) — the native addon, each within 1 LSB. Bad arguments throw, never crash.
 */

import { describe, expect, it } from 'vitest';
import { nativeAddonStatus } from '../native/native-addon.ts';
import { convertToYuv, yuvByteLength, type YuvSourceFormat, type YuvSourceLayout, type YuvTarget } from './colour-convert.ts';

const SIZES: ReadonlyArray<[number, number]> = [
  [1, 1],
  [3, 5],
  [17, 9],
  [33, 31],
  [64, 48],
];
const FORMATS: readonly YuvSourceFormat[] = ['rgb', 'rgba', 'bgr'];
const LAYOUTS: readonly YuvSourceLayout[] = ['hwc', 'chw'];
const TARGETS: readonly YuvTarget[] = ['i420', 'nv12'];

/** Deterministic pseudo-random numbers (mulberry32). */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The BT.601 limited-range reference, written out plainly: r, g, b of pixel (x, y) in [0, 255]. */
function reference(
  width: number,
  height: number,
  rgbAt: (x: number, y: number) => [number, number, number],
  target: YuvTarget,
): Uint8Array {
  const out = new Uint8Array(yuvByteLength(width, height));
  const clamp = (v: number) => Math.min(255, Math.max(0, Math.round(v)));
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const [r, g, b] = rgbAt(x, y);
      out[y * width + x] = clamp(16 + (0.2567890625 * 256 * r + 0.50412890625 * 256 * g + 0.09790625 * 256 * b) / 256);
    }
  }
  const cw = Math.ceil(width / 2);
  const ch = Math.ceil(height / 2);
  for (let cy = 0; cy < ch; cy++) {
    for (let cx = 0; cx < cw; cx++) {
      const block: Array<[number, number, number]> = [];
      for (let y = 2 * cy; y < Math.min(height, 2 * cy + 2); y++)
        for (let x = 2 * cx; x < Math.min(width, 2 * cx + 2); x++) block.push(rgbAt(x, y));
      const mean = [0, 1, 2].map((k) => block.reduce((s, p) => s + p[k]!, 0) / block.length) as [number, number, number];
      const [r, g, b] = mean;
      const u = clamp(128 + (-37.945 * r - 74.494 * g + 112.439 * b) / 256);
      const v = clamp(128 + (112.439 * r - 94.154 * g - 18.285 * b) / 256);
      const c = cy * cw + cx;
      if (target === 'i420') {
        out[width * height + c] = u;
        out[width * height + cw * ch + c] = v;
      } else {
        out[width * height + 2 * c] = u;
        out[width * height + 2 * c + 1] = v;
      }
    }
  }
  return out;
}

function maxDifference(a: Uint8Array, b: Uint8Array): number {
  let max = 0;
  for (let i = 0; i < a.length; i++) max = Math.max(max, Math.abs(a[i]! - b[i]!));
  return max;
}

const native = nativeAddonStatus();
const implementations: ReadonlyArray<'js' | 'native'> = native.loaded ? ['js', 'native'] : ['js'];

describe('convertToYuv', () => {
  it('has the native addon where CI builds it', () => {
    // CI installs cmake and builds the addon in `npm ci`; locally it may be absent.
    if (process.env['CI']) expect(native, native.reason).toMatchObject({ loaded: true });
  });

  for (const implementation of implementations) {
    it(`${implementation}: matches the float64 reference within 1 LSB, every format, layout, type and target, odd sizes`, () => {
      const next = random(42);
      for (const [width, height] of SIZES) {
        for (const format of FORMATS) {
          const channels = format === 'rgba' ? 4 : 3;
          for (const layout of LAYOUTS) {
            for (const type of ['uint8', 'float01', 'float255'] as const) {
              const n = width * height * channels;
              // Floats stray a little outside the range too: they must clamp.
              const src =
                type === 'uint8'
                  ? Uint8Array.from({ length: n }, () => Math.floor(next() * 256))
                  : Float32Array.from({ length: n }, () => (next() * 1.1 - 0.05) * (type === 'float255' ? 255 : 1));
              const scale = type === 'float255' ? 255 : 1;
              const sample = (x: number, y: number, c: number) => {
                const i = y * width + x;
                const raw = layout === 'hwc' ? src[i * channels + c]! : src[c * width * height + i]!;
                const v = type === 'uint8' ? raw : (raw * 255) / scale;
                return Math.min(255, Math.max(0, v));
              };
              const order = format === 'bgr' ? [2, 1, 0] : [0, 1, 2];
              const rgbAt = (x: number, y: number): [number, number, number] => [
                sample(x, y, order[0]!),
                sample(x, y, order[1]!),
                sample(x, y, order[2]!),
              ];
              for (const target of TARGETS) {
                const got = convertToYuv(src, { width, height, format, layout, scale, target, implementation, threads: 3 });
                const want = reference(width, height, rgbAt, target);
                expect(
                  maxDifference(got, want),
                  `${implementation} ${width}x${height} ${format} ${layout} ${type} ${target}`,
                ).toBeLessThanOrEqual(1);
              }
            }
          }
        }
      }
    });

    it(`${implementation}: refuses bad arguments with TypeError/RangeError`, () => {
      const ok = { width: 3, height: 3, format: 'rgb', implementation } as const;
      expect(() => convertToYuv(new Uint8Array(26), ok)).toThrow(RangeError);
      expect(() => convertToYuv(new Uint8Array(27), { ...ok, width: 0 })).toThrow(RangeError);
      expect(() => convertToYuv(new Uint8Array(27), { ...ok, format: 'yuv' as never })).toThrow(TypeError);
      expect(() => convertToYuv(new Uint8Array(27), { ...ok, layout: 'whc' as never })).toThrow(TypeError);
      expect(() => convertToYuv(new Uint8Array(27), { ...ok, target: 'nv21' as never })).toThrow(TypeError);
      expect(() => convertToYuv(new Uint16Array(27) as never, ok)).toThrow(TypeError);
      expect(() => convertToYuv(new Uint8Array(27), { ...ok, into: new Uint8Array(5) })).toThrow(RangeError);
      expect(convertToYuv(new Uint8Array(27), ok)).toHaveLength(yuvByteLength(3, 3));
    });
  }
});
