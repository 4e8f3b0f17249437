/**
 * The model's tests: `npm test`. `createTestSession` drives the model without WebRTC or a browser
 * — commands, messages, emitted frames — on a fake clock, so they run in milliseconds.
 */

import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { createTestSession } from 'arclight/testing';
import model, { HEIGHT, rgbToYuv, WIDTH } from '../index.ts';

/** A session of the model that ends with the test. */
async function open(t: TestContext) {
  const session = await createTestSession(model);
  t.after(() => session.end());
  return session;
}

test('greets each client when it connects', async (t) => {
  const session = await open(t);
  assert.deepEqual(session.messages.find((m) => m.type === 'welcome')?.data, { model: 'arclight-template-model', speed: 4 });
});

test('emits one frame per tick, at the track size', async (t) => {
  const session = await open(t);
  await session.advanceFrames(3);
  const frames = session.frames('main_video');
  assert.equal(frames.length, 3);
  assert.equal(frames[0]!.width, WIDTH);
  assert.equal(frames[0]!.height, HEIGHT);
});

test('set_color replies with the colour and paints the square with it', async (t) => {
  const session = await open(t);
  assert.deepEqual(await session.sendCommand('set_color', { color: '#00FF00' }), { type: 'color_changed', data: { color: '#00ff00' } });
  await session.advanceFrames(1);
  const frame = session.frames('main_video').at(-1)!;
  // The square's top-left corner: speed 4, one frame → x = 4, y = (HEIGHT - 80) / 2.
  assert.equal(frame.data[((HEIGHT - 80) / 2) * WIDTH + 4 + 1], rgbToYuv(0, 255, 0).y);
});

test('bad parameters fail with invalid_params; model rules with their own code', async (t) => {
  const session = await open(t);
  await assert.rejects(session.sendCommand('set_color', { color: 'green' }), { code: 'invalid_params' });
  await assert.rejects(session.sendCommand('set_speed', { speed: 13 }), { code: 'unlucky_speed' });
  await session.sendCommand('set_speed', { speed: 10 });
  assert.equal(session.state.speed, 10);
});
