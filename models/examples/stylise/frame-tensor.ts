/**
 * Webcam frame → network input: the centred square of the frame, scaled (bilinear) to
 * size × size, as an RGB float32 tensor in 0–1, planar (CHW) — the layout ONNX image models take.
 * I420 input is converted with BT.601 limited range, the inverse of what `convertToYuv` writes, so
 * a picture that goes through the network at strength 0 comes back the colour it went in.
 */

import type { VideoFrame } from 'arclight/runtime';

/** Per output column (or row): the two source samples and the weight of the second. */
interface Axis {
  readonly first: Int32Array;
  readonly second: Int32Array;
  readonly weight: Float32Array;
}

/**
 * Output samples 0..size-1 over the source span [start, start + span) (continuous coordinates,
 * pixel centres at i + 0.5), on a grid `factor` times as dense as the source (0.5: chroma).
 * Samples stay within the span's pixels, so nothing outside the crop bleeds in at its edges.
 */
function axis(size: number, start: number, span: number, factor: number, limit: number): Axis {
  const first = new Int32Array(size);
  const second = new Int32Array(size);
  const weight = new Float32Array(size);
  const highest = Math.min((start + span) * factor - 1, limit - 1);
  const lowest = Math.min(Math.max(start * factor, 0), highest);
  for (let o = 0; o < size; o++) {
    const at = Math.min(Math.max((start + ((o + 0.5) * span) / size) * factor - 0.5, lowest), highest);
    const i = Math.floor(at);
    first[o] = i;
    second[o] = Math.min(i + 1, limit - 1);
    weight[o] = at - i;
  }
  return { first, second, weight };
}

const clamp01 = (v: number): number => (v < 0 ? 0 : v > 1 ? 1 : v);

/**
 * Fills `into` (3·size·size values, or a new array) from `frame` and returns it.
 * Accepts `i420` and `rgba` frames of any size (odd sizes included).
 */
export function frameToTensor(frame: VideoFrame, size: number, into?: Float32Array): Float32Array {
  const { width, height, data } = frame;
  const plane = size * size;
  const out = into ?? new Float32Array(3 * plane);
  if (out.length !== 3 * plane) throw new RangeError(`frameToTensor: into must hold ${3 * plane} values, got ${out.length}`);
  const side = Math.min(width, height);
  const left = (width - side) / 2;
  const top = (height - side) / 2;
  if (frame.format === 'rgba') {
    if (data.length < width * height * 4) throw new RangeError(`frameToTensor: ${width}x${height} rgba needs ${width * height * 4} bytes`);
    const rows = axis(size, top, side, 1, height);
    const cols = axis(size, left, side, 1, width);
    const stride = width * 4;
    for (let y = 0; y < size; y++) {
      for (let x = 0; x < size; x++) {
        const o = y * size + x;
        for (let c = 0; c < 3; c++) {
          const r0 = rows.first[y]! * stride + c;
          const r1 = rows.second[y]! * stride + c;
          const c0 = cols.first[x]! * 4;
          const c1 = cols.second[x]! * 4;
          const fx = cols.weight[x]!;
          const a = data[r0 + c0]! + (data[r0 + c1]! - data[r0 + c0]!) * fx;
          const b = data[r1 + c0]! + (data[r1 + c1]! - data[r1 + c0]!) * fx;
          out[c * plane + o] = (a + (b - a) * rows.weight[y]!) / 255;
        }
      }
    }
    return out;
  }
  const chromaWidth = Math.ceil(width / 2);
  const chromaHeight = Math.ceil(height / 2);
  const uOffset = width * height;
  const vOffset = uOffset + chromaWidth * chromaHeight;
  if (data.length < vOffset + chromaWidth * chromaHeight)
    throw new RangeError(`frameToTensor: ${width}x${height} i420 needs ${vOffset + chromaWidth * chromaHeight} bytes`);
  const rows = axis(size, top, side, 1, height);
  const cols = axis(size, left, side, 1, width);
  const chromaRows = axis(size, top, side, 0.5, chromaHeight);
  const chromaCols = axis(size, left, side, 0.5, chromaWidth);
  // Bilinear in each plane, the sample positions looked up per row and per column (this runs for
  // every pixel of every frame: no calls, no allocation inside).
  for (let y = 0; y < size; y++) {
    const y0 = rows.first[y]! * width;
    const y1 = rows.second[y]! * width;
    const fy = rows.weight[y]!;
    const c0 = chromaRows.first[y]! * chromaWidth;
    const c1 = chromaRows.second[y]! * chromaWidth;
    const fcy = chromaRows.weight[y]!;
    const row = y * size;
    for (let x = 0; x < size; x++) {
      const x0 = cols.first[x]!;
      const x1 = cols.second[x]!;
      const fx = cols.weight[x]!;
      const lumaTop = data[y0 + x0]! + (data[y0 + x1]! - data[y0 + x0]!) * fx;
      const lumaBottom = data[y1 + x0]! + (data[y1 + x1]! - data[y1 + x0]!) * fx;
      const luma = 1.164383 * (lumaTop + (lumaBottom - lumaTop) * fy - 16);
      const u0 = uOffset + c0 + chromaCols.first[x]!;
      const u1 = uOffset + c0 + chromaCols.second[x]!;
      const u2 = uOffset + c1 + chromaCols.first[x]!;
      const u3 = uOffset + c1 + chromaCols.second[x]!;
      const fcx = chromaCols.weight[x]!;
      const uTop = data[u0]! + (data[u1]! - data[u0]!) * fcx;
      const uBottom = data[u2]! + (data[u3]! - data[u2]!) * fcx;
      const u = uTop + (uBottom - uTop) * fcy - 128;
      const dv = vOffset - uOffset;
      const vTop = data[u0 + dv]! + (data[u1 + dv]! - data[u0 + dv]!) * fcx;
      const vBottom = data[u2 + dv]! + (data[u3 + dv]! - data[u2 + dv]!) * fcx;
      const v = vTop + (vBottom - vTop) * fcy - 128;
      const o = row + x;
      out[o] = clamp01((luma + 1.596027 * v) / 255);
      out[plane + o] = clamp01((luma - 0.391762 * u - 0.812968 * v) / 255);
      out[2 * plane + o] = clamp01((luma + 2.017232 * u) / 255);
    }
  }
  return out;
}
