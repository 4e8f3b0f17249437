/**
 * The step API (`generate` + `beforeStep` + `onStepError`) under the model test harness, on its
 * manual clock: step order, commands and hooks only between steps, skipping, error recovery and
 * ending, what a step may return, and adaptive playout. Deterministic — the harness drives the
 * same StepDriver and AdaptivePacer the runtime does.
 */

import { afterEach, describe, expect, it } from 'vitest';
import { createTestSession, type TestSession } from '../testing/index.ts';
import { defineModel } from './define-model.ts';
import { commandFor, SKIP_STEP, type ModelDefinition, type OutputVideoTrackSpec, type StepResult } from './definition.ts';
import { ModelDefinitionError, validateModelDefinition } from './validate-definition.ts';
import type { VideoFrame } from '../media/frames.ts';
import { createLogger } from '../../server-kit/log.ts';
import { systemClock } from '../session/clock.ts';
import type { ModelSession } from './model-session.ts';
import { driveSteps, StepGate, type StepHost, type StepTimeline } from './step-driver.ts';

const W = 64;
const H = 36;
/** A small grey I420 frame whose metadata names its step and place in the chunk. */
function frame(step: number, i: number): VideoFrame {
  return { width: W, height: H, format: 'i420', data: new Uint8Array((W * H * 3) / 2).fill(128), metadata: { step, i } };
}
const chunk = (step: number, n: number): VideoFrame[] => Array.from({ length: n }, (_, i) => frame(step, i));

interface StepState {
  events: string[];
  paused: boolean;
  prompt: string;
  stepMs: number;
  framesPerStep: number;
  failOn: number[];
}

const command = commandFor<StepState>();

function stepModel(
  options: {
    fps?: number;
    track?: Partial<OutputVideoTrackSpec>;
    onStepError?: ModelDefinition<StepState, never, never, { prompt: string }>['onStepError'] | null;
  } = {},
) {
  return defineModel({
    name: 'stepper',
    fps: options.fps ?? 24,
    tracks: [{ name: 'main_video', kind: 'video', direction: 'recvonly', width: W, height: H, ...options.track }],
    createSessionState: (): StepState => ({ events: [], paused: false, prompt: 'a cat', stepMs: 250, framesPerStep: 4, failOn: [] }),
    commands: {
      set_prompt: command({
        params: { type: 'object', properties: { prompt: { type: 'string' } }, required: ['prompt'] } as const,
        handler: ({ prompt }, { session }) => {
          session.state.events.push(`command ${prompt}`);
          session.state.prompt = prompt;
          return { prompt };
        },
      }),
      pause: command({ params: { type: 'object' } as const, handler: (_p, { session }) => void (session.state.paused = true) }),
      resume: command({ params: { type: 'object' } as const, handler: (_p, { session }) => void (session.state.paused = false) }),
    },
    hooks: {
      connected: (session, connection) => void session.state.events.push(`connected ${connection.id}`),
    },
    beforeStep(session, step) {
      if (session.state.paused) return SKIP_STEP;
      session.state.events.push(`before ${step.index}`);
      return { prompt: session.state.prompt };
    },
    async generate(input, session, step): Promise<StepResult> {
      session.state.events.push(`start ${step.index} ${input.prompt}`);
      if (session.state.failOn.includes(step.index)) throw new Error(`step ${step.index} failed`);
      await session.sleep(session.state.stepMs);
      session.state.events.push(`end ${step.index}`);
      return { video: chunk(step.index, session.state.framesPerStep), metadata: { prompt: input.prompt } };
    },
    ...(options.onStepError === null ? {} : { onStepError: options.onStepError ?? (() => 'continue' as const) }),
  });
}

type Session = TestSession<StepState>;
let t: Session | undefined;
afterEach(async () => {
  await t?.end();
  t = undefined;
});

const steps = (events: readonly string[]): string[] => events.filter((e) => /^(before|start|end|command|connected)/.test(e));
const intervals = (times: readonly number[]): number[] => times.slice(1).map((x, i) => x - times[i]!);

