/**
 * `stamp` — the glass-latency benchmark's model: the `pattern` picture (scrolling colour bars,
 * a patch, a caption, a frame stamp) at 1280x720@30, which also records, per stamped frame id,
 * the wall-clock time at which the frame was handed to `session.emit()`.
 *
 * The stamp is `drawFrameStamp(canvas, frame & 0xffff, STAMP.x, STAMP.y)` exactly as in
 * `pattern`, so the page reads it with the same code. Emit times are
 * `performance.timeOrigin + performance.now()` (epoch ms, sub-millisecond), comparable with a
 * page's `performance.timeOrigin + t` on the same machine.
 */

import { defineModel } from '../../runtime/index.ts';
import { drawFrameStamp, I420Canvas, rgbToYuv, type Yuv } from '../../models/examples/shared/i420-canvas.ts';

export const WIDTH = 1280;
export const HEIGHT = 720;
export const FPS = 30;
export const STAMP = { x: 40, y: 280 } as const;
const PATCH = { x: 40, y: 40, size: 200 } as const;

/** Frame id (16 bits) → epoch ms at which the frame was handed to `emit()`, for the current session. */
export const emitTimes = new Map<number, number>();
/** The session the map belongs to (a new session clears it). */
export let emitSession: string | undefined;

const BARS: readonly Yuv[] = [
  [192, 192, 192], [192, 192, 0], [0, 192, 192], [0, 192, 0], [192, 0, 192], [192, 0, 0], [0, 0, 192], [32, 32, 32],
].map(([r, g, b]) => rgbToYuv(r!, g!, b!));
const BLACK: Yuv = { y: 16, u: 128, v: 128 };
const RED = rgbToYuv(0xe0, 0x10, 0x10);
const SPEED = 4;

export default defineModel({
  name: 'stamp',
  version: '1.0.0',
  description: 'pattern-like 720p30 picture with a frame stamp; records emit times for latency benchmarks.',
  fps: FPS,
  tracks: [{ name: 'main_video', kind: 'video', direction: 'recvonly', width: WIDTH, height: HEIGHT }],
  async run(session) {
    emitTimes.clear();
    emitSession = session.id;
    const canvas = new I420Canvas(WIDTH, HEIGHT);
    for await (const frame of session.ticks()) {
      draw(canvas, frame);
      const id = frame & 0xffff;
      emitTimes.set(id, performance.timeOrigin + performance.now());
      await session.emit('main_video', canvas.frame());
    }
  },
});

function draw(canvas: I420Canvas, frame: number): void {
  const barWidth = WIDTH / BARS.length;
  const offset = Math.floor(frame * SPEED) % WIDTH;
  for (let i = 0; i < BARS.length; i++) {
    const x = (i * barWidth + offset) % WIDTH;
    canvas.fillRect(x, 0, barWidth, HEIGHT, BARS[i]!);
    if (x + barWidth > WIDTH) canvas.fillRect(0, 0, x + barWidth - WIDTH, HEIGHT, BARS[i]!);
  }
  canvas.fillRect(PATCH.x - 8, PATCH.y - 8, PATCH.size + 16, PATCH.size + 16, BLACK);
  canvas.fillRect(PATCH.x, PATCH.y, PATCH.size, PATCH.size, RED);
  canvas.fillRect(STAMP.x - 8, STAMP.y - 8, 16 * 16 + 16, 32, BLACK);
  drawFrameStamp(canvas, frame & 0xffff, STAMP.x, STAMP.y);
  canvas.fillRect(0, HEIGHT - 150, WIDTH, 150, BLACK);
  canvas.drawText(`FRAME ${String(frame).padStart(6, '0')}`, 40, HEIGHT - 130, 6);
  canvas.drawText(new Date().toISOString().slice(11, 23), 640, HEIGHT - 130, 6);
  canvas.drawText('ARCLIGHT', 40, HEIGHT - 60, 5);
}
