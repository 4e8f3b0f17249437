/**
 * `busy-1080p` — the `busy` load (bench/models/busy-model.ts) at 1920x1080: fresh noise every
 * frame, its track at 4,500 kbit/s (busy's 2,000 kbit/s scaled by the pixel count, as the
 * runtime scales its default bitrate). bench/recording-cost.ts serves it.
 */

import { defineBusyModel } from './busy-model.ts';

export const WIDTH = 1920;
export const HEIGHT = 1080;
export const BITRATE_KBPS = 4500;

export default defineBusyModel({ name: 'busy-1080p', width: WIDTH, height: HEIGHT, bitrateKbps: BITRATE_KBPS });
