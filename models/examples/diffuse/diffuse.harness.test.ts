/**
 * The diffuse example under the model test harness (arclight/testing), on its manual clock: chunks
 * of 4–8 frames per step, played evenly at the rate it makes them; its declared settings (prompt,
 * paused, ms_per_frame) as generated set_<field> commands, applied between steps; pause and resume
 * without ending the session; moderation of the prompt; the hand-written reset.
 */

import { afterEach, describe, expect, it } from 'vitest';
import { WordListModerator } from 'arclight/runtime';
import { createTestSession, type TestSession } from 'arclight/testing';
import diffuse, { DEFAULT_PROMPT, FPS, HEIGHT, MAX_CHUNK, MIN_CHUNK, WIDTH } from './index.ts';

type DiffuseSession = TestSession<ReturnType<NonNullable<typeof diffuse.createSessionState>>>;
type Meta = { step: number; frame: number; prompt: string };

let t: DiffuseSession | undefined;
afterEach(async () => {
  await t?.end();
  t = undefined;
});

const metaOf = (t: DiffuseSession): Meta[] => t.frames('main_video').map((f) => f.metadata as Meta);
const intervals = (times: readonly number[]): number[] => times.slice(1).map((x, i) => x - times[i]!);

describe('diffuse, under the test harness', () => {
  it("makes chunks of 4–8 frames per step, every frame in order, at the track's size", async () => {
    t = await createTestSession(diffuse);
    await t.advance(5_000);
    const meta = metaOf(t);
    expect(meta.length).toBeGreaterThan(40);
    expect(meta.map((m) => m.frame)).toEqual(meta.map((_, i) => i));
    const perStep = new Map<number, number>();
    for (const m of meta) perStep.set(m.step, (perStep.get(m.step) ?? 0) + 1);
    // Whole steps (the last may still be playing): each between MIN_CHUNK and MAX_CHUNK frames.
    const whole = [...perStep.values()].slice(0, -1);
    for (const n of whole) expect(n).toBeGreaterThanOrEqual(MIN_CHUNK);
    for (const n of whole) expect(n).toBeLessThanOrEqual(MAX_CHUNK);
    expect(new Set(whole).size).toBeGreaterThan(1);
    expect(t.frames('main_video')[0]).toMatchObject({ width: WIDTH, height: HEIGHT, format: 'i420' });
  });

  it('plays at the rate it makes frames (~60 ms each), evenly despite chunks and step times that vary', async () => {
    t = await createTestSession(diffuse);
    await t.advance(10_000);
    const playout = t.playout('main_video');
    expect(playout.mode).toBe('adaptive');
    if (playout.mode !== 'adaptive') return;
    // 60 ms a frame ± 20 %: about 16.7 fps; never above the ceiling.
    expect(playout.productionFps).toBeGreaterThan(13);
    expect(playout.productionFps).toBeLessThan(21);
    expect(playout.fps).toBeLessThanOrEqual(FPS);
    const gaps = intervals(t.frameTimes('main_video').filter((at) => at > 3_000));
    const mean = gaps.reduce((a, b) => a + b, 0) / gaps.length;
    expect(mean).toBeGreaterThan(50);
    expect(mean).toBeLessThan(75);
    // Where a fixed pacer would play each chunk at 33 ms and then stall, the spacing stays near the mean.
    const within = gaps.filter((g) => Math.abs(g - mean) < 0.35 * mean).length;
    expect(within / gaps.length).toBeGreaterThan(0.9);
  });

  it('lists its settings as set_<field> commands beside the one hand-written command', () => {
    expect(Object.keys(diffuse.commands!).sort()).toEqual(['reset', 'set_ms_per_frame', 'set_paused', 'set_prompt']);
    expect(diffuse.commands!.set_prompt.params).toMatchObject({
      type: 'object',
      properties: { value: { type: 'string', minLength: 1, maxLength: 80, 'x-arclight-moderated': true } },
      required: ['value'],
      additionalProperties: false,
    });
    expect(diffuse.commands!.set_paused.params).toMatchObject({ properties: { value: { type: 'boolean' } } });
    expect(diffuse.commands!.set_ms_per_frame.params).toMatchObject({
      properties: { value: { type: 'number', minimum: 20, maximum: 1000 } },
    });
  });

  it('applies a new prompt (set_prompt, generated) from the next step, never half-way through a chunk', async () => {
    t = await createTestSession(diffuse);
    expect(t.session.settings).toEqual({ prompt: DEFAULT_PROMPT, paused: false, ms_per_frame: 60 });
    await t.advance(300);
    await t.sendCommand('set_prompt', { value: 'a red fox' });
    expect(t.session.settings.prompt).toBe('a red fox');
    await t.advance(3_000);
    const meta = metaOf(t);
    const first = meta.findIndex((m) => m.prompt === 'a red fox');
    expect(first).toBeGreaterThan(0);
    // The switch falls on a step boundary: the step before is all old, everything after is new.
    expect(meta[first]!.step).not.toBe(meta[first - 1]!.step);
    expect(meta.slice(first).every((m) => m.prompt === 'a red fox')).toBe(true);
    // The declared schema is the validation: empty, too long, control characters, the old parameter name.
    await expect(t.sendCommand('set_prompt', { value: '' })).rejects.toMatchObject({ code: 'invalid_params', field: '/value' });
    await expect(t.sendCommand('set_prompt', { value: 'x'.repeat(81) })).rejects.toMatchObject({ code: 'invalid_params', field: '/value' });
    await expect(t.sendCommand('set_prompt', { value: 'a\u0007b' })).rejects.toMatchObject({ code: 'invalid_params', field: '/value' });
    await expect(t.sendCommand('set_prompt', { prompt: 'a cat' })).rejects.toMatchObject({ code: 'invalid_params' });
    expect(t.session.settings.prompt).toBe('a red fox');
  });

  it('pauses (set_paused true) without ending the session or unloading, and resumes where it was', async () => {
    t = await createTestSession(diffuse);
    await t.advance(1_000);
    await t.sendCommand('set_paused', { value: true });
    await t.advance(2_000); // what was made before the pause plays out
    const made = t.state.frame;
    const shown = t.frames('main_video').length;
    await t.advance(10_000);
    expect(t.state.frame).toBe(made); // no step ran
    expect(t.frames('main_video')).toHaveLength(shown);
    expect(t.endReason).toBeUndefined();
    await t.sendCommand('set_paused', { value: false });
    await t.advance(2_000);
    expect(t.state.frame).toBeGreaterThan(made);
    expect(metaOf(t)[shown]!.frame).toBe(made); // continues from the next frame
  });

  it('set_ms_per_frame changes the compute time, and the playout rate follows', async () => {
    t = await createTestSession(diffuse);
    await t.advance(3_000);
    await t.sendCommand('set_ms_per_frame', { value: 120 });
    await t.advance(6_000);
    const playout = t.playout('main_video');
    expect(playout.mode === 'adaptive' && playout.productionFps! < 10).toBe(true);
    await expect(t.sendCommand('set_ms_per_frame', { value: 5 })).rejects.toMatchObject({ code: 'invalid_params', field: '/value' });
  });

  it('reset (hand-written: an action, not a value) starts the scene over and keeps the settings', async () => {
    t = await createTestSession(diffuse);
    await t.sendCommand('set_prompt', { value: 'a red fox' });
    await t.advance(2_000);
    expect(t.state.frame).toBeGreaterThan(10);
    expect(await t.sendCommand('reset', {})).toEqual({ type: 'scene_reset', data: { prompt: 'a red fox' } });
    await t.advance(2_000);
    const meta = metaOf(t);
    // The frame counter restarted: the shape runs from the left again, with the same prompt.
    const restart = meta.findIndex((m, i) => i > 0 && m.frame < meta[i - 1]!.frame);
    expect(restart).toBeGreaterThan(0);
    expect(meta[restart]!.frame).toBe(0);
    expect(meta[restart]!.prompt).toBe('a red fox');
  });

  it("sends the prompt to the runtime's moderator when there is one", async () => {
    t = await createTestSession(diffuse, { moderation: { moderator: new WordListModerator(['darn']) } });
    await expect(t.sendCommand('set_prompt', { value: 'a darn cat' })).rejects.toMatchObject({ code: 'moderation_rejected' });
    expect(t.session.settings.prompt).toBe(DEFAULT_PROMPT);
  });
});