describe('the step API under the harness', () => {
  it('runs beforeStep then generate, step after step, and emits each chunk in order', async () => {
    t = await createTestSession(stepModel());
    await t.advance(1_000);
    expect(steps(t.state.events).slice(0, 9)).toEqual([
      'connected 1',
      'before 0',
      'start 0 a cat',
      'end 0',
      'before 1',
      'start 1 a cat',
      'end 1',
      'before 2',
      'start 2 a cat',
    ]);
    const delivered = t.frames('main_video').map((f) => f.metadata as { step: number; i: number; prompt?: string });
    expect(delivered.length).toBeGreaterThanOrEqual(8);
    // In step order, each chunk's frames in order; the chunk's metadata rides on its first frame.
    expect(delivered.slice(0, 8).map(({ step, i }) => `${step}.${i}`)).toEqual(['0.0', '0.1', '0.2', '0.3', '1.0', '1.1', '1.2', '1.3']);
  });

  it('applies a command that arrives during a step after that step, before the next begins', async () => {
    t = await createTestSession(stepModel());
    await t.advance(100); // step 0 is in generate, sleeping until 250
    const reply = await t.sendCommand('set_prompt', { prompt: 'a dog' });
    expect(reply).toEqual({ type: 'set_prompt_result', data: { prompt: 'a dog' } });
    // The command waited for the step: the clock moved on to its end.
    expect(t.now).toBe(250);
    expect(steps(t.state.events)).toEqual([
      'connected 1',
      'before 0',
      'start 0 a cat',
      'end 0',
      'command a dog',
      'before 1',
      'start 1 a dog',
    ]);
  });

  it('runs hooks between steps too', async () => {
    t = await createTestSession(stepModel());
    await t.advance(100);
    await t.connect();
    expect(t.now).toBe(250);
    expect(steps(t.state.events).slice(-4)).toEqual(['end 0', 'connected 2', 'before 1', 'start 1 a cat']);
  });

  it('generates nothing while no client is connected, and starts when one connects', async () => {
    t = await createTestSession(stepModel(), { connections: 0 });
    await t.advance(1_000);
    expect(steps(t.state.events)).toEqual([]);
    await t.connect();
    expect(steps(t.state.events)).toEqual(['connected 1', 'before 0', 'start 0 a cat']);
    await t.disconnect(1);
    await t.advance(1_000);
    // The step in progress finishes (its output waits for a viewer); no further step starts.
    expect(steps(t.state.events).slice(-2)).toEqual(['start 0 a cat', 'end 0']);
  });

  it('skips steps without calling generate while beforeStep says so, and resumes at once on a command', async () => {
    t = await createTestSession(stepModel());
    await t.advance(250); // step 0 done, step 1 begun
    await t.sendCommand('pause', {});
    expect(t.now).toBe(500); // after step 1
    const before = t.state.events.length;
    await t.advance(5_000);
    expect(t.state.events.length).toBe(before); // no step while paused
    const sent = t.frames('main_video').length;
    await t.advance(1_000);
    expect(t.frames('main_video').length).toBe(sent); // nothing more to play
    await t.sendCommand('resume', {});
    // The resume woke the driver: the next step began at the same moment.
    expect(steps(t.state.events).slice(-2)).toEqual(['before 2', 'start 2 a cat']);
    await t.advance(250);
    expect(steps(t.state.events).at(-1)).toBe('start 3 a cat');
  });

  it('hands a failed step to onStepError: continue goes on with the next step', async () => {
    const seen: Array<{ message: string; index: number; failures: number }> = [];
    t = await createTestSession(
      stepModel({
        onStepError: (error, _session, step) => {
          seen.push({ message: (error as Error).message, index: step.index, failures: step.failures });
          return 'continue';
        },
      }),
      { state: { failOn: [1, 2] } },
    );
    await t.advance(1_000);
    expect(seen).toEqual([
      { message: 'step 1 failed', index: 1, failures: 1 },
      { message: 'step 2 failed', index: 2, failures: 2 },
    ]);
    expect(steps(t.state.events)).toContain('end 3');
    expect(t.endReason).toBeUndefined();
    expect(t.logs.filter((l) => l.level === 'error').map((l) => l.message)).toEqual(['model generate failed', 'model generate failed']);
  });

  it('ends the session with model_error when onStepError says end', async () => {
    t = await createTestSession(stepModel({ onStepError: () => 'end' }), { state: { failOn: [1] } });
    await t.advance(1_000);
    expect(t.endReason).toBe('model_error');
    expect((t.error as Error).message).toBe('step 1 failed');
    expect(steps(t.state.events)).not.toContain('before 2');
  });

  it('ends the session with model_error on a failed step when there is no onStepError, or it throws', async () => {
    t = await createTestSession(stepModel({ onStepError: null }), { state: { failOn: [0] } });
    await t.advance(100);
    expect(t.endReason).toBe('model_error');
    await t.end();
    t = await createTestSession(
      stepModel({
        onStepError: () => {
          throw new Error('recovery failed');
        },
      }),
      { state: { failOn: [0] } },
    );
    await t.advance(100);
    expect(t.endReason).toBe('model_error');
    expect((t.error as Error).message).toBe('step 0 failed');
    expect(t.logs.some((l) => l.message === 'model onStepError failed')).toBe(true);
  });

  it('stops stepping when the session ends, and the step in progress is abandoned', async () => {
    t = await createTestSession(stepModel());
    await t.advance(100);
    await t.end();
    expect(t.endReason).toBe('stopped');
    // session.sleep resolved early at the end; what the step returned was not emitted.
    expect(steps(t.state.events).slice(-2)).toEqual(['start 0 a cat', 'end 0']);
    expect(t.frames('main_video')).toEqual([]);
  });

  it('emits what generate returns: a frame alone, a chunk, audio and named tracks; a bad output is a failed step', async () => {
    const outputs: StepResult[] = [
      frame(0, 0),
      chunk(1, 2),
      { audio: { sampleRate: 48_000, channels: 1, samples: new Int16Array(960) } },
      { tracks: { side: frame(3, 0) } },
      undefined,
      { tracks: { nowhere: frame(5, 0) } },
    ];
    const errors: string[] = [];
    const model = defineModel({
      name: 'outputs',
      fps: 10,
      tracks: [
        { name: 'main_video', kind: 'video', direction: 'recvonly', width: W, height: H },
        { name: 'side', kind: 'video', direction: 'recvonly', width: W, height: H },
        { name: 'voice', kind: 'audio', direction: 'recvonly' },
      ],
      async generate(_input, session, step) {
        await session.sleep(100);
        return step.index < outputs.length ? outputs[step.index] : undefined;
      },
      onStepError: (error) => {
        errors.push((error as Error).message);
        return 'end';
      },
    });
    const s = await createTestSession(model);
    await s.advance(2_000);
    expect(s.frames('main_video').map((f) => f.metadata)).toEqual([
      { step: 0, i: 0 },
      { step: 1, i: 0 },
      { step: 1, i: 1 },
    ]);
    expect(s.frames('side').map((f) => f.metadata)).toEqual([{ step: 3, i: 0 }]);
    expect(s.audioFrames('voice')).toHaveLength(1);
    expect(errors).toEqual(['generate returned frames for "nowhere", which is not an output track of the model']);
    expect(s.endReason).toBe('model_error');
    await s.end();
  });

  it('keeps a model that returns nothing from spinning: one step per frame interval', async () => {
    let calls = 0;
    const model = defineModel({
      name: 'idle',
      fps: 10,
      tracks: [{ name: 'main_video', kind: 'video', direction: 'recvonly', width: W, height: H }],
      generate() {
        calls++;
      },
    });
    const s = await createTestSession(model);
    await s.advance(1_000);
    expect(calls).toBeGreaterThanOrEqual(10);
    expect(calls).toBeLessThanOrEqual(11);
    await s.end();
  });
});

