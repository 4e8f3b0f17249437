/**
 * Draws into an I420 frame in place: solid rectangles, text, and a machine-readable frame stamp.
 * Writing YUV directly skips a colour conversion per frame, which matters at 720p30 on a CPU.
 */

import type { VideoFrame } from 'arclight/runtime';
import { GLYPH_HEIGHT, GLYPH_WIDTH, glyph } from './font5x7.ts';

export interface Yuv {
  readonly y: number;
  readonly u: number;
  readonly v: number;
}

/** BT.601 limited range, the matrix browsers assume for untagged H.264/VP8. */
export function rgbToYuv(r: number, g: number, b: number): Yuv {
  const clamp = (x: number) => Math.max(0, Math.min(255, Math.round(x)));
  return {
    y: clamp(16 + 0.257 * r + 0.504 * g + 0.098 * b),
    u: clamp(128 - 0.148 * r - 0.291 * g + 0.439 * b),
    v: clamp(128 + 0.439 * r - 0.368 * g - 0.071 * b),
  };
}

export function parseHexColor(hex: string): { r: number; g: number; b: number } {
  const n = Number.parseInt(hex.slice(1), 16);
  return { r: (n >> 16) & 0xff, g: (n >> 8) & 0xff, b: n & 0xff };
}

export class I420Canvas {
  readonly width: number;
  readonly height: number;
  readonly data: Uint8Array;
  readonly #chromaWidth: number;
  readonly #uOffset: number;
  readonly #vOffset: number;

  constructor(width: number, height: number) {
    if (width % 2 !== 0 || height % 2 !== 0) throw new RangeError('I420Canvas needs even dimensions');
    this.width = width;
    this.height = height;
    this.#chromaWidth = width / 2;
    this.#uOffset = width * height;
    this.#vOffset = this.#uOffset + (width / 2) * (height / 2);
    this.data = new Uint8Array(this.#vOffset + (width / 2) * (height / 2));
  }

  /** The canvas as a frame for `session.emit` (the runtime copies it, so drawing may go on). */
  frame(timestampUs = performance.now() * 1000): VideoFrame {
    return { width: this.width, height: this.height, format: 'i420', data: this.data, timestampUs };
  }

  fill(color: Yuv): void {
    this.data.fill(color.y, 0, this.#uOffset);
    this.data.fill(color.u, this.#uOffset, this.#vOffset);
    this.data.fill(color.v, this.#vOffset);
  }

  /** Fills a rectangle; x, y, w, h are snapped to even values so chroma covers it exactly. */
  fillRect(x: number, y: number, w: number, h: number, color: Yuv): void {
    const x0 = Math.max(0, x & ~1);
    const y0 = Math.max(0, y & ~1);
    const x1 = Math.min(this.width, (x + w + 1) & ~1);
    const y1 = Math.min(this.height, (y + h + 1) & ~1);
    if (x1 <= x0 || y1 <= y0) return;
    for (let row = y0; row < y1; row++) this.data.fill(color.y, row * this.width + x0, row * this.width + x1);
    const cw = this.#chromaWidth;
    for (let row = y0 / 2; row < y1 / 2; row++) {
      this.data.fill(color.u, this.#uOffset + row * cw + x0 / 2, this.#uOffset + row * cw + x1 / 2);
      this.data.fill(color.v, this.#vOffset + row * cw + x0 / 2, this.#vOffset + row * cw + x1 / 2);
    }
  }

  /** Draws text in the luma plane only (white or any grey), `scale` pixels per font pixel. */
  drawText(text: string, x: number, y: number, scale: number, luma = 235): void {
    let cursor = x;
    for (const char of text) {
      const rows = glyph(char);
      for (let gy = 0; gy < GLYPH_HEIGHT; gy++) {
        const bits = rows[gy]!;
        for (let gx = 0; gx < GLYPH_WIDTH; gx++) {
          if (!(bits & (0x10 >> gx))) continue;
          const px = cursor + gx * scale;
          const py = y + gy * scale;
          for (let sy = 0; sy < scale; sy++) {
            const row = py + sy;
            if (row < 0 || row >= this.height) continue;
            const start = Math.max(0, px);
            const end = Math.min(this.width, px + scale);
            if (end > start) this.data.fill(luma, row * this.width + start, row * this.width + end);
          }
        }
      }
      cursor += (GLYPH_WIDTH + 1) * scale;
    }
  }
}

/**
 * A frame id as a row of black/white cells, readable after lossy coding: bit i (LSB first)
 * is cell i. Used by latency benchmarks to match a decoded picture to the frame the model
 * emitted. Cells are large (STAMP_CELL px) so compression cannot flip them.
 */
export const STAMP_BITS = 16;
export const STAMP_CELL = 16;

export function drawFrameStamp(canvas: I420Canvas, id: number, x: number, y: number): void {
  const white = { y: 235, u: 128, v: 128 };
  const black = { y: 16, u: 128, v: 128 };
  for (let bit = 0; bit < STAMP_BITS; bit++) {
    canvas.fillRect(x + bit * STAMP_CELL, y, STAMP_CELL, STAMP_CELL, (id >> bit) & 1 ? white : black);
  }
}

/** Reads a stamp from luma samples: `lumaAt(x, y)` returns 0..255. */
export function readFrameStamp(lumaAt: (x: number, y: number) => number, x: number, y: number): number {
  let id = 0;
  for (let bit = 0; bit < STAMP_BITS; bit++) {
    if (lumaAt(x + bit * STAMP_CELL + STAMP_CELL / 2, y + STAMP_CELL / 2) > 128) id |= 1 << bit;
  }
  return id;
}
