/**
 * A model that emits fresh noise every frame (bench/support/pictures.ts's `grain`), so its
 * encoder spends its whole rate: what the network-lab tests push through a cap or a lossy path.
 */

import { defineModel } from '../../runtime/index.ts';
import { PictureDrawer } from '../../bench/support/pictures.ts';

export function grainModel(name: string, width: number, height: number, bitrateKbps: number) {
  return defineModel({
    name,
    version: '1.0.0',
    description: 'fresh noise every frame: the encoder spends its whole budget',
    fps: 30,
    tracks: [{ name: 'main_video', kind: 'video', direction: 'recvonly', width, height, bitrateKbps }],
    async run(session) {
      const drawer = new PictureDrawer(width, height, 'grain');
      for await (const frame of session.ticks()) {
        drawer.draw(frame);
        await session.emit('main_video', drawer.canvas.frame(performance.now() * 1000));
      }
    },
  });
}
