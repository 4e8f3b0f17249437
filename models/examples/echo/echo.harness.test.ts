/**
 * The echo example under the model test harness (arclight/testing): a prompt until the webcam
 * publishes, then the webcam back at the brightness `set_brightness` asks for, and `input_started`
 * to every client when the input size changes.
 */

import { afterEach, describe, expect, it } from 'vitest';
import type { VideoFrame } from 'arclight/runtime';
import { createTestSession, type TestSession } from 'arclight/testing';
import echo, { HEIGHT, WIDTH } from './index.ts';

/** A tightly packed I420 frame of one colour. */
function solid(width: number, height: number, y: number, u: number, v: number): VideoFrame {
  const luma = width * height;
  const chroma = (width / 2) * (height / 2);
  const data = new Uint8Array(luma + 2 * chroma);
  data
    .fill(y, 0, luma)
    .fill(u, luma, luma + chroma)
    .fill(v, luma + chroma);
  return { width, height, format: 'i420', data };
}

let t: TestSession<{ brightness: number; inputSize: string | undefined }> | undefined;
afterEach(async () => {
  await t?.end();
  t = undefined;
});

describe('echo, under the test harness', () => {
  it('shows a 640x480 prompt until the webcam publishes', async () => {
    t = await createTestSession(echo);
    await t.advanceFrames(2);
    const frames = t.frames('main_video');
    expect(frames).toHaveLength(2);
    expect(frames[0]).toMatchObject({ width: WIDTH, height: HEIGHT, format: 'i420' });
    // The prompt's background: dark grey, no colour.
    expect(frames[0]!.data[0]).toBe(60);
    expect(t.messages).toEqual([]);
  });

  it('echoes the webcam, tells every client its size, and applies set_brightness', async () => {
    t = await createTestSession(echo, { connections: 2 });
    t.pushVideo('webcam', solid(320, 240, 116, 100, 160));
    await t.advanceFrames(1);
    expect(t.messages).toEqual([{ type: 'input_started', data: { width: 320, height: 240 }, to: 'all' }]);
    const echoed = t.frames('main_video').at(-1)!;
    expect(echoed).toMatchObject({ width: 320, height: 240 });
    expect([echoed.data[0], echoed.data[320 * 240], echoed.data[320 * 240 * 1.25]]).toEqual([116, 100, 160]);

    expect(await t.sendCommand('set_brightness', { value: 0.5 })).toEqual({ type: 'brightness_changed', data: { brightness: 0.5 } });
    await t.advanceFrames(1);
    // Luma halves around black (16): 16 + 100 * 0.5; chroma moves toward neutral by √0.5.
    const dimmed = t.frames('main_video').at(-1)!;
    expect(dimmed.data[0]).toBe(66);
    expect(dimmed.data[320 * 240]).toBe(Math.trunc(128 + (100 - 128) * Math.SQRT1_2));

    // A new size is announced once; the same size again is not.
    t.pushVideo('webcam', solid(640, 360, 116, 128, 128));
    await t.advanceFrames(2);
    expect(t.messages.filter((m) => m.type === 'input_started').map((m) => m.data)).toEqual([
      { width: 320, height: 240 },
      { width: 640, height: 360 },
    ]);
  });

  it('refuses a brightness outside 0–2 with invalid_params on /value', async () => {
    t = await createTestSession(echo);
    await expect(t.sendCommand('set_brightness', { value: 3 })).rejects.toMatchObject({ code: 'invalid_params', field: '/value' });
    await expect(t.sendCommand('set_brightness', {})).rejects.toMatchObject({ code: 'invalid_params', field: '/value' });
    expect(t.state.brightness).toBe(1);
  });
});
