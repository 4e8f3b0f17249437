/**
 * The pattern example under the model test harness (arclight/testing): its frames carry their
 * tick in the stamp, its commands validate and reply as a client sees it, its tone keeps pace with
 * the audio clock — in milliseconds, without a runtime or a browser.
 */

import { afterEach, describe, expect, it } from 'vitest';
import { WordListModerator, type VideoFrame } from 'arclight/runtime';
import { createTestSession, type TestSession } from 'arclight/testing';
import { readFrameStamp, rgbToYuv } from '../shared/i420-canvas.ts';
import pattern, { FPS, HEIGHT, PATCH, STAMP, WIDTH } from './index.ts';

type PatternSession = TestSession<ReturnType<NonNullable<typeof pattern.createSessionState>>>;

/** The frame number drawn into a frame's stamp. */
function stampOf(frame: VideoFrame): number {
  return readFrameStamp((x, y) => frame.data[y * frame.width + x]!, STAMP.x, STAMP.y);
}

/** Y, U and V at the centre of the colour patch. */
function patchColour(frame: VideoFrame): [number, number, number] {
  const x = PATCH.x + PATCH.size / 2;
  const y = PATCH.y + PATCH.size / 2;
  const chroma = (y >> 1) * (WIDTH / 2) + (x >> 1);
  const u = WIDTH * HEIGHT;
  return [frame.data[y * WIDTH + x]!, frame.data[u + chroma]!, frame.data[u + (WIDTH / 2) * (HEIGHT / 2) + chroma]!];
}

let t: PatternSession | undefined;
afterEach(async () => {
  await t?.end();
  t = undefined;
});

describe('pattern, under the test harness', () => {
  it('greets each client with the frame it is at', async () => {
    t = await createTestSession(pattern, { connections: 2 });
    expect(t.messages).toEqual([
      { type: 'welcome', data: { model: 'pattern', frame: 0 }, to: 1 },
      { type: 'welcome', data: { model: 'pattern', frame: 0 }, to: 2 },
    ]);
  });

  it('emits one 1280x720 frame per tick, stamped with its tick', async () => {
    t = await createTestSession(pattern);
    await t.advanceFrames(3);
    const frames = t.frames('main_video');
    expect(frames.map((f) => [f.width, f.height, f.format])).toEqual(Array(3).fill([WIDTH, HEIGHT, 'i420']));
    expect(frames.map(stampOf)).toEqual([0, 1, 2]);
    expect(t.state.frame).toBe(2);
    await t.advance(1000);
    expect(t.frames('main_video')).toHaveLength(3 + FPS);
  });

  it('set_color replies color_changed and paints the patch; a bad colour is invalid_params on /color', async () => {
    t = await createTestSession(pattern);
    expect(await t.sendCommand('set_color', { color: '#00FF00' })).toEqual({ type: 'color_changed', data: { color: '#00ff00' } });
    await t.advanceFrames(1);
    const [y, u, v] = patchColour(t.frames('main_video').at(-1)!);
    expect({ y, u, v }).toEqual(rgbToYuv(0, 255, 0));
    expect(t.logs).toContainEqual({ level: 'info', message: 'patch colour set', fields: { color: '#00ff00' }, source: 'model' });
    await expect(t.sendCommand('set_color', { color: 'green' })).rejects.toMatchObject({ code: 'invalid_params', field: '/color' });
  });

  it('set_text refuses control characters with its own code; get_state reports what the commands set', async () => {
    t = await createTestSession(pattern);
    await expect(t.sendCommand('set_text', { text: 'a\u0007b' })).rejects.toMatchObject({ code: 'unprintable_text' });
    expect(await t.sendCommand('set_text', { text: 'HELLO' })).toBeUndefined();
    expect(await t.sendCommand('set_speed', { speed: 8 })).toBeUndefined();
    await expect(t.sendCommand('set_speed', { speed: 65 })).rejects.toMatchObject({ code: 'invalid_params', field: '/speed' });
    await t.advanceFrames(5);
    expect(await t.sendCommand('get_state', {})).toEqual({ type: 'state', data: { color: '#e01010', speed: 8, text: 'HELLO', frame: 4 } });
  });

  it('set_text is checked by the runtime moderator when there is one', async () => {
    t = await createTestSession(pattern, { moderation: { moderator: new WordListModerator(['darn']) } });
    await expect(t.sendCommand('set_text', { text: 'well DARN it' })).rejects.toMatchObject({ code: 'moderation_rejected' });
    expect(t.state.text).toBe('ARCLIGHT');
  });

  it('plays its tone in step with the audio clock, at the frequency and volume set_tone asks for', async () => {
    t = await createTestSession(pattern);
    // 200 ms may be queued ahead of the clock: the tone loop fills that and waits.
    expect(t.audioFrames('tone')).toHaveLength(11);
    await t.sendCommand('set_tone', { frequency: 1000 }); // volume: the schema's default, 0.2
    await t.advance(100);
    const frames = t.audioFrames('tone');
    expect(frames).toHaveLength(11 + 5);
    const last = frames.at(-1)!.samples;
    expect(Math.max(...last)).toBeGreaterThan(0.19 * 32767);
    expect(Math.max(...last)).toBeLessThanOrEqual(Math.round(0.2 * 32767));
    // 1 kHz at 48 kHz: 20 cycles in 20 ms, so 40 sign changes (±1 at the frame's edges).
    let crossings = 0;
    for (let i = 1; i < last.length; i++) if (Math.sign(last[i]!) !== Math.sign(last[i - 1]!) && last[i] !== 0) crossings++;
    expect(crossings).toBeGreaterThanOrEqual(39);
    expect(crossings).toBeLessThanOrEqual(41);
  });
});
