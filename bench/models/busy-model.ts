/**
 * `busy` — runtime-cpu's model for a 720p30 stream at ~2 Mbit/s: the `pattern` overlays (patch,
 * frame stamp, caption strip) on a luma plane of fresh noise every frame (`grain` in
 * bench/support/pictures.ts), with the track's bitrate set to 2,000 kbps. The noise cannot be
 * predicted, so the encoders' rate control spends the whole budget: every frame costs what a
 * busy natural picture at 2 Mbit/s would, where `pattern` needs only ~0.9 Mbit/s (H.264) or
 * ~0.4 Mbit/s (VP8). Drawing costs about as much as `pattern` (noise rows are copied from a pool).
 * `defineBusyModel` makes the same load at another size (bench/models/busy-1080p-model.ts).
 */

import { defineModel } from '../../runtime/index.ts';
import { PictureDrawer } from '../support/pictures.ts';

export const WIDTH = 1280;
export const HEIGHT = 720;
export const FPS = 30;
export const BITRATE_KBPS = 2000;

export interface BusyModelOptions {
  readonly name: string;
  readonly width: number;
  readonly height: number;
  readonly bitrateKbps: number;
}

/** Noise under the pattern overlays at `width`×`height`, 30 fps, its track encoded at `bitrateKbps`. */
export function defineBusyModel({ name, width, height, bitrateKbps }: BusyModelOptions) {
  return defineModel({
    name,
    version: '1.0.0',
    description: `${width}x${height} noise at ${FPS} fps under the pattern overlays, encoded at ${bitrateKbps} kbit/s (a benchmark load).`,
    fps: FPS,
    tracks: [{ name: 'main_video', kind: 'video', direction: 'recvonly', width, height, bitrateKbps }],
    async run(session) {
      const drawer = new PictureDrawer(width, height, 'grain');
      for await (const frame of session.ticks()) {
        drawer.draw(frame);
        await session.emit('main_video', drawer.canvas.frame());
      }
    },
  });
}

export default defineBusyModel({ name: 'busy', width: WIDTH, height: HEIGHT, bitrateKbps: BITRATE_KBPS });
