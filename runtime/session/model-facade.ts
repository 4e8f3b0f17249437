/**
 * What model code sees of a running session: the frozen `ModelSession` facade (emit, inputs,
 * broadcast, ticks, settings) its hooks, commands and run loop get, and the `StepHost` a step
 * model's driver runs against. Both are built over a narrow view of the session
 * (`FacadeSession`), so model code reaches nothing of the runtime beyond them.
 */

import { ArclightError } from '../../protocol/errors.ts';
import type { JsonValue } from '../../protocol/json-schema.ts';
import type { EnvelopeBody } from '../../protocol/messages.ts';
import type { Logger } from '../../server-kit/log.ts';
import type { ConnectionHandle, EmitOptions, InputAudio, InputVideo, ModelSession } from '../model/model-session.ts';
import { bindSessionSettings, type SessionSettings } from '../model/settings.ts';
import type { StepGate, StepHost } from '../model/step-driver.ts';
import { audioBatch, emitAfterEndError, unknownOutputTrackError, videoBatch, type EmitFrames } from '../media/emit-checks.ts';
import { systemClock } from './clock.ts';
import { FrameClock } from './frame-clock.ts';
import type { SessionTracks } from './session-tracks.ts';

/** The session as its facades see it. */
export interface FacadeSession {
  readonly id: string;
  readonly ended: boolean;
  readonly tracks: SessionTracks;
  readonly settings: SessionSettings;
  /** Handles of the connections ready now. */
  readyConnections(): readonly ConnectionHandle[];
  /** The model sent a message of `type` itself: one warning per undeclared type. */
  modelMessageSent(type: string): void;
  broadcast(body: EnvelopeBody): void;
}

/**
 * A facade for model code. `signal`: the session's, or (a run loop's facade) one that also
 * aborts when that run is restarted. `log`: the model's logger (its lines are `model` lines).
 */
export function createModelFacade(
  session: FacadeSession,
  fps: number,
  state: unknown,
  signal: AbortSignal,
  log: Logger,
): ModelSession<unknown> {
  const { outputVideo, outputAudio, inputVideo, inputAudio } = session.tracks;
  return bindSessionSettings(
    Object.freeze({
      id: session.id,
      signal,
      state,
      get settings(): Readonly<Record<string, unknown>> {
        return session.settings.current;
      },
      fps,
      log: { info: log.info, warn: log.warn, error: log.error },
      get connections(): readonly ConnectionHandle[] {
        return session.readyConnections();
      },
      emit: async (track: string, frames: EmitFrames, options?: EmitOptions): Promise<void> => {
        // Rejecting (rather than resolving at once) stops a loop paced only by emit() from
        // spinning; the runtime treats this rejection as a normal end.
        if (session.ended) throw emitAfterEndError(session.id);
        // A run loop replaced by a new version of the model stops here, like one whose session ended.
        if (signal.aborted)
          throw new ArclightError('session_ended', 'This run loop was restarted on a new version of the model; emit() is closed to it.');
        const video = outputVideo.get(track);
        if (video) return video.emit(videoBatch(track, frames), options?.dropPolicy, options?.metadata);
        const audio = outputAudio.get(track);
        if (audio) {
          for (const frame of audioBatch(track, frames)) await audio.emit(frame);
          return;
        }
        throw unknownOutputTrackError(track);
      },
      flush: async (track?: string): Promise<void> => {
        if (track !== undefined && !outputVideo.has(track)) {
          throw new TypeError(`flush("${track}"): the model declares no output video track "${track}"`);
        }
        for (const [name, video] of outputVideo) if (track === undefined || name === track) video.flush();
      },
      inputVideo: (track: string): InputVideo => {
        const input = inputVideo.get(track);
        if (!input) throw new TypeError(`inputVideo("${track}"): the model declares no input video track "${track}"`);
        return input;
      },
      inputAudio: (track: string): InputAudio => {
        const input = inputAudio.get(track);
        if (!input) throw new TypeError(`inputAudio("${track}"): the model declares no input audio track "${track}"`);
        return input;
      },
      broadcast: (type: string, data?: JsonValue): void => {
        session.modelMessageSent(type);
        session.broadcast({ type, ...(data === undefined ? {} : { data }) });
      },
      ticks: (rate?: number): AsyncIterable<number> => new FrameClock(rate ?? fps, signal),
      sleep: async (ms: number): Promise<void> => {
        await systemClock.sleep(ms, signal);
      },
    }),
    session.settings,
  );
}

/**
 * What the step driver sees of a session: its tracks, the system clock, whether anyone watches
 * (`watched`), and the gate its steps, commands and hooks take turns at.
 */
export function createStepHost(session: FacadeSession, fps: number, log: Logger, gate: StepGate, watched: () => boolean): StepHost {
  const { outputVideo, outputAudio } = session.tracks;
  return {
    clock: systemClock,
    fps,
    log,
    gate,
    watched,
    emitVideo: (track, frames, metadata, productionMs, timeline) => {
      if (session.ended) return Promise.reject(emitAfterEndError(session.id));
      return outputVideo.get(track)!.emit(frames, undefined, metadata, productionMs, timeline);
    },
    emitAudio: async (track, frames) => {
      if (session.ended) throw emitAfterEndError(session.id);
      const audio = outputAudio.get(track)!;
      for (const frame of frames) await audio.emit(frame);
    },
    // A step's audio that its video on an adaptive track keeps time with (step-driver.ts);
    // both tracks' clocks are performance.now().
    placeAudio: async (track, frames) => {
      if (session.ended) throw emitAfterEndError(session.id);
      return outputAudio.get(track)!.place(frames);
    },
    trackKind: (track) => session.tracks.outputKind(track),
  };
}
