/**
 * The model-author interface: a module default-exports `defineModel({...})`.
 *
 * @example
 * ```ts
 * import { defineModel, command } from 'arclight/runtime';
 * export default defineModel({
 *   name: 'pattern', fps: 30,
 *   tracks: [{ name: 'main_video', kind: 'video', direction: 'recvonly', width: 1280, height: 720 }],
 *   commands: {
 *     set_speed: command({
 *       description: 'Pixels per frame',
 *       params: { type: 'object', properties: { speed: { type: 'number', minimum: 0, maximum: 50 } }, required: ['speed'] } as const,
 *       handler: (params, { session }) => { session.state.speed = params.speed; }, // params: { speed: number }
 *     }),
 *   },
 *   createSessionState: () => ({ speed: 4 }),
 *   async run(session) { for await (const tick of session.ticks()) await session.emit('main_video', draw(tick)); },
 * });
 * ```
 */

import type { FromSchema, JSONSchema } from 'json-schema-to-ts';
import type { JsonValue } from '../../protocol/json-schema.ts';
import type { LatencyMode } from '../../protocol/messages.ts';
import type { AudioFrame, CudaVideoFrame, FrameMetadata, PixelFormat, VideoFrame } from '../media/frames.ts';
import type { UploadedFile } from '../uploads/upload-store.ts';
import type { ModelSession, ConnectionHandle, DropPolicy } from './model-session.ts';
import type { SettingCommandName, SettingsMap, SettingsOf, SettingValueOf } from './setting-types.ts';

export type { DropPolicy } from './model-session.ts';

export interface OutputVideoTrackSpec {
  readonly name: string;
  readonly kind: 'video';
  /** Model → client. */
  readonly direction: 'recvonly';
  readonly width: number;
  readonly height: number;
  /** Target bitrate; default scales with resolution (about 2.5 Mbit/s at 720p). */
  readonly bitrateKbps?: number;
  /** Frames that may wait between emit() and the pacer. Default 2 (low latency). */
  readonly queueFrames?: number;
  /** Default `block`. */
  readonly dropPolicy?: DropPolicy;
  /**
   * How this track's frames are paced. Absent: at most the model's `fps` (a fixed rate, frames
   * leave as they come). `'adaptive'`: at the rate the model produces them — estimated from its
   * steps (or emits) and their frame counts, at most the model's `fps` — evenly, with a small
   * bounded buffer: a model that returns chunks of frames (diffusion, world models) plays smoothly
   * instead of in bursts. `{ min, max }`: adaptive within that range (fps; `max` at most the
   * model's `fps`, the default; `min` default 1). See docs/model-authors.md "Step models".
   */
  readonly fps?: 'adaptive' | AdaptiveFpsRange;
}

/** The range an adaptive track's playout rate stays in, fps. */
export interface AdaptiveFpsRange {
  readonly min?: number;
  readonly max?: number;
}

export interface InputVideoTrackSpec {
  readonly name: string;
  readonly kind: 'video';
  /** Client → model. */
  readonly direction: 'sendonly';
  /** Pixel layout the model reads; default `i420`. */
  readonly format?: PixelFormat;
}

export interface OutputAudioTrackSpec {
  readonly name: string;
  readonly kind: 'audio';
  readonly direction: 'recvonly';
  /** 1 or 2; default 1. Audio runs at 48 kHz. */
  readonly channels?: 1 | 2;
}

export interface InputAudioTrackSpec {
  readonly name: string;
  readonly kind: 'audio';
  readonly direction: 'sendonly';
  readonly channels?: 1 | 2;
}

export type TrackSpec = OutputVideoTrackSpec | InputVideoTrackSpec | OutputAudioTrackSpec | InputAudioTrackSpec;

/** What a handler returns: a reply body (sent as one typed message) or nothing (a bodyless ack). */
export type CommandResult = JsonValue | void | undefined;

export interface CommandContext<State, Settings = Readonly<Record<string, unknown>>> {
  readonly session: ModelSession<State, Settings>;
  /** The connection that sent the command; replies go to it alone. */
  readonly connection: ConnectionHandle;
  /** The client's `request_id`, when it sent one. */
  readonly requestId: string | undefined;
}

