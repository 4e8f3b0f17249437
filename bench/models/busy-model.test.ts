/**
 * The benchmarks' noise models emit a fresh frame of their size every tick: consecutive frames
 * differ in most luma bytes (what makes an encoder spend its whole bitrate).
 */

import { afterEach, describe, expect, it } from 'vitest';
import { createTestSession, type TestSession } from 'arclight/testing';
import busy from './busy-model.ts';
import busy1080p from './busy-1080p-model.ts';

let t: TestSession<unknown> | undefined;
afterEach(async () => {
  await t?.end();
  t = undefined;
});

describe.each([
  { model: busy, width: 1280, height: 720 },
  { model: busy1080p, width: 1920, height: 1080 },
])('$model.name', ({ model, width, height }) => {
  it(`emits ${width}x${height} frames of fresh noise`, async () => {
    t = await createTestSession(model);
    await t.advanceFrames(2);
    const [a, b] = t.frames('main_video').slice(-2);
    expect([a!.width, a!.height]).toEqual([width, height]);
    let same = 0;
    for (let i = 0; i < width * height; i++) if (a!.data[i] === b!.data[i]) same++;
    expect(same / (width * height)).toBeLessThan(0.5);
  });
});
