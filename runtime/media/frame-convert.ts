/**
 * Pixel-format conversion between the two layouts the runtime speaks (`i420`, `rgba`).
 *
 * Pure TypeScript on purpose: it runs off the encode hot path (tests, snapshots, models that
 * want RGBA back from an input track), so avoiding a native call and its worker-thread hop is
 * simpler than it is slow. The maths is BT.601 limited range, the same matrix swscale uses by
 * default, so frames converted here match what the encoder's own RGBA path feeds libx264/libvpx.
 */
import { videoFrameByteLength, type PixelFormat, type VideoFrame } from './frames.ts';

/** Returns `frame` in `format`; the same object when it already is in that format. */
export function convertVideoFrame(frame: VideoFrame, format: PixelFormat): VideoFrame {
  assertFrameShape(frame);
  if (frame.format === format) return frame;
  const data = format === 'rgba' ? i420ToRgba(frame) : rgbaToI420(frame);
  return withData(frame, format, data);
}

/** A tightly packed I420 frame filled with one colour: handy for tests and placeholder video. */
export function solidI420(width: number, height: number, y: number, u: number, v: number): VideoFrame {
  assertDimensions(width, height);
  const lumaSize = width * height;
  const chromaSize = Math.ceil(width / 2) * Math.ceil(height / 2);
  const data = new Uint8Array(lumaSize + 2 * chromaSize);
  data.fill(y, 0, lumaSize);
  data.fill(u, lumaSize, lumaSize + chromaSize);
  data.fill(v, lumaSize + chromaSize);
  return { width, height, format: 'i420', data };
}

/** Throws a RangeError for an unknown format, a bad size, or `data` too short for the shape. */
export function assertFrameShape(frame: VideoFrame): void {
  // Frames often come from untyped model code; an unknown format would otherwise be read as I420.
  if (frame.format !== 'i420' && frame.format !== 'rgba') {
    throw new RangeError(`unsupported pixel format ${String(frame.format)}`);
  }
  assertDimensions(frame.width, frame.height);
  const needed = videoFrameByteLength(frame.format, frame.width, frame.height);
  if (frame.data.byteLength < needed) {
    throw new RangeError(`${frame.format} frame ${frame.width}x${frame.height} needs ${needed} bytes, got ${frame.data.byteLength}`);
  }
}

function assertDimensions(width: number, height: number): void {
  if (!Number.isInteger(width) || !Number.isInteger(height) || width <= 0 || height <= 0) {
    throw new RangeError(`invalid frame size ${width}x${height}`);
  }
}

function withData(frame: VideoFrame, format: PixelFormat, data: Uint8Array): VideoFrame {
  const converted: { -readonly [K in keyof VideoFrame]: VideoFrame[K] } = {
    width: frame.width,
    height: frame.height,
    format,
    data,
  };
  if (frame.timestampUs !== undefined) converted.timestampUs = frame.timestampUs;
  if (frame.metadata !== undefined) converted.metadata = frame.metadata;
  return converted;
}

function clampByte(value: number): number {
  return value < 0 ? 0 : value > 255 ? 255 : value;
}

function i420ToRgba(frame: VideoFrame): Uint8Array {
  const { width, height, data } = frame;
  const chromaWidth = Math.ceil(width / 2);
  const uOffset = width * height;
  const vOffset = uOffset + chromaWidth * Math.ceil(height / 2);
  const out = new Uint8Array(width * height * 4);
  for (let row = 0; row < height; row++) {
    const lumaRow = row * width;
    const chromaRow = (row >> 1) * chromaWidth;
    for (let col = 0; col < width; col++) {
      const c = 298 * (data[lumaRow + col]! - 16);
      const d = data[uOffset + chromaRow + (col >> 1)]! - 128;
      const e = data[vOffset + chromaRow + (col >> 1)]! - 128;
      const o = (lumaRow + col) * 4;
      out[o] = clampByte((c + 409 * e + 128) >> 8);
      out[o + 1] = clampByte((c - 100 * d - 208 * e + 128) >> 8);
      out[o + 2] = clampByte((c + 516 * d + 128) >> 8);
      out[o + 3] = 255;
    }
  }
  return out;
}

function rgbaToI420(frame: VideoFrame): Uint8Array {
  const { width, height, data } = frame;
  const chromaWidth = Math.ceil(width / 2);
  const chromaHeight = Math.ceil(height / 2);
  const uOffset = width * height;
  const vOffset = uOffset + chromaWidth * chromaHeight;
  const out = new Uint8Array(vOffset + chromaWidth * chromaHeight);
  for (let i = 0, o = 0; o < uOffset; i += 4, o++) {
    const r = data[i]!;
    const g = data[i + 1]!;
    const b = data[i + 2]!;
    out[o] = ((66 * r + 129 * g + 25 * b + 128) >> 8) + 16;
  }
  // Chroma is the average of each 2x2 block; edge blocks of odd-sized frames average what exists.
  for (let cy = 0; cy < chromaHeight; cy++) {
    for (let cx = 0; cx < chromaWidth; cx++) {
      let r = 0;
      let g = 0;
      let b = 0;
      let n = 0;
      for (let dy = 0; dy < 2; dy++) {
        const y = 2 * cy + dy;
        if (y >= height) break;
        for (let dx = 0; dx < 2; dx++) {
          const x = 2 * cx + dx;
          if (x >= width) break;
          const i = (y * width + x) * 4;
          r += data[i]!;
          g += data[i + 1]!;
          b += data[i + 2]!;
          n++;
        }
      }
      r /= n;
      g /= n;
      b /= n;
      const c = cy * chromaWidth + cx;
      out[uOffset + c] = clampByte(Math.round((-38 * r - 74 * g + 112 * b) / 256) + 128);
      out[vOffset + c] = clampByte(Math.round((112 * r - 94 * g - 18 * b) / 256) + 128);
    }
  }
  return out;
}
