/**
 * The model test harness itself: its clock is deterministic and moves only when told, commands
 * fail with the runtime's codes, model code that crashes stays inside the session, hooks fire in
 * the runtime's order, and end() ends the session as the runtime does.
 */

import { describe, expect, it } from 'vitest';
import { ArclightError } from '../../protocol/errors.ts';
import { CommandError, commandFor, defineModel, type ModelDefinition, type VideoFrame } from '../index.ts';
import { createTestSession, type TestSession } from './index.ts';

const SIZE = 16;

/** A SIZE×SIZE I420 frame whose every luma byte is `level`. */
function frame(level: number, width = SIZE, height = SIZE): VideoFrame {
  const data = new Uint8Array(width * height * 1.5).fill(128);
  data.fill(level, 0, width * height);
  return { width, height, format: 'i420', data };
}

interface CounterState {
  step: number;
  ticks: number[];
}

const command = commandFor<CounterState>();

/** A model at 10 fps that draws its tick into each frame; commands that succeed and fail in every way. */
function counterModel(events: string[] = []): ModelDefinition<CounterState> {
  return defineModel<CounterState>({
    name: 'counter',
    fps: 10,
    tracks: [
      { name: 'webcam', kind: 'video', direction: 'sendonly', format: 'rgba' },
      { name: 'main_video', kind: 'video', direction: 'recvonly', width: SIZE, height: SIZE },
      { name: 'voice', kind: 'audio', direction: 'recvonly' },
    ],
    createSessionState: () => ({ step: 1, ticks: [] }),
    commands: {
      set_step: command({
        params: {
          type: 'object',
          properties: { step: { type: 'integer', minimum: 1, maximum: 10 } },
          required: ['step'],
          additionalProperties: false,
        },
        reply: { type: 'step_changed', schema: { type: 'object', properties: { step: { type: 'integer' } }, required: ['step'] } },
        handler: ({ step }, { session }) => {
          if (step === 7) throw new CommandError('unlucky_step', 'Any step but 7.');
          session.state.step = step;
          return { step };
        },
      }),
      reset: command({ params: { type: 'object' }, handler: (_params, { session }) => void (session.state.ticks = []) }),
      crash: command({
        params: { type: 'object' },
        handler: () => {
          throw new Error('the handler crashed on purpose');
        },
      }),
      crash_later: command({
        params: { type: 'object' },
        handler: async () => {
          await Promise.resolve();
          throw new Error('the handler rejected on purpose');
        },
      }),
      echo_options: command({
        params: { type: 'object', properties: { when: {}, volume: { type: 'number', default: 0.5 } } },
        handler: (params) => params as { volume: number },
      }),
    },
    hooks: {
      session_started: (session) => void events.push(`session_started ${session.id}`),
      connected: (session, connection) => {
        events.push(`connected ${connection.id}`);
        connection.send('welcome', { connection: connection.id, step: session.state.step });
      },
      disconnected: (_session, connection) => void events.push(`disconnected ${connection.id}`),
      session_ended: (session, reason) => void events.push(`session_ended ${reason} ${session.signal.aborted}`),
    },
    async run(session) {
      events.push('run');
      try {
        for await (const tick of session.ticks()) {
          session.state.ticks.push(tick);
          await session.emit('main_video', frame((tick * session.state.step) % 256));
        }
      } finally {
        events.push('run ended');
      }
    },
  });
}

function lumaOf(frames: readonly VideoFrame[]): number[] {
  return frames.map((f) => f.data[0]!);
}

/** The rejection of `promise`. */
async function rejectionOf(promise: Promise<unknown>): Promise<ArclightError> {
  const error = await promise.then(
    (value) => new Error(`expected a rejection; resolved with ${JSON.stringify(value)}`),
    (reason: unknown) => reason,
  );
  expect(error).toBeInstanceOf(ArclightError);
  return error as ArclightError;
}

