/**
 * The python-tint example under the model test harness (arclight/testing), with its real Python
 * worker: the command declared in model.py and validated by the runtime, the generative pattern
 * without a webcam, and a webcam frame through the numpy tint (strength 0 gives the picture back
 * exactly; a full grey tint gives its luma). Python answers in real time while the session's clock
 * stands still, so the test moves the clock a frame at a time until the frame it wants is out.
 */

import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { convertToYuv, type VideoFrame } from 'arclight/runtime';
import { createTestSession, type TestSession } from 'arclight/testing';
import model, { HEIGHT, WIDTH } from './index.ts';

let t: TestSession<{ python: true }> | undefined;
afterEach(async () => {
  await t?.end();
  t = undefined;
});
afterAll(() => model.python.close());

async function open(): Promise<TestSession<{ python: true }>> {
  return createTestSession(model as never) as Promise<TestSession<{ python: true }>>;
}

async function untilLast(s: TestSession<{ python: true }>, ok: (frame: VideoFrame) => boolean, what: string): Promise<VideoFrame> {
  const deadline = performance.now() + 20_000;
  for (;;) {
    const last = s.frames('main_video').at(-1);
    if (last && ok(last)) return last;
    if (performance.now() > deadline) throw new Error(`no frame ${what} within 20 s`);
    await s.advanceFrames(1);
    await new Promise((resolve) => setTimeout(resolve, 3));
  }
}

/** A webcam picture: a horizontal gradient with a coloured stripe, RGBA at the output's size. */
function webcam(): VideoFrame {
  const data = new Uint8Array(WIDTH * HEIGHT * 4);
  for (let y = 0; y < HEIGHT; y++) {
    for (let x = 0; x < WIDTH; x++) {
      const i = (y * WIDTH + x) * 4;
      data[i] = (x * 255) / WIDTH;
      data[i + 1] = y < HEIGHT / 2 ? 200 : 40;
      data[i + 2] = 255 - (x * 255) / WIDTH;
      data[i + 3] = 255;
    }
  }
  return { width: WIDTH, height: HEIGHT, format: 'rgba', data };
}

function rgbOf(frame: VideoFrame): Uint8Array {
  const rgb = new Uint8Array(frame.width * frame.height * 3);
  for (let i = 0, j = 0; i < frame.data.length; i += 4, j += 3) rgb.set(frame.data.subarray(i, i + 3), j);
  return rgb;
}

const equal = (a: Uint8Array, b: Uint8Array): boolean => Buffer.from(a).equals(Buffer.from(b));

describe('python-tint, under the test harness', () => {
  it('declares set_tint from Python, with its schema; the runtime validates it before Python runs', async () => {
    expect(model.commands?.['set_tint']?.params).toMatchObject({ required: ['color'], additionalProperties: false });
    t = await open();
    expect(await t.sendCommand('set_tint', { color: '#00FF00', strength: 0.25 })).toEqual({
      type: 'tint_changed',
      data: { color: '#00ff00', strength: 0.25 },
    });
    expect(await t.sendCommand('set_tint', { color: '#123456' })).toEqual({
      type: 'tint_changed',
      data: { color: '#123456', strength: 0.5 },
    });
    await expect(t.sendCommand('set_tint', { color: 'green' })).rejects.toMatchObject({ code: 'invalid_params', field: '/color' });
    await expect(t.sendCommand('set_tint', { color: '#000000', strength: 2 })).rejects.toMatchObject({
      code: 'invalid_params',
      field: '/strength',
    });
    expect(t.logs).toContainEqual(
      expect.objectContaining({ message: 'tint changed', fields: { color: '#123456', strength: 0.5 }, source: 'model' }),
    );
  });

  it('without a webcam, plays a moving pattern at the track size', async () => {
    t = await open();
    const first = await untilLast(t, () => true, 'at all');
    expect(first).toMatchObject({ width: WIDTH, height: HEIGHT, format: 'i420' });
    const later = await untilLast(t, (f) => !equal(f.data, first.data), 'that differs from the first');
    expect(later.data.length).toBe(first.data.length);
  });

  it('tints a webcam frame in numpy: strength 0 is the picture itself, a full grey tint its luma', async () => {
    t = await open();
    const camera = webcam();
    t.pushVideo('webcam', camera);
    await t.sendCommand('set_tint', { color: '#ff8800', strength: 0 });
    const expected = convertToYuv(rgbOf(camera), { width: WIDTH, height: HEIGHT, format: 'rgb' });
    await untilLast(t, (f) => equal(f.data, expected), 'equal to the webcam picture');
    expect(t.messages).toContainEqual({ type: 'input_started', data: { width: WIDTH, height: HEIGHT }, to: 'all' });

    await t.sendCommand('set_tint', { color: '#ffffff', strength: 1 });
    // White tint at full strength: every pixel becomes its luma (0.299 R + 0.587 G + 0.114 B), grey.
    const rgb = rgbOf(camera);
    const grey = new Uint8Array(rgb.length);
    for (let i = 0; i < rgb.length; i += 3) {
      const luma = Math.round(
        Math.fround(Math.fround(0.299 * rgb[i]!) + Math.fround(0.587 * rgb[i + 1]!) + Math.fround(0.114 * rgb[i + 2]!)),
      );
      grey.fill(Math.min(255, luma), i, i + 3);
    }
    const greyYuv = convertToYuv(grey, { width: WIDTH, height: HEIGHT, format: 'rgb' });
    const frame = await untilLast(t, (f) => !equal(f.data, expected), 'tinted');
    // Grey has neutral chroma; luma within 1 of the reference (float32 rounding in numpy).
    const luma = WIDTH * HEIGHT;
    let worst = 0;
    for (let i = 0; i < frame.data.length; i++) worst = Math.max(worst, Math.abs(frame.data[i]! - greyYuv[i]!));
    expect(worst).toBeLessThanOrEqual(2);
    expect(Math.abs(frame.data[luma]! - 128)).toBeLessThanOrEqual(1);
  });
});