describe('adaptive playout under the harness', () => {
  it('plays 4 frames every 250 ms evenly at 16 fps, where a fixed 24 fps track bursts', async () => {
    t = await createTestSession(stepModel({ track: { fps: 'adaptive' } }));
    await t.advance(10_000);
    const adaptive = intervals(t.frameTimes('main_video').filter((at) => at > 3_000));
    for (const gap of adaptive) expect(gap).toBeCloseTo(62.5, 3);
    expect(t.playout('main_video')).toMatchObject({
      mode: 'adaptive',
      fps: expect.closeTo(16, 3),
      productionFps: expect.closeTo(16, 3),
      underruns: 0,
    });
    // Each frame within one step of its emit: 4 frames per chunk, spaced 62.5 ms, after a small cushion.
    await t.end();

    t = await createTestSession(stepModel());
    await t.advance(10_000);
    const fixed = intervals(t.frameTimes('main_video').filter((at) => at > 3_000));
    expect(Math.min(...fixed)).toBeCloseTo(1000 / 24, 3);
    expect(Math.max(...fixed)).toBeCloseTo(250 - 3 * (1000 / 24), 3);
    expect(t.playout('main_video')).toEqual({ mode: 'fixed', fps: 24 });
  });

  it('follows a step time that doubles, and one that halves', async () => {
    t = await createTestSession(stepModel({ track: { fps: 'adaptive' } }));
    await t.advance(5_000);
    t.state.stepMs = 500;
    await t.advance(3_000);
    expect(t.playout('main_video')).toMatchObject({ productionFps: expect.closeTo(8, 3), fps: expect.closeTo(8, 0) });
    const slow = intervals(t.frameTimes('main_video').filter((at) => at > 7_000));
    for (const gap of slow) expect(Math.abs(gap - 125)).toBeLessThan(5);
    t.state.stepMs = 200;
    await t.advance(3_000);
    expect(t.playout('main_video')).toMatchObject({ productionFps: expect.closeTo(20, 3), fps: expect.closeTo(20, 0) });
    // Faster than the model's fps (24): played at 24, the model held back to it.
    t.state.stepMs = 100;
    await t.advance(3_000);
    expect(t.playout('main_video')).toMatchObject({ productionFps: expect.closeTo(40, 3), fps: 24 });
  });

  it("paces a run() loop's batches too, from the time between its emits", async () => {
    const model = defineModel({
      name: 'looper',
      fps: 24,
      tracks: [{ name: 'main_video', kind: 'video', direction: 'recvonly', width: W, height: H, fps: 'adaptive' }],
      async run(session) {
        for (let step = 0; !session.signal.aborted; step++) {
          await session.sleep(250);
          await session.emit('main_video', chunk(step, 4));
        }
      },
    });
    const s = await createTestSession(model);
    await s.advance(6_000);
    expect(s.playout('main_video')).toMatchObject({ mode: 'adaptive', productionFps: expect.closeTo(16, 3) });
    for (const gap of intervals(s.frameTimes('main_video').filter((at) => at > 3_000))) expect(gap).toBeCloseTo(62.5, 3);
    await s.end();
  });

  it('stays within the declared range', async () => {
    t = await createTestSession(stepModel({ track: { fps: { min: 20, max: 24 } } }));
    await t.advance(5_000);
    expect(t.playout('main_video').fps).toBe(20);
  });
});

