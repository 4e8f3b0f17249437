/**
 * `createTestSession(model)`: a model's session without a runtime, a network or real time, for
 * unit tests that run in milliseconds. Commands go through the runtime's own router (ajv
 * validation, CommandError codes, isolation of handler crashes), every hook and `run` through the
 * runtime's author-code guard, and `emit()` through the runtime's checks; what differs is the clock
 * (it moves only when the test advances it) and the far side of the tracks (lists of frames
 * instead of encoders and peers).
 *
 * Longer than ~400 lines: it is the whole `ModelSession` a model sees, member for member with the
 * runtime's facade (runtime/session/model-facade.ts), plus the test's view of each track.
 */

import { ArclightError } from '../../protocol/errors.ts';
import type { JsonValue } from '../../protocol/json-schema.ts';
import type { Logger } from '../../server-kit/log.ts';
import { callAuthorCode, DEFAULT_HOOK_DEADLINE_MS, isSessionEnded } from '../model/author-code.ts';
import { CommandRouter } from '../model/command-router.ts';
import type { ModelDefinition, ModelLoadContext, TrackSpec } from '../model/definition.ts';
import type { ConnectionHandle, EmitOptions, InputAudio, InputVideo, ModelSession } from '../model/model-session.ts';
import { validateModelDefinition } from '../model/validate-definition.ts';
import { driveSteps, StepGate, type StepHost } from '../model/step-driver.ts';
import type { PlayoutStats } from '../media/adaptive-pacer.ts';
import type { ModerationOptions } from '../moderation/moderator.ts';
import { audioBatch, emitAfterEndError, unknownOutputTrackError, videoBatch, type EmitFrames } from '../media/emit-checks.ts';
import { assertFrameShape, convertVideoFrame } from '../media/frame-convert.ts';
import type { AudioFrame, VideoFrame } from '../media/frames.ts';
import { InputAudioTrack, InputVideoTrack } from '../media/input-tracks.ts';
import { AUDIO_SAMPLE_RATE } from '../media/output-audio-track.ts';
import { FrameClock } from '../session/frame-clock.ts';
import { ManualClock } from './manual-clock.ts';
import { SimulatedAudioOutput, SimulatedVideoOutput } from './simulated-outputs.ts';
import { bindSessionSettings, SessionSettings } from '../model/settings.ts';

/** How `createTestSession` sets up the session. */
export interface TestSessionOptions<State> {
  /**
   * The session's state: an object is merged over what the model's `createSessionState()` returns
   * (set a few fields, keep the rest); a function replaces `createSessionState` for this session.
   */
  readonly state?: Partial<State> | (() => State);
  /** Client connections opened at the start, each firing the `connected` hook. Default 1. */
  readonly connections?: number;
  /** The session's frame rate (`session.fps`, `session.ticks()`, output pacing). Default the model's `fps`. */
  readonly fps?: number;
  /** `session.id`. Default `'test-session'`. */
  readonly sessionId?: string;
  /** The moderator the runtime would be given (`startRuntime({ moderation })`), to test `moderated()` fields. Default none. */
  readonly moderation?: ModerationOptions;
}

/** One message sent to clients: `to` is the connection id, or `'all'` for `session.broadcast()`. */
export interface TestMessage {
  readonly type: string;
  /** As a client receives it: JSON-serialized and parsed again. */
  readonly data: JsonValue | undefined;
  /** A connection id (`connection.send()`, a command's reply), or `'all'`: every connection live at the time. */
  readonly to: number | 'all';
}

/**
 * One line of the session's log. `source: 'model'` is what `session.log` wrote; `'runtime'` is
 * the runtime's account — a hook, handler or `run` that threw (with the error in `fields.error`),
 * `load()` progress.
 */
export interface TestLogRecord {
  readonly level: 'debug' | 'info' | 'warn' | 'error';
  readonly message: string;
  readonly fields: Readonly<Record<string, unknown>> | undefined;
  readonly source: 'model' | 'runtime';
}

/** A command's reply, as the calling client receives it. */
export interface TestCommandReply {
  readonly type: string;
  readonly data: JsonValue;
}

