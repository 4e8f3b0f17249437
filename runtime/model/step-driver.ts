/**
 * The step API's driver: runs a model that defines `generate` (instead of a `run` loop), step
 * after step, for the runtime's session and for the test harness alike (each supplies a StepHost).
 *
 * Design
 * ------
 * Types (definition.ts): `generate(input, session, step) → StepResult`, where StepResult is a
 * StepOutput `{ video?, metadata?, audio?, tracks? }`, a frame or a chunk alone (→ `video`), or
 * nothing; `beforeStep(session, step) → input | SKIP_STEP`; `onStepError(error, session, step) →
 * 'continue' | 'end'`; `StepInfo { index, failures }`. Output tracks may declare `fps: 'adaptive'`
 * (media/adaptive-pacer.ts), which the driver feeds with each step's production time.
 *
 * One step, in order:
 *   1. Wait until a client is connected (`host.watched()`; nothing is generated for nobody).
 *   2. Take the session's StepGate (below), snapshot `session.settings` into `StepInfo.settings`
 *      (declared settings, model/settings.ts), then `beforeStep` → SKIP_STEP ends the step here;
 *      otherwise `generate(input)`; release the gate.
 *   3. Emit what it returned, outside the gate: every track's frames at once (video with the
 *      chunk's metadata and its production time: from when that track took the previous chunk,
 *      or the end of the last wait, to now), awaiting the tracks' backpressure. The next step starts when
 *      the tracks have taken this one's output — not when it has played.
 *   4. A step that was skipped, returned nothing, or failed and was continued is followed by a
 *      pause of one frame interval (1/fps) that ends early when a command or hook runs (a resume)
 *      or a client connects: a paused or idle model never spins.
 *
 * Commands and hooks between steps: the StepGate is a FIFO lock per session. The driver holds it
 * for `beforeStep` + `generate` (+ `onStepError`); every command handler and the `connected`,
 * `disconnected` and `file_uploaded` hooks take it too (after validation and moderation, which
 * need no lock). So a handler never sees state half-way through a step; a command that arrives
 * during a step runs after it, before the next one begins (FIFO: the driver queues behind it);
 * commands run one at a time, in arrival order. A handler that awaits something slow holds the
 * next step back meanwhile. `session_started` runs before the first step, `session_ended` after
 * the last (the driver has stopped).
 *
 * Errors: a throw from `beforeStep`, `generate` or emitting the output (a malformed frame, an
 * unknown track) is logged and handed to `onStepError` (under the gate): `'continue'` goes on,
 * `'end'` — or no hook, or a hook that throws — stops the driver with the error, and the host
 * ends the session with `model_error` (every client gets `session_ended`), as when `run` throws.
 * `session_ended` rejections (the session ended mid-step) are a normal end.
 */

import type { Logger } from '../../server-kit/log.ts';
import type { Clock } from '../session/clock.ts';
import type { AudioFrame, CudaVideoFrame, FrameMetadata, VideoFrame } from '../media/frames.ts';
import { adaptiveRangeOf } from '../media/adaptive-pacer.ts';
import { callAuthorCode, isSessionEnded } from './author-code.ts';
import { SKIP_STEP, type ModelDefinition, type StepErrorAction, type StepInfo, type StepOutput, type StepResult } from './definition.ts';
import type { ModelSession } from './model-session.ts';

/**
 * A session's lock between steps and author code (commands, hooks): FIFO, one holder at a time.
 * Also the driver's doorbell: `nudge()` (something changed: a client connected, a command ran)
 * resolves `changed()`.
 */
export class StepGate {
  #tail: Promise<unknown> = Promise.resolve();
  #waiters: Array<() => void> = [];

  /** Runs `fn` when the gate is free (after everything queued before it), holding it until `fn` settles. */
  hold<T>(fn: () => T | Promise<T>): Promise<T> {
    const result = this.#tail.then(fn);
    this.#tail = result.catch(() => undefined);
    return result;
  }