describe('step model definitions', () => {
  const base = { name: 'm', fps: 24, tracks: [{ name: 'v', kind: 'video', direction: 'recvonly', width: 64, height: 64 }] };
  const problems = (model: object): readonly string[] => {
    try {
      validateModelDefinition(model, 'm');
      return [];
    } catch (error) {
      return (error as ModelDefinitionError).problems;
    }
  };

  it('takes run or generate, not both; step hooks need generate', () => {
    expect(problems({ ...base, generate: () => undefined, beforeStep: () => undefined, onStepError: () => 'end' })).toEqual([]);
    expect(problems({ ...base, run: async () => {}, generate: () => undefined })).toEqual([
      'a model has run (a loop of its own) or generate (steps the runtime calls), not both',
    ]);
    expect(problems({ ...base, run: async () => {}, beforeStep: () => undefined })).toEqual([
      'beforeStep is a step hook: it needs generate',
    ]);
    expect(problems({ ...base, generate: 5 })).toEqual(['generate must be a function']);
  });

  it("checks an output track's adaptive fps", () => {
    const track = (fps: unknown, extra: object = {}) => ({ ...base, tracks: [{ ...base.tracks[0], fps, ...extra }] });
    expect(problems(track('adaptive'))).toEqual([]);
    expect(problems(track({ min: 5, max: 24 }))).toEqual([]);
    expect(problems(track('fast'))).toEqual(['tracks[0].fps must be "adaptive" or { min?, max? } (fps)']);
    expect(problems(track({ max: 30 }))).toEqual(["tracks[0].fps.max must be a number in (0, 24] (the model's fps)"]);
    expect(problems(track({ min: 20, max: 10 }))).toEqual(['tracks[0].fps.min must not exceed tracks[0].fps.max']);
    expect(problems(track({ mid: 3 }))).toEqual(['tracks[0].fps has unknown keys: mid (known: min, max)']);
    expect(problems({ ...base, tracks: [{ name: 'in', kind: 'video', direction: 'sendonly', fps: 'adaptive' }] })).toEqual([
      'tracks[0].fps: only output video tracks are paced (adaptive fps)',
    ]);
  });
});