/**
 * A command's reply as declared: its message type (default `<command>_result`) and the JSON
 * Schema of its data. Carried as a type parameter of `CommandSpec`, so `ModelTypesOf` can type
 * the reply a client receives.
 */
export interface ReplySpec {
  readonly type?: string;
  readonly schema?: SchemaLiteral;
}

/**
 * `Params` is what the handler receives (schema defaults filled in). `Reply` and `Schema` are the
 * declared reply's and the params schema's literal types, kept for `ModelTypesOf` (what a client
 * sends, where defaulted parameters stay optional); `Reply` is `undefined` when none is declared.
 */
export interface CommandSpec<
  State = unknown,
  Params = unknown,
  Reply extends ReplySpec | undefined = ReplySpec | undefined,
  Schema extends SchemaLiteral = JSONSchema,
> {
  readonly description?: string;
  /** JSON Schema of the command's data; validated (ajv) before the handler runs. Default: any object. */
  readonly params?: Schema;
  /** The reply's message type and schema. Type defaults to `<command>_result`. */
  readonly reply?: Reply;
  // Method syntax on purpose: parameters are then checked bivariantly, so a handler typed for
  // its own params (from its schema) fits a model's `commands` record.
  handler(params: Params, context: CommandContext<State>): CommandResult | Promise<CommandResult>;
}

/**
 * A schema literal as written by a model author. Deliberately looser than json-schema-to-ts's
 * `JSONSchema`: constraining a `const` type parameter by that deep type makes the compiler give
 * up ("excessively deep") on ordinary schemas.
 */
export type SchemaLiteral = { readonly [keyword: string]: unknown } | boolean;

/** The params type a schema literal describes (via json-schema-to-ts), or `unknown`. */
export type ParamsOf<P> = P extends JSONSchema ? FromSchema<P> : unknown;

/** A `command` whose handlers see `session.state` typed as `State`. */
export type CommandFactory<State, Settings = Readonly<Record<string, unknown>>> = <
  const P extends SchemaLiteral,
  const R extends ReplySpec | undefined = undefined,
>(spec: {
  readonly description?: string;
  readonly params: P;
  readonly reply?: R;
  handler(params: ParamsOf<P>, context: CommandContext<State, Settings>): CommandResult | Promise<CommandResult>;
}) => CommandSpec<State, ParamsOf<P>, R, P>;

/**
 * Binds `command` to a session-state type: `const command = commandFor<MyState>();`. A model with
 * `settings` may bind their type too, for `session.settings` in handlers:
 * `commandFor<MyState, SettingsOf<typeof settings>>()` (declare the settings `as const` first).
 */
export function commandFor<State, Settings = Readonly<Record<string, unknown>>>(): CommandFactory<State, Settings> {
  return (spec) => spec as never;
}

/**
 * Declares a command whose handler's `params` type is derived from its JSON Schema
 * (write the schema `as const`). Use `commandFor<State>()` for typed `session.state`.
 */
export const command: CommandFactory<Record<string, unknown>> = commandFor<Record<string, unknown>>();

// Method syntax (here and for `run`): parameters are checked bivariantly, so a model whose
// `session.settings` is typed from its declaration still fits where any model is taken.
export interface ModelHooks<State, Settings = Readonly<Record<string, unknown>>> {
  /** Once per session, before `run` starts. */
  session_started?(session: ModelSession<State, Settings>): void | Promise<void>;
  /** Once per session, after its connections are torn down (no per-client `disconnected` follows). */
  session_ended?(session: ModelSession<State, Settings>, reason: string): void | Promise<void>;
  /** Once per client connection, when it becomes ready. */
  connected?(session: ModelSession<State, Settings>, connection: ConnectionHandle): void | Promise<void>;
  /** Once per client connection, when it goes away while the session lives on. */
  disconnected?(session: ModelSession<State, Settings>, connection: ConnectionHandle): void | Promise<void>;
  /** A client finished uploading `file` (it may pass it to a command next). */
  file_uploaded?(session: ModelSession<State, Settings>, file: UploadedFile, connection: ConnectionHandle): void | Promise<void>;
}

/** What `load` is given. */
export interface ModelLoadContext {
  /** How far loading is: `fraction` from 0 to 1, and optionally what it is doing (`'weights'`). */
  progress(fraction: number, message?: string): void;
}