describe('createTestSession: the clock', () => {
  it('moves only when the test advances it: advanceFrames(n) yields exactly n ticks and n frames', async () => {
    const t = await createTestSession(counterModel());
    expect(t.now).toBe(0);
    expect(t.frames('main_video')).toHaveLength(0);
    // Real time passing changes nothing.
    await new Promise((resolve) => setTimeout(resolve, 150));
    await t.settle();
    expect(t.frames('main_video')).toHaveLength(0);

    await t.advanceFrames(3);
    expect(t.state.ticks).toEqual([0, 1, 2]);
    expect(lumaOf(t.frames('main_video'))).toEqual([0, 1, 2]);
    expect(t.now).toBeCloseTo(300, 6);

    await t.advance(150); // 10 fps: tick 3 at 400 ms, tick 4 at 500 ms → only tick 3
    expect(t.state.ticks).toEqual([0, 1, 2, 3]);
    await t.advance(50);
    expect(t.state.ticks).toEqual([0, 1, 2, 3, 4]);
    await t.end();
  });

  it('is deterministic: the same calls give the same frames, and a minute of model time takes far less than a minute', async () => {
    const script = async (): Promise<{ luma: number[]; now: number; messages: unknown[] }> => {
      const t = await createTestSession(counterModel());
      await t.advanceFrames(5);
      await t.sendCommand('set_step', { step: 3 });
      await t.advance(1234);
      await t.connect();
      await t.advanceFrames(2);
      const result = { luma: lumaOf(t.frames('main_video')), now: t.now, messages: [...t.messages] };
      await t.end();
      return result;
    };
    const first = await script();
    const second = await script();
    expect(second).toEqual(first);
    expect(first.luma).toHaveLength(5 + 12 + 2);

    const started = performance.now();
    const t = await createTestSession(counterModel());
    await t.advance(60_000);
    expect(t.frames('main_video')).toHaveLength(600);
    expect(performance.now() - started).toBeLessThan(20_000);
    await t.end();
  });

  it('skips ticks rather than bunching them when the loop falls behind, as the runtime clock does', async () => {
    const model = defineModel({
      name: 'slow',
      fps: 10,
      tracks: [{ name: 'main_video', kind: 'video', direction: 'recvonly', width: SIZE, height: SIZE }],
      async run(session) {
        for await (const tick of session.ticks()) {
          await session.emit('main_video', frame(tick));
          // Waits 250 ms of session time (its own ticks at 4 fps) before taking the next one.
          for await (const _ of session.ticks(4)) break;
        }
      },
    });
    const t = await createTestSession(model);
    await t.advance(1_000);
    // Tick 0 at 100 ms; each later one when the 250 ms of work ends (350, 600, 850 ms), with the
    // index the clock has reached — 2, 5, 7 — not the ones missed.
    expect(lumaOf(t.frames('main_video'))).toEqual([0, 2, 5, 7]);
    await t.end();
  });

  it('yields one frame per tick for an emitted batch (the pacer spreads it at the fps)', async () => {
    const model = defineModel({
      name: 'batch',
      fps: 10,
      tracks: [{ name: 'main_video', kind: 'video', direction: 'recvonly', width: SIZE, height: SIZE }],
      async run(session) {
        for await (const _tick of session.ticks()) {
          await session.emit('main_video', [frame(10), frame(11), frame(12), frame(13), frame(14)]);
          break;
        }
      },
    });
    const t = await createTestSession(model);
    await t.advanceFrames(1);
    expect(lumaOf(t.frames('main_video'))).toEqual([10]);
    await t.advanceFrames(1);
    expect(lumaOf(t.frames('main_video'))).toEqual([10, 11]);
    await t.advanceFrames(2);
    expect(lumaOf(t.frames('main_video'))).toEqual([10, 11, 12, 13]);
    await t.advanceFrames(5);
    expect(lumaOf(t.frames('main_video'))).toEqual([10, 11, 12, 13, 14]);
    await t.end();
  });

  it('paces a loop held only by emit(): video at the fps while a client watches, audio on its 20 ms clock', async () => {
    const model = defineModel({
      name: 'free-running',
      fps: 10,
      tracks: [
        { name: 'main_video', kind: 'video', direction: 'recvonly', width: SIZE, height: SIZE },
        { name: 'voice', kind: 'audio', direction: 'recvonly' },
      ],
      async run(session) {
        const tone = async () => {
          while (!session.signal.aborted) await session.emit('voice', { sampleRate: 48_000, channels: 1, samples: new Int16Array(960) });
        };
        void tone();
        for (let i = 0; !session.signal.aborted; i++) await session.emit('main_video', frame(i));
      },
    });
    const t = await createTestSession(model, { connections: 0 });
    // Nobody watches: the pacer takes nothing, the queue (2 frames) fills, emit() waits.
    expect(t.frames('main_video')).toHaveLength(0);
    // 200 ms may be buffered ahead of the audio clock: the 11th 20 ms frame tips it over.
    expect(t.audioFrames('voice')).toHaveLength(11);
    await t.connect();
    // The stale queued frame is dropped; the newest leaves at once.
    expect(lumaOf(t.frames('main_video'))).toEqual([1]);
    await t.advanceFrames(2);
    expect(lumaOf(t.frames('main_video'))).toEqual([1, 2, 3]);
    await t.advance(100);
    expect(t.audioFrames('voice')).toHaveLength(11 + (200 + 100) / 20);
    await t.end();
  });
});

