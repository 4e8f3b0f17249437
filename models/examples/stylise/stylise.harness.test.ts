/**
 * The stylise example's session under the model test harness (arclight/testing): its command and
 * messages, the idle picture without a webcam, and a webcam frame through the real network — the
 * ONNX inference runs on the engine's worker thread, which the test waits for with `waitFor`
 * while the session's clock stands still. (stylise.test.ts covers the network and engine alone.)
 */

import { afterEach, describe, expect, it } from 'vitest';
import type { VideoFrame } from 'arclight/runtime';
import { createTestSession, type TestSession } from 'arclight/testing';
import { rgbToYuv, type Yuv } from '../shared/i420-canvas.ts';
import { createStyliseModel, DEFAULT_STRENGTH } from './index.ts';

const SIZE = 256;
/** A khaki the style moves a long way (saturated, warmed, posterised), as in test/e2e/stylise.test.ts. */
const INPUT = rgbToYuv(180, 180, 100);
/**
 * One model object for the file: load() (the engine's worker, unref'd, so it does not hold the
 * process open) runs once for all its sessions.
 */
const stylise = createStyliseModel({ size: SIZE, providers: ['cpu'] });

function webcam(colour: Yuv, width = 320, height = 240): VideoFrame {
  const data = new Uint8Array(width * height * 1.5);
  data
    .fill(colour.y, 0, width * height)
    .fill(colour.u, width * height, width * height * 1.25)
    .fill(colour.v, width * height * 1.25);
  return { width, height, format: 'i420', data };
}

/** Y, U and V at the centre of an output frame. */
function centre(frame: VideoFrame): Yuv {
  const x = frame.width / 2;
  const y = frame.height / 2;
  const luma = frame.width * frame.height;
  const chroma = (y / 2) * (frame.width / 2) + x / 2;
  return { y: frame.data[y * frame.width + x]!, u: frame.data[luma + chroma]!, v: frame.data[luma + luma / 4 + chroma]! };
}

function distance(a: Yuv, b: Yuv): number {
  return Math.max(Math.abs(a.y - b.y), Math.abs(a.u - b.u), Math.abs(a.v - b.v));
}

let t: TestSession<{ strength: number; inputSize: string | undefined }> | undefined;
afterEach(async () => {
  await t?.end();
  t = undefined;
});

describe('stylise, under the test harness', () => {
  it('tells each client its provider, size and strength when it connects', async () => {
    t = await createTestSession(stylise, { connections: 2 });
    const info = { provider: 'cpu', size: SIZE, strength: DEFAULT_STRENGTH };
    expect(t.messages).toEqual([
      { type: 'stylise_info', data: info, to: 1 },
      { type: 'stylise_info', data: info, to: 2 },
    ]);
    expect(t.logs).toContainEqual(
      expect.objectContaining({
        message: 'stylise: onnxruntime-node execution provider',
        fields: { provider: 'cpu', size: SIZE },
        source: 'model',
      }),
    );
  });

  it('set_strength replies strength_changed, and refuses a strength outside 0–1 with invalid_params', async () => {
    t = await createTestSession(stylise);
    expect(await t.sendCommand('set_strength', { strength: 0.3 })).toEqual({ type: 'strength_changed', data: { strength: 0.3 } });
    expect(t.state.strength).toBe(0.3);
    await expect(t.sendCommand('set_strength', { strength: 1.5 })).rejects.toMatchObject({ code: 'invalid_params', field: '/strength' });
    await expect(t.sendCommand('set_strength', { value: 0.5 })).rejects.toMatchObject({ code: 'invalid_params' });
    expect(t.state.strength).toBe(0.3);
  });

  it('shows the idle picture until a webcam publishes', async () => {
    t = await createTestSession(stylise);
    await t.advanceFrames(2);
    const frames = t.frames('main_video');
    expect(frames).toHaveLength(2);
    expect(frames[0]).toMatchObject({ width: SIZE, height: SIZE, format: 'i420' });
    expect(frames[0]!.data[0]).toBe(60); // the idle picture's grey
  });

  it('stylises a webcam frame through the network: the input colour at strength 0, another at 1', async () => {
    t = await createTestSession(stylise, { state: { strength: 0 } });
    t.pushVideo('webcam', webcam(INPUT));
    await t.advanceFrames(1);
    expect(t.messages).toContainEqual({ type: 'input_started', data: { width: 320, height: 240 }, to: 'all' });
    const session = t;
    // Inference runs on the worker thread: wait for it in real time; the clock stays where it is.
    await t.waitFor(() => session.frames('main_video').length === 1, { timeoutMs: 20_000, description: 'the first stylised frame' });
    const plain = t.frames('main_video')[0]!;
    expect(plain).toMatchObject({ width: SIZE, height: SIZE, format: 'i420' });
    expect(distance(centre(plain), INPUT)).toBeLessThanOrEqual(2);

    await t.sendCommand('set_strength', { strength: 1 });
    await t.advanceFrames(1);
    await t.waitFor(() => session.frames('main_video').length === 2, { timeoutMs: 20_000, description: 'the frame at strength 1' });
    expect(distance(centre(t.frames('main_video')[1]!), INPUT)).toBeGreaterThan(20);
    expect(t.error).toBeUndefined();
  });
});