/**
 * A message type the model sends to clients (`session.broadcast(type, data)`,
 * `connection.send(type, data)`), declared so clients can rely on it: it is listed in
 * `Capabilities.messages` and `/schema`, counts in the schema hash, and is typed in clients
 * generated by `arclight types` (and `ModelTypesOf`). The runtime does not validate the data.
 */
export interface MessageSpec {
  readonly description?: string;
  /** JSON Schema of the message's `data`; absent: any JSON. */
  readonly schema?: SchemaLiteral;
}

/** A model's commands by name. */
export type CommandMap<State> = Readonly<Record<string, CommandSpec<State, never, ReplySpec | undefined, SchemaLiteral>>>;

/** A model's declared messages by type. */
export type MessageMap = Readonly<Record<string, MessageSpec>>;

/** Video a step hands over: one frame, or a chunk (played in order, paced as the track says). */
export type StepVideo = VideoFrame | CudaVideoFrame | readonly (VideoFrame | CudaVideoFrame)[];

/** Audio a step hands over: 48 kHz frames of the track's channel count, played in order. */
export type StepAudio = AudioFrame | readonly AudioFrame[];

/**
 * What one `generate()` step returns for the runtime to emit. Every field is optional; a step may
 * also return a `StepVideo` alone (shorthand for `{ video }`) or nothing.
 */
export interface StepOutput {
  /** Frames for the model's (first) output video track. */
  readonly video?: StepVideo;
  /** One metadata value for the whole chunk: it travels with its first frame. Per-frame values go in each frame's `metadata`. */
  readonly metadata?: FrameMetadata;
  /** Audio for the model's (first) output audio track. */
  readonly audio?: StepAudio;
  /** Frames for other output tracks, by name (video or audio, as the track is). */
  readonly tracks?: Readonly<Record<string, StepVideo | StepAudio>>;
}

/** What `generate()` may return. */
export type StepResult = StepOutput | StepVideo | undefined | void;

/** Returned by `beforeStep` to skip a step without calling `generate` (paused, nothing to do yet). */
export const SKIP_STEP: unique symbol = Symbol.for('arclight.skip_step');
export type SkipStep = typeof SKIP_STEP;

/** Where a step stands, for the step hooks. */
export interface StepInfo<Settings = Readonly<Record<string, unknown>>> {
  /**
   * The model's `settings` as they were when this step began (frozen): `set_<name>` commands that
   * arrive during the step apply, whole, from the next one.
   */
  readonly settings: Settings;
  /** Steps begun before this one (skipped steps not counted): 0 for the first. */
  readonly index: number;
  /** Steps failed in a row, this one included when it is `onStepError` that gets it. */
  readonly failures: number;
}

/** What `onStepError` decides: go on with the next step, or end the session (`model_error`). */
export type StepErrorAction = 'continue' | 'end';

/**
 * `Commands` and `Messages` are the literal types of the model's `commands` and `messages` as
 * `defineModel` infers them; `ModelTypesOf<typeof model>` reads them to type a client. They
 * default to the plain maps, which is what an explicit `defineModel<State>(...)` gets.
 */
export interface ModelDefinition<
  State = Record<string, unknown>,
  Commands extends CommandMap<State> = CommandMap<State>,
  Messages extends MessageMap = MessageMap,
  Input = unknown,
  Settings extends SettingsMap = SettingsMap,