describe('createTestSession: commands', () => {
  it('replies as the runtime does, JSON on the way in and out, defaults filled in', async () => {
    const t = await createTestSession(counterModel());
    expect(await t.sendCommand('set_step', { step: 2 })).toEqual({ type: 'step_changed', data: { step: 2 } });
    expect(t.state.step).toBe(2);
    expect(await t.sendCommand('reset', {})).toBeUndefined();
    const when = new Date(0);
    expect(await t.sendCommand('echo_options', { when, dropped: undefined })).toEqual({
      type: 'echo_options_result',
      data: { when: when.toISOString(), volume: 0.5 },
    });
    // Replies are messages to the caller, as a client's `message` event sees them.
    expect(t.messages.filter((m) => m.type === 'step_changed')).toEqual([{ type: 'step_changed', data: { step: 2 }, to: 1 }]);
    await t.end();
  });

  it('fails with the runtime codes: unknown_command, invalid_params with field, the model’s CommandError', async () => {
    const t = await createTestSession(counterModel());
    const unknown = await rejectionOf(t.sendCommand('set_stpe', { step: 2 }));
    expect(unknown.code).toBe('unknown_command');
    expect(unknown.message).toContain('set_step');

    const missing = await rejectionOf(t.sendCommand('set_step', {}));
    expect(missing).toMatchObject({ code: 'invalid_params', field: '/step', message: '"step" is required' });
    const outOfRange = await rejectionOf(t.sendCommand('set_step', { step: 11 }));
    expect(outOfRange).toMatchObject({ code: 'invalid_params', field: '/step' });
    const extra = await rejectionOf(t.sendCommand('set_step', { step: 2, speed: 1 }));
    expect(extra).toMatchObject({ code: 'invalid_params', field: '/speed' });

    const refused = await rejectionOf(t.sendCommand('set_step', { step: 7 }));
    expect(refused).toMatchObject({ code: 'unlucky_step', message: 'Any step but 7.', field: undefined });
    expect(t.state.step).toBe(1);
    await t.end();
  });

  it('keeps a crashing handler inside the session: internal_error to the client, the detail in the log, the session goes on', async () => {
    const t = await createTestSession(counterModel());
    for (const name of ['crash', 'crash_later']) {
      const error = await rejectionOf(t.sendCommand(name, {}));
      expect(error.code).toBe('internal_error');
      expect(error.message).not.toContain('on purpose');
    }
    const logged = t.logs.filter((l) => l.level === 'error' && l.source === 'runtime');
    expect(logged.map((l) => l.message)).toEqual(['model command crash failed', 'model command crash_later failed']);
    expect((logged[0]!.fields!['error'] as Error).message).toBe('the handler crashed on purpose');
    // The session is unharmed.
    await t.advanceFrames(2);
    expect(t.frames('main_video')).toHaveLength(2);
    expect(await t.sendCommand('set_step', { step: 3 })).toEqual({ type: 'step_changed', data: { step: 3 } });
    expect(t.error).toBeUndefined();
    await t.end();
  });

  it('sends from the connection named, and refuses without one', async () => {
    const t = await createTestSession(counterModel(), { connections: 2 });
    await t.sendCommand('set_step', { step: 4 }, { connection: 2 });
    expect(t.messages.at(-1)).toEqual({ type: 'step_changed', data: { step: 4 }, to: 2 });
    expect((await rejectionOf(t.sendCommand('set_step', { step: 4 }, { connection: 9 }))).code).toBe('connection_not_found');
    await t.end();
    const lonely = await createTestSession(counterModel(), { connections: 0 });
    expect((await rejectionOf(lonely.sendCommand('set_step', { step: 4 }))).code).toBe('not_ready');
    await lonely.end();
  });
});