  /** A command or hook: runs between steps, then wakes a driver that is pausing. */
  async between<T>(fn: () => T | Promise<T>): Promise<T> {
    try {
      return await this.hold(fn);
    } finally {
      this.nudge();
    }
  }

  /** Wakes whoever waits in `changed()`. */
  nudge(): void {
    for (const wake of this.#waiters.splice(0)) wake();
  }

  /** Resolves at the next `nudge()`, or when `signal` aborts (the wait is then forgotten). */
  changed(signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const wake = (): void => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      };
      const onAbort = (): void => {
        this.#waiters = this.#waiters.filter((w) => w !== wake);
        resolve();
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.#waiters.push(wake);
    });
  }
}

/** What the driver needs from whoever hosts the session: the runtime's Session or the test harness. */
export interface StepHost {
  readonly clock: Clock;
  /** The session's frame rate: a skipped or empty step is followed by a pause of 1/fps. */
  readonly fps: number;
  /** Where author-code failures are logged (the session's log). */
  readonly log: Logger;
  readonly gate: StepGate;
  /** Whether a client is connected: steps run only then. */
  watched(): boolean;
  /**
   * Emits a step's frames on an output video track, with the time the model took to produce them
   * (ms) and, when they keep time with the step's audio, where they fall (`placeAudio`'s answer).
   */
  emitVideo(
    track: string,
    frames: readonly (VideoFrame | CudaVideoFrame)[],
    metadata: FrameMetadata | undefined,
    productionMs: number,
    timeline?: StepTimeline,
  ): Promise<void>;
  emitAudio(track: string, frames: readonly AudioFrame[]): Promise<void>;
  /**
   * Queues a step's audio as one piece and says when it plays (its first sample, ms on the
   * host's media clock) and for how long — so the step's video on an adaptive track can be timed
   * to it. Optional: a host without it (the test harness) emits the audio as `emitAudio` does and
   * the video is paced as if there were none.
   */
  placeAudio?(track: string, frames: readonly AudioFrame[]): Promise<{ readonly startMs: number; readonly durationMs: number }>;
  /** Whether `track` is an output video track (else audio, or none). */
  trackKind(track: string): 'video' | 'audio' | undefined;
}

/** Where a step's video frames fall: frame i at `startMs + i × frameMs` (the host's media clock). */
export interface StepTimeline {
  readonly startMs: number;
  readonly frameMs: number;
}

/** How the driver stopped: the session ended or the run was aborted (`ok`), or a step failed for good. */
export type StepDriverOutcome = { readonly ok: true } | { readonly ok: false; readonly error: unknown };

type StepOutcome =
  | { readonly kind: 'skip' }
  | { readonly kind: 'output'; readonly result: StepResult }
  | { readonly kind: 'failed'; readonly error: unknown };

/**
 * Runs `model`'s steps on `session` until `signal` aborts or a step fails for good. Never throws.
 */