> {
  /** The model's slug: `modelName` at connect time. */
  readonly name: string;
  readonly version?: string;
  readonly description?: string;
  /** Emission rate of output video, frames per second. */
  readonly fps: number;
  /**
   * How browsers buffer this model's video (see LatencyMode): `realtime` for interactive models
   * (each frame shown as soon as decoded), `smooth` (default) to ride out network jitter.
   * Overridable per runtime and switchable per session.
   */
  readonly latencyMode?: LatencyMode;
  readonly tracks: readonly TrackSpec[];
  readonly commands?: Commands;
  /**
   * Client-settable state, declared once: name → JSON Schema of the value with a `default` (and
   * optionally `description`, `moderated: true`). Each becomes a validated `set_<name>` command
   * (params `{ value }`, listed in capabilities, /schema and typed clients like any command), and
   * `session.settings` holds the current values, from the defaults; a step reads them in
   * `step.settings`, a snapshot taken as the step begins. A hand-written `set_<name>` is an error.
   */
  readonly settings?: Settings;
  /**
   * The message types the model sends on its own (besides command replies), with the schema of
   * their data. Optional. Once declared, a type sent but not declared still goes out, and is
   * logged as a warning once per type and session (typed clients do not know it).
   */
  readonly messages?: Messages;
  readonly hooks?: ModelHooks<State, SettingsOf<Settings>>;
  /**
   * Once per process, before any session: load weights, warm up. The runtime reports `loading` until
   * it resolves; `context.progress(fraction, message?)` reports how far it is (0–1) to the event
   * stream, `arclight dev`'s terminal and the playground. Under `arclight dev` it runs again for each
   * new version of the module.
   */
  readonly load?: (context: ModelLoadContext) => void | Promise<void>;
  /**
   * Once, when this version of the model stops serving: another version replaced it (a reload
   * under `arclight dev`; an open session kept runs on the new one), the runtime is closing, or it
   * never served (its `load()` failed, or the runtime closed while it loaded).
   * Release what `load()` took that would otherwise outlive it — worker processes, GPU memory, open
   * files. A throw is logged; the runtime goes on.
   */
  readonly unload?: () => void | Promise<void>;
  /** Fresh per-session state, available as `session.state` to `run`, hooks and handlers. */
  readonly createSessionState?: () => State;
  /** The session's loop: read inputs, `await session.emit(...)`. Ends when `session.signal` aborts. A model has `run` or `generate`, not both. */
  run?(session: ModelSession<State, SettingsOf<Settings>>): Promise<void>;
  /**
   * The step API, for models that produce frames in steps (diffusion, world models): instead of a
   * `run` loop, the runtime calls `generate` step after step while a client is connected, and emits
   * what it returns (a frame, a chunk, audio, metadata; see StepOutput). Commands and the
   * `connected`/`disconnected`/`file_uploaded` hooks run only between steps, never during one.
   * `input` is what `beforeStep` returned (undefined without it). A throw goes to `onStepError`.
   */
  generate?(
    input: Input,
    session: ModelSession<State, SettingsOf<Settings>>,
    step: StepInfo<SettingsOf<Settings>>,
  ): StepResult | Promise<StepResult>;
  /**
   * Before each step, between steps: reads what the step needs (the newest webcam frame, the
   * prompt) and returns it as `generate`'s input — or `SKIP_STEP` to skip the step without calling
   * the model (paused). After a skip the next step is tried once a command or hook has run, or one
   * frame interval (1/fps) later.
   */
  beforeStep?(
    session: ModelSession<State, SettingsOf<Settings>>,
    step: StepInfo<SettingsOf<Settings>>,
  ): Input | SkipStep | Promise<Input | SkipStep>;
  /**
   * A step's `beforeStep` or `generate` threw: `'continue'` goes on (the next step starts one frame
   * interval later), `'end'` ends the session with reason `model_error` for every client. Without
   * this hook (or when it throws), a failed step ends the session, as a `run` that throws does.
   */
  onStepError?(
    error: unknown,
    session: ModelSession<State, SettingsOf<Settings>>,
    step: StepInfo<SettingsOf<Settings>>,
  ): StepErrorAction | Promise<StepErrorAction>;
}

/** The `set_<name>` commands a `settings` declaration generates, typed for `ModelTypesOf`. */
export type SettingCommandsOf<State, Settings> = string extends keyof Settings
  ? unknown
  : {
      readonly [K in SettingCommandName<Settings>]: K extends `set_${infer F extends Extract<keyof Settings, string>}`
        ? CommandSpec<
            State,
            { value: SettingValueOf<Settings[F]> },
            undefined,
            {
              readonly type: 'object';
              readonly properties: { readonly value: Omit<Settings[F], 'moderated' | 'description' | 'default'> };
              readonly required: readonly ['value'];
              readonly additionalProperties: false;
            }
          >
        : never;
    };

export type { AudioFrame, VideoFrame, CudaVideoFrame, FrameMetadata };