describe('createTestSession: hooks, connections, end', () => {
  it('fires hooks in the runtime’s order: session_started, run, connected per client … disconnected, session_ended', async () => {
    const events: string[] = [];
    const t = await createTestSession(counterModel(events), { connections: 2, sessionId: 's-1' });
    expect(events).toEqual(['session_started s-1', 'run', 'connected 1', 'connected 2']);
    expect(t.messages).toEqual([
      { type: 'welcome', data: { connection: 1, step: 1 }, to: 1 },
      { type: 'welcome', data: { connection: 2, step: 1 }, to: 2 },
    ]);
    expect(await t.connect()).toBe(3);
    await t.disconnect(1);
    expect(t.connections).toEqual([2, 3]);
    expect(t.session.connections.map((c) => c.id)).toEqual([2, 3]);
    await t.end('bye');
    // No per-client disconnected at session end; run has returned before session_ended fires.
    expect(events).toEqual([
      'session_started s-1',
      'run',
      'connected 1',
      'connected 2',
      'connected 3',
      'disconnected 1',
      'run ended',
      'session_ended bye true',
    ]);
  });

  it('end(): aborts the signal, awaits run, fires session_ended once; emit and commands then reject with session_ended', async () => {
    const events: string[] = [];
    const t = await createTestSession(counterModel(events));
    await t.advanceFrames(1);
    const ending = t.end();
    expect(t.end('again')).toBe(ending);
    await ending;
    expect(t.endReason).toBe('stopped');
    expect(t.session.signal.aborted).toBe(true);
    expect(events.filter((e) => e.startsWith('session_ended'))).toEqual(['session_ended stopped true']);
    expect((await rejectionOf(t.session.emit('main_video', frame(1)))).code).toBe('session_ended');
    expect((await rejectionOf(t.sendCommand('set_step', { step: 2 }))).code).toBe('session_ended');
    expect(() => t.pushVideo('webcam', frame(1))).toThrow(/ended/);
    expect(t.error).toBeUndefined();
  });

  it('a run() that throws: error is kept, the session ends with model_error, the test process carries on', async () => {
    const events: string[] = [];
    const model = defineModel({
      name: 'crashing',
      fps: 10,
      tracks: [{ name: 'main_video', kind: 'video', direction: 'recvonly', width: SIZE, height: SIZE }],
      hooks: { session_ended: (_session, reason) => void events.push(reason) },
      async run(session) {
        for await (const tick of session.ticks()) if (tick === 2) throw new Error('run crashed on purpose');
      },
    });
    const t = await createTestSession(model);
    await t.advanceFrames(5);
    await t.end();
    expect((t.error as Error).message).toBe('run crashed on purpose');
    expect(t.endReason).toBe('model_error');
    expect(events).toEqual(['model_error']);
    expect(t.logs.some((l) => l.message === 'model run failed')).toBe(true);
  });

  it('await using ends the session with its scope', async () => {
    const events: string[] = [];
    {
      await using t = await createTestSession(counterModel(events));
      await t.advanceFrames(1);
    }
    expect(events.at(-1)).toBe('session_ended stopped true');
  });
});

describe('createTestSession: set-up', () => {
  it('runs load() once per model object, and a failed load fails with model_not_ready', async () => {
    let loads = 0;
    const model = defineModel({
      name: 'loading',
      fps: 10,
      tracks: [],
      load: (context) => {
        loads++;
        context.progress(0.5, 'weights');
      },
    });
    const first = await createTestSession(model);
    expect(first.logs).toContainEqual({
      level: 'info',
      message: 'model load progress',
      fields: { fraction: 0.5, message: 'weights' },
      source: 'runtime',
    });
    await first.end();
    await (await createTestSession(model)).end();
    expect(loads).toBe(1);

    const broken = defineModel({
      name: 'broken',
      fps: 10,
      tracks: [],
      load: () => {
        throw new Error('weights missing');
      },
    });
    const failure = await rejectionOf(createTestSession(broken));
    expect(failure.code).toBe('model_not_ready');
    expect((failure.cause as Error).message).toBe('weights missing');
  });

  it('validates the definition as the runtime does', async () => {
    const invalid = { name: 'Bad Name', fps: 0, tracks: [{ name: 'v', kind: 'video', direction: 'recvonly', width: 15, height: 16 }] };
    await expect(createTestSession(invalid as unknown as ModelDefinition)).rejects.toThrow(
      /name must be a slug[\s\S]*fps must be[\s\S]*width must be an even integer/,
    );
  });

  it('takes state overrides: merged over createSessionState, or a factory instead of it', async () => {
    const merged = await createTestSession(counterModel(), { state: { step: 5 } });
    expect(merged.state).toEqual({ step: 5, ticks: [] });
    await merged.advanceFrames(2);
    expect(lumaOf(merged.frames('main_video'))).toEqual([0, 5]);
    await merged.end();
    const made = await createTestSession(counterModel(), { state: () => ({ step: 2, ticks: [99] }) });
    expect(made.state.ticks).toEqual([99]);
    await made.end();
  });

  it('runs at the fps asked for', async () => {
    const t = await createTestSession(counterModel(), { fps: 20 });
    expect(t.session.fps).toBe(20);
    await t.advance(300);
    expect(t.frames('main_video')).toHaveLength(6);
    await t.end();
  });
});