/** Options of `TestSession.sendCommand`. */
export interface SendCommandOptions {
  /** The connection that sends it. Default the first live connection. */
  readonly connection?: number;
}

/** Options of `TestSession.waitFor`. */
export interface WaitForOptions {
  /** Real milliseconds before it gives up. Default 5000. */
  readonly timeoutMs?: number;
  /** Named in the timeout's error. */
  readonly description?: string;
}

/** The reason `TestSession.end()` gives by default: the runtime's for a client's `stop_session`. */
export const DEFAULT_END_REASON = 'stopped';

/**
 * `load()` runs once per model object, as the runtime runs it once per process: later sessions
 * of the same model (later tests in a file) share the first one's outcome, a failure included.
 */
const loads = new WeakMap<object, Promise<{ ok: true } | { ok: false; error: unknown }>>();

/** Fake-time steps one advance may take before the harness calls it a loop that never yields. */
const MAX_STEPS = 1_000_000;
/** Event-loop turns one settle may take while model code keeps working without the clock. */
const MAX_SETTLE_TURNS = 10_000;
/** Float slack when stepping the manual clock by whole frames (1000/fps does not add up exactly). */
const FRAME_STEP_SLACK_MS = 1e-6;

/**
 * Starts a session of `model` under test, the way the runtime would: the definition is validated
 * (`ModelDefinitionError` lists every problem), `load()` runs once per model object,
 * `createSessionState()` makes the state, the `session_started` hook fires, `run(session)` starts,
 * then each of `options.connections` (default 1) connects and fires `connected`.
 *
 * Time is a manual clock at 0 that moves only in `advance()` / `advanceFrames()`: nothing that
 * waits for time happens until the test says so. `session.ticks()` yields tick `n` when the clock
 * has moved `n + 1` frame intervals past the loop's start, so `advanceFrames(3)` gives a loop at
 * the model's fps exactly ticks 0, 1 and 2 (the runtime yields tick 0 at once; the harness waits
 * for the test, so that counts come out even).
 *
 * @throws ArclightError `model_not_ready` when `load()` failed (its error is the `cause`).
 *
 * @example
 * ```ts
 * import { createTestSession } from 'arclight/testing';
 * import model from './index.ts';
 *
 * const t = await createTestSession(model);
 * await t.advanceFrames(3);
 * expect(t.frames('main_video')).toHaveLength(3);     // ticks 0, 1 and 2
 * await expect(t.sendCommand('set_speed', { speed: -1 })).rejects.toMatchObject({ code: 'invalid_params', field: '/speed' });
 * await t.end();
 * ```
 */
export async function createTestSession<State>(
  model: ModelDefinition<State>,
  options: TestSessionOptions<State> = {},
): Promise<TestSession<State>> {
  // The validated definition: `settings` have their `set_<name>` commands.
  model = validateModelDefinition(model, `model "${String((model as { name?: unknown }).name)}"`) as ModelDefinition<State>;
  const connections = options.connections ?? 1;
  if (!(Number.isInteger(connections) && connections >= 0))
    throw new RangeError(`connections must be a whole number ≥ 0; got ${connections}`);
  const fps = options.fps ?? model.fps;
  if (!(fps > 0 && fps <= 1000)) throw new RangeError(`fps must be in (0, 1000]; got ${fps}`);
  const session = new TestSession<State>(model, options, fps, await loadOnce(model, model.load));
  await session.start(connections);
  return session;
}

/** Runs `model.load()` the first time a model object is seen; later calls share its outcome. */
async function loadOnce(model: object, load: ModelDefinition<unknown>['load']): Promise<readonly TestLogRecord[]> {
  const records: TestLogRecord[] = [];
  let pending = loads.get(model);
  if (!pending) {
    const log = recordingLogger(records, 'runtime');
    const context: ModelLoadContext = {
      progress: (fraction, message) => log.info('model load progress', { fraction, ...(message === undefined ? {} : { message }) }),
    };
    pending = load
      ? callAuthorCode(log, 'load', () => load(context)).then((outcome) =>
          outcome.ok ? { ok: true as const } : { ok: false as const, error: outcome.error },
        )
      : Promise.resolve({ ok: true as const });
    loads.set(model, pending);
  }
  const outcome = await pending;
  if (!outcome.ok) {
    throw new ArclightError('model_not_ready', `The model failed to load: ${(outcome.error as Error)?.message ?? String(outcome.error)}`, {
      cause: outcome.error,
    });
  }
  return records;
}