export async function driveSteps(
  model: ModelDefinition<unknown>,
  session: ModelSession<unknown>,
  host: StepHost,
  signal: AbortSignal,
): Promise<StepDriverOutcome> {
  const generate = model.generate;
  if (!generate) throw new TypeError('driveSteps: the model has no generate');
  const { clock, gate, log } = host;
  const intervalMs = 1000 / host.fps;
  const videoTrack = model.tracks.find((t) => t.kind === 'video' && t.direction === 'recvonly')?.name;
  const audioTrack = model.tracks.find((t) => t.kind === 'audio' && t.direction === 'recvonly')?.name;
  /**
   * A step's `video` and `audio` play together when the video track is adaptive: its frames are
   * timed to their audio (video follows audio) instead of to the pacer's rate, which would stretch
   * them to the step time while the audio plays at its sample rate. Fixed-rate tracks stamp
   * frames by emit time, as their audio is, and need nothing more.
   */
  const videoSpec = model.tracks.find((t) => t.name === videoTrack);
  const videoFollowsAudio =
    host.placeAudio !== undefined &&
    audioTrack !== undefined &&
    videoSpec?.kind === 'video' &&
    videoSpec.direction === 'recvonly' &&
    adaptiveRangeOf(videoSpec, host.fps) !== undefined;
  let index = 0;
  let failures = 0;
  /** When the driver last stopped waiting (start, a viewer, a pause): production time counts from then. */
  let base = clock.now();
  /**
   * When each video track last took a step's frames. A track's production time for a chunk runs
   * from then (or `base`, if later) to the hand-over: the step and everything between — other
   * tracks' backpressure included, which is the model's real throughput.
   */
  const tookAt = new Map<string, number>();

  /** Waits `ms` on the clock (forever: Infinity), or less when the gate is nudged or the run aborts. */
  const pause = async (ms: number): Promise<void> => {
    const stop = new AbortController();
    const both = AbortSignal.any([signal, stop.signal]);
    const waits = [gate.changed(both)];
    if (ms !== Infinity) waits.push(clock.sleep(ms, both).then(() => undefined));
    await Promise.race(waits);
    stop.abort();
    base = clock.now();
  };

  /** A failed step: `onStepError` decides (under the gate); true to go on. */
  const recover = async (error: unknown, stepIndex: number): Promise<boolean> => {
    failures++;
    const hook = model.onStepError;
    if (!hook) return false;
    const info: StepInfo = { index: stepIndex, failures, settings: session.settings };
    const decision = await gate.hold(() =>
      callAuthorCode<StepErrorAction>(log, 'onStepError', () => hook.call(model, error, session, info)),
    );
    if (!decision.ok) return false;
    if (decision.value !== 'continue' && decision.value !== 'end') {
      log.error('model onStepError returned neither "continue" nor "end"; the session ends', { returned: String(decision.value) });
      return false;
    }
    return decision.value === 'continue';
  };

  while (!signal.aborted) {
    if (!host.watched()) {
      await pause(Infinity);
      continue;
    }
    const stepIndex = index;
    const outcome = await gate.hold(async (): Promise<StepOutcome> => {
      if (signal.aborted) return { kind: 'skip' };
      // The settings snapshot is taken under the gate: commands queued before this step are in it.
      const info: StepInfo = { index: stepIndex, failures, settings: session.settings };
      let input: unknown;
      if (model.beforeStep) {
        const before = await callAuthorCode(
          log,
          'beforeStep',
          () => model.beforeStep!.call(model, session, info),
          undefined,
          isSessionEnded,
        );
        if (!before.ok) return { kind: 'failed', error: before.error };
        if (before.value === SKIP_STEP) return { kind: 'skip' };
        input = before.value;
      }
      const generated = await callAuthorCode(
        log,
        'generate',
        () => generate.call(model, input as never, session, info),
        undefined,
        isSessionEnded,
      );
      return generated.ok ? { kind: 'output', result: generated.value } : { kind: 'failed', error: generated.error };
    });
    if (signal.aborted) break;
    if (outcome.kind === 'skip') {
      await pause(intervalMs);
      continue;
    }
    index++;
    let failed = outcome.kind === 'failed';
    let error: unknown = outcome.kind === 'failed' ? outcome.error : undefined;
    let emitted = 0;
    if (outcome.kind === 'output') {
      try {
        emitted = await emitStep(outcome.result);
        failures = 0;
      } catch (caught) {
        if (!isSessionEnded(caught)) log.error('model generate returned output that could not be emitted', { error: caught });
        failed = true;
        error = caught;
      }
    }
    if (signal.aborted) break;
    if (failed) {
      if (isSessionEnded(error)) break;
      if (!(await recover(error, stepIndex))) return { ok: false, error };
      await pause(intervalMs);
    } else if (emitted === 0) {
      await pause(intervalMs);
    }
  }
  return { ok: true };

  /** Emits one step's output on its tracks at once; resolves with how many frames it handed over. */
  async function emitStep(result: StepResult): Promise<number> {
    const output = asStepOutput(result);
    if (!output) return 0;
    // Checked first, then started together: a bad entry fails the step before anything is emitted.
    const emits: Array<() => Promise<void>> = [];
    let count = 0;
    /** The step's audio, when its video is timed to it: placed first, then the video emitted on its timeline. */
    let placement: { readonly promise: Promise<{ readonly startMs: number; readonly durationMs: number }> } | undefined;
    const emitOn = (track: string | undefined, what: 'video' | 'audio', frames: unknown, metadata?: FrameMetadata): void => {
      if (frames === undefined) return;
      if (track === undefined) throw new TypeError(`generate returned ${what}, but the model declares no output ${what} track`);
      const batch = (Array.isArray(frames) ? frames : [frames]) as unknown[];
      if (batch.length === 0) return;
      count += batch.length;
      const kind = host.trackKind(track);
      if (kind === undefined) throw new TypeError(`generate returned frames for "${track}", which is not an output track of the model`);
      if (kind === 'video') {
        if (batch.some((f) => typeof f !== 'object' || f === null || !('width' in f)))
          throw new TypeError(`generate: "${track}" is a video track; got something else`);
        emits.push(async () => {
          const productionMs = clock.now() - Math.max(tookAt.get(track) ?? -Infinity, base);
          const timed = track === videoTrack ? placement : undefined;
          let timeline: StepTimeline | undefined;
          if (timed) {
            const { startMs, durationMs } = await timed.promise;
            if (durationMs > 0) timeline = { startMs, frameMs: durationMs / batch.length };
          }
          await host.emitVideo(track, batch as (VideoFrame | CudaVideoFrame)[], metadata, productionMs, timeline);
          tookAt.set(track, clock.now());
        });
      } else {
        if (batch.some((f) => typeof f !== 'object' || f === null || !('samples' in f)))
          throw new TypeError(`generate: "${track}" is an audio track; got something else`);
        const place = host.placeAudio;
        if (track === audioTrack && placement === undefined && videoFollowsAudio && place && hasFrames(output.video)) {
          // Started with the other emits (after every check); the video's emit, started after
          // this one, awaits the placement.
          let placing: Promise<{ readonly startMs: number; readonly durationMs: number }> | undefined;
          placement = {
            get promise() {
              return placing!;
            },
          };
          emits.push(async () => {
            placing = place.call(host, track, batch as AudioFrame[]);
            await placing;
          });
        } else {
          emits.push(() => host.emitAudio(track, batch as AudioFrame[]));
        }
      }
    };
    // Audio first: the video of the step may wait for where its audio falls.
    emitOn(audioTrack, 'audio', output.audio);
    emitOn(videoTrack, 'video', output.video, output.metadata);
    for (const [track, frames] of Object.entries(output.tracks ?? {})) emitOn(track, host.trackKind(track) ?? 'video', frames);
    const settled = await Promise.allSettled(emits.map((emit) => emit()));
    const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed) throw failed.reason;
    return count;
  }
}

/** Whether a step's `video` has at least one frame. */
function hasFrames(video: unknown): boolean {
  return video !== undefined && video !== null && (!Array.isArray(video) || video.length > 0);
}

/** A StepResult as a StepOutput: a frame or a chunk alone is `{ video }`; nothing is undefined. */
function asStepOutput(result: StepResult): StepOutput | undefined {
  if (result === undefined || result === null) return undefined;
  if (typeof result !== 'object')
    throw new TypeError(`generate must return a frame, a chunk of frames, a StepOutput or nothing; got ${typeof result}`);
  if (Array.isArray(result)) return { video: result };
  const object = result as Record<string, unknown>;
  if ('data' in object || 'cuda' in object || 'width' in object) return { video: result as VideoFrame };
  return result as StepOutput;
}