describe('createTestSession: media in and out', () => {
  let t: TestSession<CounterState>;

  it('emit() refuses what the runtime refuses, and takes a frame of another size (the runtime scales it)', async () => {
    t = await createTestSession(counterModel());
    const emit = t.session.emit;
    await expect(emit('nope', frame(1))).rejects.toThrow(new TypeError('emit("nope"): the model declares no output track "nope"'));
    await expect(emit('voice', frame(1))).rejects.toThrow(/is an audio track/);
    await expect(emit('main_video', { sampleRate: 48_000, channels: 1, samples: new Int16Array(960) })).rejects.toThrow(/is a video track/);
    await expect(emit('main_video', { ...frame(1), data: new Uint8Array(10) })).rejects.toThrow(RangeError);
    await expect(emit('main_video', { ...frame(1), metadata: [1, 2] as never })).rejects.toThrow(/metadata must be/);
    await expect(emit('voice', { sampleRate: 44_100, channels: 1, samples: new Int16Array(882) })).rejects.toThrow(/48000 Hz/);
    await expect(emit('main_video', frame(9, 32, 8))).resolves.toBeUndefined();
    await t.end();
  });

  it('copies emitted frames, so a model may reuse its buffer', async () => {
    const model = defineModel({
      name: 'reuser',
      fps: 10,
      tracks: [{ name: 'main_video', kind: 'video', direction: 'recvonly', width: SIZE, height: SIZE }],
      async run(session) {
        const reused = frame(0);
        for await (const tick of session.ticks()) {
          (reused.data as Uint8Array).fill(tick + 1, 0, SIZE * SIZE);
          await session.emit('main_video', reused);
        }
      },
    });
    t = await createTestSession(model as never);
    await t.advanceFrames(3);
    expect(lumaOf(t.frames('main_video'))).toEqual([1, 2, 3]);
    await t.end();
  });

  it('pushVideo: latest() and frames() see it, converted to the track format; pushAudio reaches frames()', async () => {
    const seen: Array<{ format: string; first: number }> = [];
    const heard: number[] = [];
    const model = defineModel({
      name: 'listener',
      fps: 10,
      tracks: [
        { name: 'webcam', kind: 'video', direction: 'sendonly', format: 'rgba' },
        { name: 'mic', kind: 'audio', direction: 'sendonly', channels: 2 },
      ],
      async run(session) {
        void (async () => {
          for await (const audio of session.inputAudio('mic').frames()) heard.push(audio.samples.length);
        })();
        for await (const picture of session.inputVideo('webcam').frames()) seen.push({ format: picture.format, first: picture.data[0]! });
      },
    });
    t = await createTestSession(model as never);
    const white = frame(235);
    t.pushVideo('webcam', white);
    white.data.fill(0); // the harness took a copy
    await t.settle();
    expect(seen).toEqual([{ format: 'rgba', first: 255 }]);
    expect(t.session.inputVideo('webcam').latest()?.format).toBe('rgba');
    t.pushAudio('mic', { sampleRate: 48_000, channels: 2, samples: new Int16Array(1920) });
    await t.settle();
    expect(heard).toEqual([1920]);
    expect(() => t.pushAudio('mic', { sampleRate: 48_000, channels: 1, samples: new Int16Array(960) })).toThrow(RangeError);
    expect(() => t.pushVideo('mic', white)).toThrow(TypeError);
    expect(() => t.pushVideo('webcam', { ...white, data: new Uint8Array(3) })).toThrow(RangeError);
    await t.end();
  });

  it('records messages as clients get them: broadcast to all, send to one, JSON round trip, unserializable ones lost and logged', async () => {
    const model = defineModel({
      name: 'talker',
      fps: 10,
      tracks: [],
      hooks: {
        connected: (session, connection) => {
          connection.send('hello', { id: connection.id, skipped: undefined } as never);
          session.broadcast('joined', { count: session.connections.length });
          connection.send('broken', { big: 1n } as never);
        },
      },
      async run(session) {
        session.log.info('started', { fps: session.fps });
      },
    });
    t = await createTestSession(model as never);
    expect(t.messages).toEqual([
      { type: 'hello', data: { id: 1 }, to: 1 },
      { type: 'joined', data: { count: 1 }, to: 'all' },
    ]);
    expect(t.logs).toContainEqual({ level: 'info', message: 'started', fields: { fps: 10 }, source: 'model' });
    expect(t.logs.some((l) => l.level === 'warn' && l.message === 'data channel send failed')).toBe(true);
    await t.end();
  });
});
