/**
 * The `stylise` example end to end: a real runtime on 127.0.0.1 hosting it (onnxruntime-node on
 * its worker thread, the provider it chooses itself), our Node client publishing a webcam track
 * from wrtc and watching main_video. Checks content, not speed: at strength 0 the picture comes
 * back the colour it went in; at 1 it is the network's colour for that picture, clearly another.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InferenceSession, Tensor } from 'onnxruntime-node';
import { ArclightClient, wrtc } from '../../client/node.ts';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import { createStyliseModel, DEFAULT_STRENGTH } from '../../models/examples/stylise/index.ts';
import { frameToTensor } from '../../models/examples/stylise/frame-tensor.ts';
import { buildStyliseNetwork, STYLISE_IO } from '../../models/examples/stylise/stylise-network.ts';
import { rgbToYuv, type Yuv } from '../../models/examples/shared/i420-canvas.ts';
import { near, VideoProbe, waitUntil } from '../support/video-probe.ts';

const LOOPBACK = '127.0.0.1';
const SIZE = 256;
/** A khaki the style moves a long way (saturated, warmed, posterised: ~(229, 178, 25)). */
const INPUT_RGB = [180, 180, 100] as const;
const WIDTH = 320;
const HEIGHT = 240;

type VideoSource = { createTrack(): MediaStreamTrack; onFrame(frame: { width: number; height: number; data: Uint8Array }): void };

function solidI420(colour: Yuv): Uint8Array {
  const data = new Uint8Array(WIDTH * HEIGHT * 1.5);
  data.fill(colour.y, 0, WIDTH * HEIGHT);
  data.fill(colour.u, WIDTH * HEIGHT, WIDTH * HEIGHT * 1.25);
  data.fill(colour.v, WIDTH * HEIGHT * 1.25);
  return data;
}

/** What the network makes of the camera picture at `strength`, at the centre, in Y'UV (no codec in between). */
async function networkColour(camera: Uint8Array, strength: number): Promise<Yuv> {
  const session = await InferenceSession.create(buildStyliseNetwork(), { executionProviders: ['cpu'] });
  const image = frameToTensor({ width: WIDTH, height: HEIGHT, format: 'i420', data: camera }, SIZE);
  const results = await session.run({
    [STYLISE_IO.image]: new Tensor('float32', image, [1, 3, SIZE, SIZE]),
    [STYLISE_IO.strength]: new Tensor('float32', Float32Array.of(strength), [1]),
  });
  const out = results[STYLISE_IO.output]!.data as Float32Array;
  const centre = (SIZE / 2) * SIZE + SIZE / 2;
  const plane = SIZE * SIZE;
  await session.release();
  return rgbToYuv(out[centre]! * 255, out[plane + centre]! * 255, out[2 * plane + centre]! * 255);
}

describe('stylise: webcam in, stylised video out, over loopback', () => {
  let runtime: Runtime;
  beforeAll(async () => {
    runtime = await startRuntime({
      model: createStyliseModel({ size: SIZE }) as never,
      port: 0,
      host: LOOPBACK,
      ice: { hostAddresses: [LOOPBACK] },
    });
    await runtime.loaded;
  });
  afterAll(async () => runtime?.close());

  it('streams the network output; set_strength 0 gives back the input colour, 1 the style', async () => {
    const client = new ArclightClient({ modelName: 'stylise', local: true, localRuntimeUrl: runtime.url });
    const messages: { type: string; data?: unknown }[] = [];
    client.on('message', (m) => messages.push(m));
    const probe = new Promise<VideoProbe>((resolve) => {
      client.on('trackReceived', (name, track) => {
        if (name === 'main_video' && track.kind === 'video') resolve(new VideoProbe(track));
      });
    });
    const source = new (wrtc as unknown as { nonstandard: { RTCVideoSource: new () => VideoSource } }).nonstandard.RTCVideoSource();
    const input = rgbToYuv(...INPUT_RGB);
    const camera = solidI420(input);
    const feeder = setInterval(() => source.onFrame({ width: WIDTH, height: HEIGHT, data: camera }), 33);
    const track = source.createTrack();
    let video: VideoProbe | undefined;
    try {
      await client.connect();
      video = await probe;
      await waitUntil(() => messages.some((m) => m.type === 'stylise_info'), 15_000, 'stylise_info');
      expect(messages.find((m) => m.type === 'stylise_info')?.data).toEqual({
        provider: expect.any(String),
        size: SIZE,
        strength: DEFAULT_STRENGTH,
      });

      await client.publishTrack('webcam', track);
      await waitUntil(() => messages.some((m) => m.type === 'input_started'), 15_000, 'the model to see input');
      expect(messages.find((m) => m.type === 'input_started')?.data).toEqual({ width: WIDTH, height: HEIGHT });
      const centre = () => video!.sample(SIZE / 2, SIZE / 2);

      expect(await client.sendCommand('set_strength', { strength: 0 })).toEqual({ type: 'strength_changed', data: { strength: 0 } });
      await waitUntil(() => video!.frames > 0 && near(centre(), input, 10), 20_000, 'the input colour at strength 0');
      expect([video.width, video.height]).toEqual([SIZE, SIZE]);

      const styled = await networkColour(camera, 1);
      // The style really is another colour (else this test could not tell the two apart): about
      // 24 apart on V, so a frame within 10 of the style is at least 14 from the input …
      expect(near(styled, input, 20)).toBe(false);
      expect(await client.sendCommand('set_strength', { strength: 1 })).toEqual({ type: 'strength_changed', data: { strength: 1 } });
      // … and what arrives is the network's colour, not the input's.
      await waitUntil(() => near(centre(), styled, 10), 20_000, `the stylised colour ${JSON.stringify(styled)}`);

      const failure = await client.sendCommand('set_strength', { strength: 2 }).catch((error: unknown) => error);
      expect(failure).toMatchObject({ code: 'invalid_params' });
    } finally {
      clearInterval(feeder);
      track.stop();
      video?.stop();
      await client.disconnect().catch(() => {});
    }
  });
});
