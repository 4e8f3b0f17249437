/**
 * The pictures the benchmarks encode, at any even size: drawn straight into I420 (no colour
 * conversion per frame), so drawing costs little next to encoding.
 *
 * - `pattern`: what `models/examples/pattern` draws (scrolling colour bars, a red patch, the
 *   16-cell frame stamp, a caption strip with the frame counter and the clock), laid out for the
 *   frame size. Easy to compress: x264 needs ~0.9 Mbit/s for it at 720p30.
 * - `grain`: the same overlays on a luma plane of fresh, uncorrelated noise (128 ± 24) every frame
 *   and the bars' colours in the chroma planes. No encoder can predict it, so at any sane bitrate
 *   the rate control spends the whole budget: a stand-in for busy natural video at a fixed rate.
 *   The noise rows are copied from a pool at random offsets (memcpy, ~0.1 ms per 720p frame).
 */

import { drawFrameStamp, I420Canvas, rgbToYuv, type Yuv } from '../../models/examples/shared/i420-canvas.ts';
// The seeded PRNG (mulberry32) the network lab's loss draws on: every run draws the same noise.
import { seededRandom as random } from '../../test/support/network-lab/clock.ts';

export type Picture = 'pattern' | 'grain';

const BARS: readonly Yuv[] = [
  [192, 192, 192],
  [192, 192, 0],
  [0, 192, 192],
  [0, 192, 0],
  [192, 0, 192],
  [192, 0, 0],
  [0, 0, 192],
  [32, 32, 32],
].map(([r, g, b]) => rgbToYuv(r!, g!, b!));
const BLACK: Yuv = { y: 16, u: 128, v: 128 };
const RED = rgbToYuv(0xe0, 0x10, 0x10);
const SPEED = 4;

/** Where the stamp sits at each size: where `pattern` puts it at 720p, scaled with the frame. */
export function stampPosition(width: number, height: number): { x: number; y: number } {
  return { x: 2 * Math.round((40 * width) / 1280 / 2), y: 2 * Math.round((280 * height) / 720 / 2) };
}

export class PictureDrawer {
  readonly canvas: I420Canvas;
  readonly picture: Picture;
  readonly stamp: { x: number; y: number };
  readonly #scale: number;
  readonly #pool: Uint8Array | undefined;
  readonly #rand = random(0x5eed);

  constructor(width: number, height: number, picture: Picture) {
    this.canvas = new I420Canvas(width, height);
    this.picture = picture;
    this.stamp = stampPosition(width, height);
    this.#scale = width / 1280;
    if (picture === 'grain') {
      // 4 MiB of noise; rows are taken at random offsets, so consecutive frames share nothing.
      const pool = new Uint8Array(4 << 20);
      const r = random(42);
      for (let i = 0; i < pool.length; i++) pool[i] = 104 + Math.floor(r() * 49);
      this.#pool = pool;
    }
  }

  /** Draws frame number `frame` (its stamp is `frame & 0xffff`) and returns the canvas's bytes. */
  draw(frame: number): Uint8Array {
    const c = this.canvas;
    const { width: W, height: H } = c;
    const s = this.#scale;
    const barWidth = W / BARS.length;
    const offset = Math.floor(frame * SPEED * s) % W;
    for (let i = 0; i < BARS.length; i++) {
      const x = (i * barWidth + offset) % W;
      c.fillRect(x, 0, barWidth, H, BARS[i]!);
      if (x + barWidth > W) c.fillRect(0, 0, x + barWidth - W, H, BARS[i]!);
    }
    if (this.#pool) {
      const pool = this.#pool;
      for (let row = 0; row < H; row++) {
        const at = Math.floor(this.#rand() * (pool.length - W));
        c.data.set(pool.subarray(at, at + W), row * W);
      }
    }
    const patch = { x: Math.round(40 * s), y: Math.round(40 * s), size: Math.round(200 * s) };
    c.fillRect(patch.x - 8, patch.y - 8, patch.size + 16, patch.size + 16, BLACK);
    c.fillRect(patch.x, patch.y, patch.size, patch.size, RED);
    c.fillRect(this.stamp.x - 8, this.stamp.y - 8, 16 * 16 + 16, 32, BLACK);
    drawFrameStamp(c, frame & 0xffff, this.stamp.x, this.stamp.y);
    const strip = Math.round(150 * s);
    c.fillRect(0, H - strip, W, strip, BLACK);
    const text = Math.round(6 * s);
    c.drawText(`FRAME ${String(frame).padStart(6, '0')}`, Math.round(40 * s), H - Math.round(130 * s), text);
    c.drawText(new Date().toISOString().slice(11, 23), Math.round(640 * s), H - Math.round(130 * s), text);
    c.drawText('ARCLIGHT', Math.round(40 * s), H - Math.round(60 * s), Math.round(5 * s));
    return c.data;
  }
}

export const RESOLUTIONS = {
  '720p': { width: 1280, height: 720 },
  '1080p': { width: 1920, height: 1080 },
} as const;
export type Resolution = keyof typeof RESOLUTIONS;

export function parseResolutions(list: string): Resolution[] {
  const out = list.split(',').map((r) => r.trim());
  for (const r of out) if (!(r in RESOLUTIONS)) throw new Error(`unknown resolution "${r}": use 720p and/or 1080p`);
  return out as Resolution[];
}
