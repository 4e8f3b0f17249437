/**
 * `definePythonModel`: a model whose inference is a Python module, served by this runtime's media
 * engine. It returns an ordinary step-API definition (`generate`), so everything the runtime does
 * for a TypeScript model — pacing, backpressure, recording, commands validated with ajv before they
 * run, capabilities and /schema — it does here; only the step itself and the command handlers go
 * to Python, over a worker-group (worker-group.ts) that the runtime supervises.
 *
 * Commands are declared once, in Python (`@model.command(name, params=<JSON Schema>)`): this
 * function imports the module in a short-lived `python -m arclight_worker describe` (no
 * `@model.load`) to read them, so they are in the definition from the start.
 *
 * @example
 * ```ts
 * import { definePythonModel } from 'arclight/runtime';
 * export default definePythonModel({
 *   name: 'python-tint',
 *   module: new URL('./model.py', import.meta.url),
 *   fps: 30,
 *   tracks: [
 *     { name: 'webcam', kind: 'video', direction: 'sendonly', format: 'rgba' },
 *     { name: 'main_video', kind: 'video', direction: 'recvonly', width: 640, height: 480 },
 *   ],
 * });
 * ```
 */

import { fileURLToPath } from 'node:url';
import { resolve } from 'node:path';
import type { JsonValue } from '../../protocol/json-schema.ts';
import type { LatencyMode } from '../../protocol/messages.ts';
import { createLogger, type Logger } from '../../server-kit/log.ts';
import { convertToYuv, yuvByteLength } from '../media/colour-convert.ts';
import type { FrameMetadata, VideoFrame } from '../media/frames.ts';
import type {
  CommandMap,
  CommandSpec,
  MessageMap,
  ModelDefinition,
  OutputVideoTrackSpec,
  StepErrorAction,
  StepInfo,
  StepOutput,
  TrackSpec,
} from '../model/definition.ts';
import type { ModelSession } from '../model/model-session.ts';
import { checkPython, describePythonModule, pythonExecutable } from './python-environment.ts';
import { isPythonWorkerError, PythonWorkerError } from './python-worker-error.ts';
import { PythonWorkerGroup } from './worker-group.ts';
import type { ModelDescription, SlotFrame, WorkerPixelFormat } from './worker-protocol.ts';

export interface PythonModelTimeouts {
  /** One `generate` call; past it the workers are killed and the session ends. Default 30 s. */
  readonly stepMs?: number;
  /** One command handler. Default 10 s. */
  readonly commandMs?: number;
  /** No message at all (the worker's heartbeat thread writes every second) for this long: hung. Default 10 s. */
  readonly heartbeatMs?: number;
  /** Import + `@model.load`. Default 10 minutes. */
  readonly startMs?: number;
}

export interface PythonModelOptions<Messages extends MessageMap = MessageMap> {
  readonly name: string;
  /** The Python model file: `new URL('./model.py', import.meta.url)`, or a path (relative to the working directory). */
  readonly module: string | URL;
  readonly version?: string;
  readonly description?: string;
  readonly fps: number;
  readonly latencyMode?: LatencyMode;
  /** As in `defineModel`. Frames go to the first output video track; input video tracks reach `step.input(name)`. */
  readonly tracks: readonly TrackSpec[];
  readonly messages?: Messages;
  /**
   * Worker processes, one per rank (GPUs of one node): each gets ARCLIGHT_RANK / ARCLIGHT_WORLD_SIZE
   * (and RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT for torch.distributed). Default 1.
   */
  readonly ranks?: number;
  /** With several ranks: `leader` (rank 0's frames; default) or `slices` (each rank writes its rows of the same frame). */
  readonly output?: 'leader' | 'slices';
  /** Most frames one step may return (a chunk). Default 1. */
  readonly maxChunk?: number;
  /** Largest input frame accepted (its slot's size). Default 1920×1080. */
  readonly maxInput?: { readonly width: number; readonly height: number };
  /** The Python executable; default `$ARCLIGHT_PYTHON`, else the first of `python3` on PATH and `/usr/bin/python3` that imports numpy. */
  readonly python?: string;
  /** Extra environment for the workers. */
  readonly env?: Readonly<Record<string, string>>;
  readonly timeouts?: PythonModelTimeouts;
  /** Where the workers' output and failures are logged; default the runtime's JSON log on stderr. */
  readonly logger?: Logger;
  /**
   * A step's Python raised (`python_error`): go on or end the session. Default: end. A dead or
   * hung worker always ends the session.
   */
  readonly onStepError?: (
    error: unknown,
    session: ModelSession<PythonSessionState>,
    step: StepInfo,
  ) => StepErrorAction | Promise<StepErrorAction>;
}

/** The TypeScript side's per-session state (the model's own state lives in Python's `session.state`). */
export interface PythonSessionState {
  readonly python: true;
}

/** What a Python model's `beforeStep` hands its `generate`: the newest frame of each input video track. */
export interface PythonStepInput {
  readonly inputs: ReadonlyMap<string, VideoFrame>;
}