/**
 * A running session under test. Everything the model sends is recorded (`messages`, `logs`,
 * `frames()`, `audioFrames()`); the test drives inputs (`pushVideo`, `pushAudio`), commands
 * (`sendCommand`), connections (`connect`, `disconnect`) and time (`advance`, `advanceFrames`).
 * Dispose of it with `await t.end()` or `await using t = await createTestSession(model)`.
 */
export class TestSession<State> implements AsyncDisposable {
  /** The `ModelSession` the model's code sees (for what the harness has no shortcut for). */
  readonly session: ModelSession<State>;
  /** Every message sent to clients so far, in order; command replies included, as a client's `message` event sees them. */
  readonly messages: TestMessage[] = [];
  /** The session's log so far: the model's `session.log` lines and the runtime's account (see TestLogRecord). */
  readonly logs: TestLogRecord[] = [];
  readonly #model: ModelDefinition<State>;
  readonly #fps: number;
  readonly #clock = new ManualClock();
  readonly #abort = new AbortController();
  readonly #router: CommandRouter;
  readonly #settings: SessionSettings;
  readonly #log: Logger;
  readonly #outputVideo = new Map<string, SimulatedVideoOutput>();
  readonly #outputAudio = new Map<string, SimulatedAudioOutput>();
  readonly #inputVideo = new Map<string, { track: InputVideoTrack; format: 'i420' | 'rgba' }>();
  readonly #inputAudio = new Map<string, { track: InputAudioTrack; channels: 1 | 2 }>();
  readonly #connections = new Map<number, ConnectionHandle>();
  #nextConnectionId = 1;
  #nextRequestId = 1;
  #running: Promise<void> = Promise.resolve();
  /** A step model's lock: steps, handlers and hooks take turns, as in the runtime. */
  readonly #gate = new StepGate();
  #started = false;
  #error: unknown;
  #endReason: string | undefined;
  #ending: Promise<void> | undefined;

  /** Use `createTestSession`, which validates the model and runs `load()` first. @internal */
  constructor(model: ModelDefinition<State>, options: TestSessionOptions<State>, fps: number, loadLogs: readonly TestLogRecord[]) {
    this.#model = model;
    this.#fps = fps;
    this.logs.push(...loadLogs);
    this.#log = recordingLogger(this.logs, 'runtime');
    this.#router = new CommandRouter(model.commands ?? {}, this.#log, undefined, options.moderation);
    for (const spec of model.tracks) this.#createTrack(spec);
    this.#settings = new SessionSettings(model.settings);
    this.session = this.#createFacade(options.sessionId ?? 'test-session', initialState(model, options.state));
  }

  /** `session.state`. */
  get state(): State {
    return this.session.state;
  }

  /**
   * What `run()` threw — or, for a step model, the error of the step that ended the session — if
   * it did; the session then ended with reason `model_error`, as the runtime ends it.
   */
  get error(): unknown {
    return this.#error;
  }

  /** Why the session ended (`stopped`, `model_error`, …), or undefined while it runs. */
  get endReason(): string | undefined {
    return this.#endReason;
  }

  /** The manual clock's time: milliseconds since the session started. */
  get now(): number {
    return this.#clock.now();
  }