describe("a step's audio and video on an adaptive track (video follows audio)", () => {
  /** A StepHost that records what the driver hands it; the step's audio is placed at 1000 ms. */
  function recordingHost(options: { place: boolean }) {
    const calls: string[] = [];
    const timelines: Array<StepTimeline | undefined> = [];
    const gate = new StepGate();
    const host: StepHost = {
      clock: systemClock,
      fps: 30,
      log: createLogger({}, 'silent'),
      gate,
      watched: () => true,
      emitVideo: async (_track, frames, _metadata, _productionMs, timeline) => {
        calls.push(`video ${frames.length}`);
        timelines.push(timeline);
      },
      emitAudio: async (_track, frames) => void calls.push(`audio ${frames.length}`),
      trackKind: (track) => (track === 'main_video' ? 'video' : track === 'main_audio' ? 'audio' : undefined),
      ...(options.place
        ? {
            placeAudio: async (_track: string, frames: readonly unknown[]) => (
              calls.push(`place ${frames.length}`),
              { startMs: 1000, durationMs: 200 }
            ),
          }
        : {}),
    };
    return { host, calls, timelines };
  }

  function avModel(fps: OutputVideoTrackSpec['fps']) {
    return defineModel({
      name: 'av-steps',
      fps: 30,
      tracks: [
        { name: 'main_video', kind: 'video', direction: 'recvonly', width: W, height: H, ...(fps === undefined ? {} : { fps }) },
        { name: 'main_audio', kind: 'audio', direction: 'recvonly' },
      ],
      generate: (_input, _session, step): StepResult =>
        step.index === 0 ? { video: chunk(0, 4), audio: [{ sampleRate: 48_000, channels: 1, samples: new Int16Array(9_600) }] } : undefined,
    });
  }

  async function runOneStep(model: ReturnType<typeof avModel>, host: StepHost, calls: string[]): Promise<void> {
    const abort = new AbortController();
    const session = { settings: {}, state: {}, log: host.log } as unknown as ModelSession<unknown>;
    const driving = driveSteps(model as never, session, host, abort.signal);
    while (calls.length < 2) await new Promise((resolve) => setTimeout(resolve, 5));
    abort.abort();
    expect(await driving).toEqual({ ok: true });
  }

  it('places the audio first and times the frames to it: frame i at start + i × (audio length / frames)', async () => {
    const { host, calls, timelines } = recordingHost({ place: true });
    await runOneStep(avModel('adaptive'), host, calls);
    expect(calls).toEqual(['place 1', 'video 4']);
    expect(timelines).toEqual([{ startMs: 1000, frameMs: 50 }]);
  });

  it('leaves a fixed-rate track, and a host that cannot place audio, as before: no timeline', async () => {
    const fixed = recordingHost({ place: true });
    await runOneStep(avModel(undefined), fixed.host, fixed.calls);
    expect(fixed.calls.sort()).toEqual(['audio 1', 'video 4']);
    expect(fixed.timelines).toEqual([undefined]);
    const harnessLike = recordingHost({ place: false });
    await runOneStep(avModel('adaptive'), harnessLike.host, harnessLike.calls);
    expect(harnessLike.calls.sort()).toEqual(['audio 1', 'video 4']);
    expect(harnessLike.timelines).toEqual([undefined]);
  });
});