/** A definition from `definePythonModel`: a step model, plus its workers for tests and tools. */
export type PythonModelDefinition<Messages extends MessageMap = MessageMap> = ModelDefinition<
  PythonSessionState,
  CommandMap<PythonSessionState>,
  Messages,
  PythonStepInput
> & {
  /** The worker processes and their ring (start, pids, close). */
  readonly python: PythonWorkerGroup;
  /** What the Python module declared. */
  readonly pythonDescription: ModelDescription;
};

/** Fatal for the session whatever onStepError says: the workers that served it are gone. */
const FATAL = new Set([
  'python_worker_crashed',
  'python_worker_timeout',
  'python_unavailable',
  'python_load_failed',
  'python_protocol_error',
]);

export function definePythonModel<const Messages extends MessageMap = MessageMap>(
  options: PythonModelOptions<Messages>,
): PythonModelDefinition<Messages> {
  const modulePath = options.module instanceof URL ? fileURLToPath(options.module) : resolve(options.module);
  const python = pythonExecutable(options.python);
  const description = describePythonModule(python, modulePath);
  if (!description.has_generate) throw new PythonWorkerError('python_load_failed', `${modulePath} declares no @model.generate`);
  const output = options.tracks.find((t): t is OutputVideoTrackSpec => t.kind === 'video' && t.direction === 'recvonly');
  if (!output) throw new TypeError('definePythonModel: the model needs an output video track (direction "recvonly")');
  const inputTracks = options.tracks.filter((t) => t.kind === 'video' && t.direction === 'sendonly').map((t) => t.name);
  const maxChunk = options.maxChunk ?? 1;
  const maxInput = options.maxInput ?? { width: 1920, height: 1080 };
  const timeouts = { stepMs: 30_000, commandMs: 10_000, heartbeatMs: 10_000, ...options.timeouts };
  const slices = (options.ranks ?? 1) > 1 && options.output === 'slices';
  const log: Logger = (options.logger ?? createLogger()).child({ component: 'python-worker', model: options.name });
  const sessions = new Map<string, ModelSession<PythonSessionState>>();
  const started = new Map<string, Promise<void>>();
  const buffers = new Map<string, Uint8Array[]>();
  /** What each input slot holds (the frame object last written), so an unchanged webcam frame is not written again. */
  let slotContents: { ring: unknown; frames: (VideoFrame | undefined)[] } = { ring: undefined, frames: [] };

  const group = new PythonWorkerGroup({
    python,
    modulePath,
    ranks: options.ranks,
    slotBytes: Math.max(output.width * output.height * 4, maxInput.width * maxInput.height * 4),
    inputSlots: Math.max(1, inputTracks.length),
    outputSlots: maxChunk,
    heartbeatTimeoutMs: timeouts.heartbeatMs,
    startTimeoutMs: timeouts.startMs,
    env: options.env,
    onSessionMessage: (message) => {
      const session = sessions.get(message.session);
      if (!session) return;
      if (message.type === 'log') session.log[message.level](message.message, message.fields);
      else session.broadcast(message.message_type, message.data);
    },
    onOutput: (line, stream, rank) => log[stream === 'stderr' ? 'warn' : 'info']('python output', { rank, stream, line }),
    onFailure: (error, failed) => {
      log.error('python worker failed; starting a fresh one', {
        code: error.code,
        error: error.message,
        detail: error.detail,
        sessions: failed,
      });
      for (const id of failed)
        sessions.get(id)?.log.error(`python worker failed (${error.code}): ${error.message}`, { code: error.code, detail: error.detail });
    },
  });

  const startSession = (session: ModelSession<PythonSessionState>): Promise<void> => {
    let pending = started.get(session.id);
    if (!pending) {
      sessions.set(session.id, session);
      pending = group.startSession(session.id);
      pending.catch(() => undefined);
      started.set(session.id, pending);
    }
    return pending;
  };

  const commands: Record<
    string,
    CommandSpec<PythonSessionState, never, { type?: string } | undefined, { readonly [k: string]: unknown }>
  > = {};
  for (const [name, declared] of Object.entries(description.commands)) {
    commands[name] = {
      ...(declared.description ? { description: declared.description } : {}),
      params: declared.params ?? { type: 'object' },
      ...(declared.reply_type ? { reply: { type: declared.reply_type } } : {}),
      async handler(params: never, { session }) {
        await startSession(session);
        try {
          const reply = await group.command(session.id, name, params as JsonValue, timeouts.commandMs);
          return reply.result;
        } catch (error) {
          // The model's own bug is `internal_error` to the client, as a TypeScript handler's throw
          // is; its traceback goes to the session's log. Worker failures keep their codes.
          if (isPythonWorkerError(error) && error.code === 'python_error') {
            session.log.error(`python command ${name} raised`, { error: error.message, traceback: error.detail });
            throw new Error(error.message);
          }
          throw error;
        }
      },
    };
  }

  /** Sessions told that their input is larger than maxInput (once each). */
  const warnedOversize = new Set<string>();
  const writeInputs =
    (input: PythonStepInput, session: ModelSession<PythonSessionState>) =>
    (
      ring: { write(slot: number, data: Uint8Array): void; slotBytes: number },
      inputSlots: readonly number[],
    ): Record<string, SlotFrame> => {
      if (slotContents.ring !== ring) slotContents = { ring, frames: [] };
      const described: Record<string, SlotFrame> = {};
      inputTracks.forEach((track, i) => {
        const frame = input.inputs.get(track);
        const slot = inputSlots[i];
        if (!frame || slot === undefined) return;
        const format: WorkerPixelFormat = frame.format === 'rgba' ? 'rgba' : 'i420';
        const length = format === 'rgba' ? frame.width * frame.height * 4 : yuvByteLength(frame.width, frame.height);
        if (length > ring.slotBytes) {
          // Not worth ending the session over: the model sees no frame on this track, and the log says why.
          if (!warnedOversize.has(session.id)) {
            warnedOversize.add(session.id);
            session.log.warn(
              `input frames on "${track}" (${frame.width}x${frame.height}) are larger than the Python model's maxInput (${maxInput.width}x${maxInput.height}); they are not passed to Python`,
            );
          }
          return;
        }
        if (slotContents.frames[slot] !== frame) {
          ring.write(slot, frame.data.subarray(0, length));
          slotContents.frames[slot] = frame;
        }
        described[track] = { slot, width: frame.width, height: frame.height, format };
      });
      return described;
    };

  const definition = {
    name: options.name,
    ...(options.version ? { version: options.version } : {}),
    ...(options.description ? { description: options.description } : {}),
    fps: options.fps,
    ...(options.latencyMode ? { latencyMode: options.latencyMode } : {}),
    tracks: options.tracks,
    commands,
    ...(options.messages ? { messages: options.messages } : {}),
    python: group,
    pythonDescription: description,
    async load({ progress }) {
      checkPython(python);
      const ready = await group.start(progress);
      if (JSON.stringify(ready.commands) !== JSON.stringify(description.commands)) {
        log.warn(
          'the Python module declares other commands than when it was imported; the runtime serves the ones it read at import (restart it to pick up the change)',
          { module: modulePath },
        );
      }
    },
    // A reload (arclight dev) or the runtime's close: this version's workers go with it.
    async unload() {
      await group.close();
    },
    createSessionState: (): PythonSessionState => ({ python: true }),
    hooks: {
      session_started: async (session) => {
        await startSession(session);
      },
      session_ended: async (session, reason) => {
        sessions.delete(session.id);
        started.delete(session.id);
        warnedOversize.delete(session.id);
        buffers.delete(session.id);
        await group.endSession(session.id, reason);
      },
    },
    beforeStep(session) {
      const inputs = new Map<string, VideoFrame>();
      for (const track of inputTracks) {
        const frame = session.inputVideo(track).latest();
        if (frame) inputs.set(track, frame);
      }
      return { inputs };
    },
    async generate(input, session, step): Promise<StepOutput> {
      await startSession(session);
      const pool = buffers.get(session.id) ?? [];
      buffers.set(session.id, pool);
      return group.step(
        session.id,
        step.index,
        { width: output.width, height: output.height },
        slices,
        maxChunk,
        writeInputs(input, session),
        (ring, reply) => {
          const video = (reply.frames ?? []).map((frame, i) => readFrame(ring, frame, pool, i));
          return reply.metadata === undefined ? { video } : { video, metadata: reply.metadata as FrameMetadata };
        },
        timeouts.stepMs,
      );
    },
    async onStepError(error, session, step) {
      if (isPythonWorkerError(error) && FATAL.has(error.code)) return 'end';
      if (isPythonWorkerError(error) && error.detail) session.log.error(`python step ${step.index} raised`, { traceback: error.detail });
      return options.onStepError ? options.onStepError(error, session, step) : 'end';
    },
  } satisfies ModelDefinition<PythonSessionState, CommandMap<PythonSessionState>, Messages, PythonStepInput> & {
    python: PythonWorkerGroup;
    pythonDescription: ModelDescription;
  };
  return definition as PythonModelDefinition<Messages>;
}

/**
 * Copies one output frame out of its slot (one pread into a buffer the session reuses: the step
 * driver emits — and emit copies — before the next step) and makes it a VideoFrame: RGBA and I420
 * as they are, RGB converted to I420 (the native addon when built).
 */
function readFrame(
  ring: { read(slot: number, length: number, into: Uint8Array): Uint8Array },
  frame: SlotFrame,
  pool: Uint8Array[],
  index: number,
): VideoFrame {
  const { width, height, format } = frame;
  const length = format === 'rgb' ? width * height * 3 : format === 'rgba' ? width * height * 4 : yuvByteLength(width, height);
  const need = format === 'rgb' ? length + yuvByteLength(width, height) : length;
  let buffer = pool[index];
  if (!buffer || buffer.byteLength < need) {
    buffer = new Uint8Array(need);
    pool[index] = buffer;
  }
  const bytes = ring.read(frame.slot, length, buffer);
  if (format === 'rgb') {
    const data = convertToYuv(bytes, { width, height, format: 'rgb', layout: 'hwc', into: buffer.subarray(length, need) });
    return { width, height, format: 'i420', data };
  }
  return { width, height, format, data: bytes };
}