  /** Ids of the live connections, in connect order. */
  get connections(): readonly number[] {
    return [...this.#connections.keys()];
  }

  /**
   * Fires `session_started`, starts `run`, then opens `connections` connections. Called once, by
   * `createTestSession`.
   * @internal
   */
  async start(connections: number): Promise<void> {
    if (this.#started) throw new Error('TestSession.start(): the session has started already');
    this.#started = true;
    const started = this.#model.hooks?.session_started;
    if (started) await callAuthorCode(this.#log, 'hook session_started', () => started(this.session), DEFAULT_HOOK_DEADLINE_MS);
    const run = this.#model.run;
    if ((run || this.#model.generate) && !this.#endReason) {
      const running = run
        ? callAuthorCode(this.#log, 'run', () => run(this.session), undefined, isSessionEnded)
        : driveSteps(this.#model as never, this.session as never, this.#stepHost(), this.#abort.signal);
      this.#running = running.then((outcome) => {
        if (outcome.ok || this.#endReason) return;
        this.#error = outcome.error;
        void this.end('model_error');
      });
    }
    await this.settle();
    // A run() that failed at once has ended the session: the test gets it to look at `error`.
    for (let i = 0; i < connections && this.#endReason === undefined; i++) await this.connect();
  }

  /**
   * Sends a command as a client on `options.connection` would, through the runtime's own router:
   * resolves with the reply (`{ type, data }`), or undefined for a bodyless ack. A failure rejects
   * with the ArclightError the client would get — `unknown_command`, `invalid_params` (with
   * `field`, the JSON pointer), the handler's own `CommandError` code, or `internal_error` for a
   * handler that crashed (its error is in `logs`; the test process is unaffected).
   */
  async sendCommand(name: string, params?: unknown, options: SendCommandOptions = {}): Promise<TestCommandReply | undefined> {
    if (this.#endReason !== undefined) throw new ArclightError('session_ended', `The session has ended (${this.#endReason}).`);
    const connection = this.#sender(options.connection);
    // What a client sends travels as JSON: the handler sees what survives that, defaults filled in.
    const data = params === undefined ? undefined : (JSON.parse(JSON.stringify(params)) as unknown);
    const dispatched = this.#router.dispatch(
      name,
      data,
      { session: this.session, connection, requestId: `test-${this.#nextRequestId++}` },
      undefined,
      this.#log,
      this.#betweenSteps,
    );
    const outcome = await this.#untilSettled(dispatched);
    await this.settle();
    switch (outcome.kind) {
      case 'ack':
        return undefined;
      case 'failed':
        throw new ArclightError(outcome.code, outcome.message, outcome.field ? { field: outcome.field } : {});
      case 'reply': {
        let data: JsonValue;
        try {
          data = asReceived(outcome.data) as JsonValue;
        } catch (error) {
          // The runtime logs this and the reply never leaves; the client's command times out.
          this.#log.warn('data channel send failed', { error, type: outcome.type });
          throw new ArclightError('timeout', `The reply of "${name}" never reached the client: it is not JSON-serializable (see logs).`);
        }
        this.messages.push({ type: outcome.type, data, to: connection.id });
        return { type: outcome.type, data };
      }
    }
  }

  /**
   * Delivers a frame on an input video track, as if the publishing client's webcam sent it:
   * `inputVideo(track).latest()` returns it and `frames()` yields it. It is copied, and converted
   * to the track's `format` when it is in the other one, as the runtime's decoder output is.
   */
  pushVideo(track: string, frame: VideoFrame): void {
    this.#assertLive(`pushVideo("${track}")`);
    const input = this.#inputVideo.get(track);
    if (!input) throw new TypeError(`pushVideo("${track}"): the model declares no input video track "${track}"`);
    assertFrameShape(frame);
    const converted = convertVideoFrame(frame, input.format);
    input.track.deliver(converted === frame ? { ...frame, data: frame.data.slice() } : converted);
  }

  /** Delivers a 48 kHz frame with the track's channel count on an input audio track; `inputAudio(track).frames()` yields it. */
  pushAudio(track: string, frame: AudioFrame): void {
    this.#assertLive(`pushAudio("${track}")`);
    const input = this.#inputAudio.get(track);
    if (!input) throw new TypeError(`pushAudio("${track}"): the model declares no input audio track "${track}"`);
    if (frame.sampleRate !== AUDIO_SAMPLE_RATE || frame.channels !== input.channels || !(frame.samples instanceof Int16Array)) {
      throw new RangeError(
        `pushAudio("${track}"): the runtime delivers ${AUDIO_SAMPLE_RATE} Hz, ${input.channels}-channel Int16Array samples on this track`,
      );
    }
    input.track.deliver({ ...frame, samples: frame.samples.slice() });
  }

  /**
   * Moves the clock `ms` forward, stopping at every moment something waits for (a tick, a frame's
   * slot on an output, the audio clock) and letting the model's code run before it moves on.
   * Deterministic: the same calls give the same frames on any machine.
   */
  async advance(ms: number): Promise<void> {
    if (!(ms >= 0 && Number.isFinite(ms))) throw new RangeError(`advance(ms): ms must be a finite number ≥ 0; got ${ms}`);
    const target = this.#clock.now() + ms;
    await this.settle();
    for (let steps = 0; ; steps++) {
      if (steps >= MAX_STEPS) throw new Error(`advance(${ms}): more than ${MAX_STEPS} waits fell due; does the model wait 0 ms in a loop?`);
      const next = this.#clock.nextDue(target + FRAME_STEP_SLACK_MS);
      if (next === undefined) break;
      this.#clock.moveTo(next);
      await this.settle();
    }
    this.#clock.moveTo(target);
    await this.settle();
  }

  /** `advance()` by `n` frame intervals (1/fps each): `session.ticks()` yields `n` more ticks. */
  async advanceFrames(n = 1): Promise<void> {
    if (!(Number.isInteger(n) && n >= 0)) throw new RangeError(`advanceFrames(n): n must be a whole number ≥ 0; got ${n}`);
    await this.advance((n * 1000) / this.#fps);
  }

  /**
   * Lets pending work run without moving the clock: returns once an event-loop turn passes in
   * which the model sends, logs, emits and schedules nothing new. `advance` and `sendCommand` do
   * this already; call it after something the harness does not see (a resolved promise of yours).
   */
  async settle(): Promise<void> {
    let before = this.#activity();
    for (let turn = 0; turn < MAX_SETTLE_TURNS; turn++) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      const after = this.#activity();
      if (after === before && turn > 0) return;
      before = after;
    }
  }

  /**
   * Waits in real time, the clock standing still, until `condition()` holds: for work the model
   * does off the event loop (a worker thread's inference, a file read). Rejects after
   * `options.timeoutMs` (default 5 s).
   */
  async waitFor(condition: () => boolean, options: WaitForOptions = {}): Promise<void> {
    const timeoutMs = options.timeoutMs ?? 5_000;
    const deadline = performance.now() + timeoutMs;
    await this.settle();
    while (!condition()) {
      if (performance.now() > deadline) {
        throw new Error(`waitFor: ${options.description ?? 'the condition'} did not hold within ${timeoutMs} ms`);
      }
      await new Promise((resolve) => setTimeout(resolve, 2));
      await this.settle();
    }
  }

  /**
   * The frames an output video track delivered so far, in order: copies taken at `emit()`, paced
   * at most one per 1/fps and only while a connection is live, as viewers would receive them. A
   * CUDA frame appears as its host copy (I420 or RGBA).
   */
  frames(track: string): readonly VideoFrame[] {
    const output = this.#outputVideo.get(track);
    if (!output) {
      throw new TypeError(
        this.#outputAudio.has(track)
          ? `frames("${track}"): "${track}" is an audio track; use audioFrames()`
          : `frames("${track}"): the model declares no output video track "${track}"`,
      );
    }
    return output.sent;
  }

  /**
   * When each frame of `frames(track)` left, on the manual clock (ms since the start): the pacing
   * as viewers would see it — one per 1/fps at most, or the adaptive pacer's even spacing.
   */
  frameTimes(track: string): readonly number[] {
    return this.#videoOutput('frameTimes', track).sentAt;
  }

  /**
   * How an output video track paces now: `{ mode: 'fixed', fps }`, or for `fps: 'adaptive'` the
   * pacer's chosen rate, its estimate of the model's production rate, cushion and underruns — what
   * the runtime reports.
   */
  playout(track: string): PlayoutStats | { readonly mode: 'fixed'; readonly fps: number } {
    return this.#videoOutput('playout', track).playout;
  }

  #videoOutput(what: string, track: string): SimulatedVideoOutput {
    const output = this.#outputVideo.get(track);
    if (!output) throw new TypeError(`${what}("${track}"): the model declares no output video track "${track}"`);
    return output;
  }

  /** The frames an output audio track took from `emit()` so far, in order (copies, as emitted). */
  audioFrames(track: string): readonly AudioFrame[] {
    const output = this.#outputAudio.get(track);
    if (!output) {
      throw new TypeError(
        this.#outputVideo.has(track)
          ? `audioFrames("${track}"): "${track}" is a video track; use frames()`
          : `audioFrames("${track}"): the model declares no output audio track "${track}"`,
      );
    }
    return output.emitted;
  }

  /** Opens one more client connection and fires `connected` (awaited); resolves with its id. */
  async connect(): Promise<number> {
    this.#assertLive('connect()');
    const id = this.#nextConnectionId++;
    const handle: ConnectionHandle = Object.freeze({
      id,
      send: (type: string, data?: JsonValue) => {
        if (this.#connections.has(id)) this.#record(type, data, id);
      },
    });
    this.#connections.set(id, handle);
    for (const output of this.#outputVideo.values()) output.setWatched(true);
    this.#gate.nudge(); // a step model waiting for a viewer starts
    const hook = this.#model.hooks?.connected;
    if (hook)
      await this.#untilSettled(
        this.#betweenSteps(() => callAuthorCode(this.#log, 'hook connected', () => hook(this.session, handle), DEFAULT_HOOK_DEADLINE_MS)),
      );
    await this.settle();
    return id;
  }

  /** Closes connection `id` while the session lives on, and fires `disconnected` (awaited). */
  async disconnect(id: number): Promise<void> {
    this.#assertLive(`disconnect(${id})`);
    const handle = this.#connections.get(id);
    if (!handle)
      throw new ArclightError('connection_not_found', `No live connection ${id}; live: ${this.connections.join(', ') || '(none)'}.`);
    this.#connections.delete(id);
    if (this.#connections.size === 0) for (const output of this.#outputVideo.values()) output.setWatched(false);
    this.#gate.nudge();
    const hook = this.#model.hooks?.disconnected;
    if (hook)
      await this.#untilSettled(
        this.#betweenSteps(() =>
          callAuthorCode(this.#log, 'hook disconnected', () => hook(this.session, handle), DEFAULT_HOOK_DEADLINE_MS),
        ),
      );
    await this.settle();
  }

  /**
   * Ends the session as the runtime does: `session.signal` aborts, the tracks close (a pending
   * `emit()` returns, a later one rejects with `session_ended`), `run` is awaited (at most 2 s),
   * connections go without `disconnected`, then `session_ended` fires with `reason`. Idempotent:
   * later calls return the first end.
   */
  end(reason: string = DEFAULT_END_REASON): Promise<void> {
    this.#ending ??= this.#end(reason);
    return this.#ending;
  }

  /** `await using t = await createTestSession(model)` ends the session when the scope does. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.end();
  }

  async #end(reason: string): Promise<void> {
    this.#endReason = reason;
    this.#abort.abort(new ArclightError('session_ended', `Session ended: ${reason}`));
    for (const { track } of this.#inputVideo.values()) track.close();
    for (const { track } of this.#inputAudio.values()) track.close();
    await Promise.all([...this.#outputVideo.values(), ...this.#outputAudio.values()].map((output) => output.close()));
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.#running, new Promise((resolve) => (timer = setTimeout(resolve, 2_000)))]);
    clearTimeout(timer);
    this.#connections.clear();
    const hook = this.#model.hooks?.session_ended;
    if (hook) await callAuthorCode(this.#log, 'hook session_ended', () => hook(this.session, reason), DEFAULT_HOOK_DEADLINE_MS);
    await this.settle();
  }

  /** For a step model, author code (handlers, hooks) runs between steps, as in the runtime. */
  readonly #betweenSteps = <T>(fn: () => Promise<T>): Promise<T> => (this.#model.generate ? this.#gate.between(fn) : fn());

  /**
   * Waits for `work` (a command, a hook). For a step model it may be queued behind the step in
   * progress, which may wait on the clock (`session.sleep`): the clock then moves on, wait by
   * wait, until `work` settles — as time would pass in the runtime.
   */
  async #untilSettled<T>(work: Promise<T>): Promise<T> {
    if (!this.#model.generate) return work;
    let done = false;
    const tracked = work.finally(() => {
      done = true;
    });
    await this.settle();
    for (let steps = 0; !done && steps < MAX_STEPS; steps++) {
      const next = this.#clock.nextDue(Infinity);
      if (next === undefined) break; // waiting on something off the clock: wait for it in real time
      this.#clock.moveTo(next);
      await this.settle();
    }
    return tracked;
  }

  /** What the step driver sees of the harness: its clock, tracks and connections. */
  #stepHost(): StepHost {
    return {
      clock: this.#clock,
      fps: this.#fps,
      log: this.#log,
      gate: this.#gate,
      watched: () => this.#connections.size > 0,
      emitVideo: (track, frames, metadata, productionMs) => {
        if (this.#endReason !== undefined) return Promise.reject(emitAfterEndError(this.session.id));
        return this.#outputVideo.get(track)!.emit(frames, undefined, metadata, productionMs);
      },
      emitAudio: async (track, frames) => {
        if (this.#endReason !== undefined) throw emitAfterEndError(this.session.id);
        for (const frame of frames) await this.#outputAudio.get(track)!.emit(frame);
      },
      trackKind: (track) => (this.#outputVideo.has(track) ? 'video' : this.#outputAudio.has(track) ? 'audio' : undefined),
    };
  }

  #createTrack(spec: TrackSpec): void {
    if (spec.kind === 'video' && spec.direction === 'recvonly')
      this.#outputVideo.set(spec.name, new SimulatedVideoOutput(spec, this.#fps, this.#clock));
    else if (spec.kind === 'audio' && spec.direction === 'recvonly')
      this.#outputAudio.set(spec.name, new SimulatedAudioOutput(spec, this.#clock));
    else if (spec.kind === 'video')
      this.#inputVideo.set(spec.name, { track: new InputVideoTrack(spec.name), format: spec.format ?? 'i420' });
    else this.#inputAudio.set(spec.name, { track: new InputAudioTrack(spec.name), channels: spec.channels ?? 1 });
  }

  /** The facade model code sees: the runtime's (runtime/session/model-facade.ts) on the harness's tracks and clock. */
  #createFacade(id: string, state: State): ModelSession<State> {
    const harness = this;
    const signal = this.#abort.signal;
    const log = recordingLogger(this.logs, 'model');
    return bindSessionSettings(
      Object.freeze({
        id,
        signal,
        state,
        get settings(): Readonly<Record<string, unknown>> {
          return harness.#settings.current;
        },
        fps: this.#fps,
        log: { info: log.info, warn: log.warn, error: log.error },
        get connections(): readonly ConnectionHandle[] {
          return [...harness.#connections.values()];
        },
        emit: async (track: string, frames: EmitFrames, options?: EmitOptions): Promise<void> => {
          if (harness.#endReason !== undefined) throw emitAfterEndError(id);
          const video = harness.#outputVideo.get(track);
          if (video) return video.emit(videoBatch(track, frames), options?.dropPolicy, options?.metadata);
          const audio = harness.#outputAudio.get(track);
          if (audio) {
            for (const frame of audioBatch(track, frames)) await audio.emit(frame);
            return;
          }
          throw unknownOutputTrackError(track);
        },
        flush: async (track?: string): Promise<void> => {
          if (track !== undefined && !harness.#outputVideo.has(track)) {
            throw new TypeError(`flush("${track}"): the model declares no output video track "${track}"`);
          }
          for (const [name, video] of harness.#outputVideo) if (track === undefined || name === track) video.flush();
        },
        inputVideo: (track: string): InputVideo => {
          const input = harness.#inputVideo.get(track);
          if (!input) throw new TypeError(`inputVideo("${track}"): the model declares no input video track "${track}"`);
          return input.track;
        },
        inputAudio: (track: string): InputAudio => {
          const input = harness.#inputAudio.get(track);
          if (!input) throw new TypeError(`inputAudio("${track}"): the model declares no input audio track "${track}"`);
          return input.track;
        },
        broadcast: (type: string, data?: JsonValue): void => harness.#record(type, data, 'all'),
        ticks: (rate?: number): AsyncIterable<number> =>
          ticksAfterOneInterval(new FrameClock(rate ?? harness.#fps, signal, harness.#clock), rate ?? harness.#fps, signal, harness.#clock),
        sleep: async (ms: number): Promise<void> => {
          await harness.#clock.sleep(ms, signal);
        },
      }),
      this.#settings,
    );
  }

  /** Records a message as its recipients would get it; one that cannot be serialized is lost, as on the data channel. */
  #record(type: string, data: JsonValue | undefined, to: number | 'all'): void {
    if (this.#endReason !== undefined) return;
    let received: JsonValue | undefined;
    try {
      received = asReceived(data);
    } catch (error) {
      this.#log.warn('data channel send failed', { error, type });
      return;
    }
    this.messages.push({ type, data: received, to });
  }

  #sender(id: number | undefined): ConnectionHandle {
    if (id === undefined) {
      const first = this.#connections.values().next();
      if (first.done) throw new ArclightError('not_ready', 'No live connection to send the command on; connect() first.');
      return first.value;
    }
    const handle = this.#connections.get(id);
    if (!handle)
      throw new ArclightError('connection_not_found', `No live connection ${id}; live: ${this.connections.join(', ') || '(none)'}.`);
    return handle;
  }

  #assertLive(what: string): void {
    if (this.#endReason !== undefined) throw new ArclightError('session_ended', `${what}: the session has ended (${this.#endReason}).`);
  }

  /** Changes whenever the model does something the harness sees; settle() waits until it stops. */
  #activity(): number {
    let total = this.#clock.waitsBegun + this.messages.length + this.logs.length;
    for (const output of this.#outputVideo.values()) total += output.sent.length + output.dropped;
    for (const output of this.#outputAudio.values()) total += output.emitted.length;
    return total;
  }
}

/**
 * The runtime's frame clock, started one interval late: its tick 0 comes with the test's first
 * advance, not before it, so `advanceFrames(n)` yields exactly `n` ticks.
 */
function ticksAfterOneInterval(frames: FrameClock, fps: number, signal: AbortSignal, clock: ManualClock): AsyncIterable<number> {
  return {
    async *[Symbol.asyncIterator]() {
      if (await clock.sleep(1000 / fps, signal)) return;
      yield* frames;
    },
  };
}

function initialState<State>(model: ModelDefinition<State>, override: TestSessionOptions<State>['state']): State {
  if (typeof override === 'function') return override();
  const state = model.createSessionState?.() ?? ({} as State);
  if (override !== undefined) Object.assign(state as object, override);
  return state;
}

/** A value as the far side of the data channel sees it: JSON-serialized, then parsed. */
function asReceived(data: JsonValue | undefined): JsonValue | undefined {
  return data === undefined ? undefined : (JSON.parse(JSON.stringify(data)) as JsonValue);
}

/** A Logger (the runtime's interface) whose lines go to `records`. */
function recordingLogger(records: TestLogRecord[], source: TestLogRecord['source']): Logger {
  const write = (level: TestLogRecord['level']) => (message: string, fields?: Record<string, unknown>) => {
    records.push({ level, message, fields, source });
  };
  const logger: Logger = {
    debug: write('debug'),
    info: write('info'),
    warn: write('warn'),
    error: write('error'),
    child: () => logger,
  };
  return logger;
}
