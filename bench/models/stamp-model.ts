/**
 * `stamp` — the glass-latency benchmark's model: the `pattern` picture (scrolling colour bars,
 * a patch, a caption, a frame stamp) at 1280x720@30 or 1920x1080@30, which also records, per
 * stamped frame id, the wall-clock time at which the frame was handed to `session.emit()`.
 *
 * The stamp is `drawFrameStamp(canvas, frame & 0xffff, stamp.x, stamp.y)` exactly as in
 * `pattern` (16 cells of 16 px at any size; at 720p at the same place as `pattern`'s), so the page
 * reads it with the same code. Emit times are `performance.timeOrigin + performance.now()`
 * (epoch ms, sub-millisecond), comparable with a page's `performance.timeOrigin + t` on the
 * same machine. Each frame's `timestampUs` is also mapped to its id, so the benchmark can tell
 * which frame the runtime's encoder is working on.
 */

import { defineModel, type DropPolicy } from '../../runtime/index.ts';
import { PictureDrawer, RESOLUTIONS, stampPosition, type Resolution } from '../support/pictures.ts';

export const FPS = 30;

/** Frame id (16 bits) → epoch ms at which the frame was handed to `emit()`, for the current session. */
export const emitTimes = new Map<number, number>();
/** The frame's `timestampUs` (what the runtime's encoder sees) → frame id (16 bits), for the current session. */
export const frameIds = new Map<number, number>();
/** The session the maps belong to (a new session clears them). */
export let emitSession: string | undefined;

/** Size and stamp position of the `stamp` model at `resolution`. */
export function stampGeometry(resolution: Resolution): { width: number; height: number; stamp: { x: number; y: number } } {
  const { width, height } = RESOLUTIONS[resolution];
  return { width, height, stamp: stampPosition(width, height) };
}

/** Diagnostics: the track's emission queue, and a model that emits slower than the track's fps. */
export interface StampModelOptions {
  /** The track's `queueFrames` (runtime default when left out). */
  readonly queueFrames?: number;
  /** The track's `dropPolicy` (runtime default when left out). */
  readonly dropPolicy?: DropPolicy;
  /** The rate of the model's frame clock, `session.ticks(emitFps)`; default the track's fps (30). */
  readonly emitFps?: number;
}

export function createStampModel(resolution: Resolution, options: StampModelOptions = {}) {
  const { width, height } = stampGeometry(resolution);
  return defineModel({
    name: 'stamp',
    version: '1.0.0',
    description: `pattern-like ${height}p30 picture with a frame stamp; records emit times for latency benchmarks.`,
    fps: FPS,
    tracks: [
      {
        name: 'main_video',
        kind: 'video',
        direction: 'recvonly',
        width,
        height,
        ...(options.queueFrames === undefined ? {} : { queueFrames: options.queueFrames }),
        ...(options.dropPolicy === undefined ? {} : { dropPolicy: options.dropPolicy }),
      },
    ],
    async run(session) {
      emitTimes.clear();
      frameIds.clear();
      emitSession = session.id;
      const drawer = new PictureDrawer(width, height, 'pattern');
      for await (const frame of session.ticks(options.emitFps)) {
        drawer.draw(frame);
        const id = frame & 0xffff;
        const now = performance.now();
        emitTimes.set(id, performance.timeOrigin + now);
        const timestampUs = now * 1000;
        frameIds.set(timestampUs, id);
        if (frameIds.size > 4096) frameIds.delete(frameIds.keys().next().value!);
        await session.emit('main_video', drawer.canvas.frame(timestampUs));
      }
    },
  });
}

/** The 720p model, as before `createStampModel` existed. */
export default createStampModel('720p');
