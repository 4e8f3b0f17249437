/**
 * `arclight/runtime` — write a model. What model authors import: the definition API, what a
 * session gives model code, frames, errors, settings, moderation marks, colour conversion and
 * Python models. Hosting a model (startRuntime and its options) is `arclight/runtime/operator`;
 * encoders, NVENC, CUDA and worker internals are `arclight/runtime/gpu`. This entry still
 * re-exports both (below) so code written against 0.1 keeps compiling; new code imports them from
 * their own entries.
 *
 * @example
 * ```ts
 * import { defineModel, command, CommandError } from 'arclight/runtime';
 * export default defineModel({ name: 'my-model', fps: 30, tracks: [...], commands: {...}, run: async (session) => {...} });
 * ```
 * Then `arclight serve my-model.ts` (or `startRuntime({ model })` from code).
 */
export { command, commandFor, SKIP_STEP } from './model/definition.ts';
export { defineModel } from './model/define-model.ts';
export type {
  ModelDefinition,
  CommandSpec,
  CommandFactory,
  CommandContext,
  CommandResult,
  ModelHooks,
  TrackSpec,
  OutputVideoTrackSpec,
  InputVideoTrackSpec,
  OutputAudioTrackSpec,
  InputAudioTrackSpec,
  DropPolicy,
  MessageSpec,
  ReplySpec,
  CommandMap,
  MessageMap,
  ParamsOf,
  SchemaLiteral,
  ModelLoadContext,
  AdaptiveFpsRange,
  StepOutput,
  StepResult,
  StepVideo,
  StepAudio,
  StepInfo,
  StepErrorAction,
  SkipStep,
} from './model/definition.ts';
export type { PlayoutStats } from './media/adaptive-pacer.ts';
export type { ModelTypesOf, ReplyTypeOf, ClientParamsOf, CommandTypesOf, MessageTypesOf } from './model/model-types-of.ts';
export type { ModelSession, ConnectionHandle, InputVideo, InputAudio, ModelLogger, EmitOptions } from './model/model-session.ts';
export type { SettingSpec, SettingsMap, SettingsOf, SettingValueOf, SettingCommandName } from './model/settings.ts';
export type { SettingCommandsOf } from './model/definition.ts';
export { CommandError, isCommandError } from './model/command-error.ts';
export { ModelDefinitionError } from './model/validate-definition.ts';
export type { VideoFrame, CudaVideoFrame, AudioFrame, PixelFormat, FrameMetadata } from './media/frames.ts';
export { videoFrameByteLength } from './media/frames.ts';
export type { LatencyMode } from '../protocol/messages.ts';
export type { UploadedFile } from './uploads/upload-store.ts';
/** A command parameter that is a file: `params: { type: 'object', properties: { image: FILE_PARAMETER_SCHEMA } }`. */
export { FILE_PARAMETER_SCHEMA } from '../protocol/uploads.ts';
/** Moderation: `moderated()` opts a free-text parameter in; a `Moderator` checks it (docs/model-authors.md "Moderation"). */
export { moderated } from './moderation/moderated-fields.ts';
export { MODERATED_KEYWORD } from '../protocol/moderation.ts';
/** Tensor → I420/NV12 for emit(): the native addon when built, JavaScript otherwise. */
export {
  convertToYuv,
  yuvByteLength,
  type YuvConvertOptions,
  type YuvSourceFormat,
  type YuvSourceLayout,
  type YuvTarget,
} from './media/colour-convert.ts';
/**
 * A model whose inference is Python: worker processes supervised by the runtime, frames through a
 * shared-memory ring, commands declared in Python and validated here (docs/python-worker.md).
 */
export {
  definePythonModel,
  type PythonModelDefinition,
  type PythonModelOptions,
  type PythonModelTimeouts,
  type PythonSessionState,
  type PythonStepInput,
} from './python/define-python-model.ts';
export { PythonWorkerError, isPythonWorkerError, type PythonWorkerErrorCode } from './python/python-worker-error.ts';

// 0.1 compatibility: the operator and GPU entries' names, as this entry exported them before they
// had their own. Import them from `arclight/runtime/operator` and `arclight/runtime/gpu`.
export * from './operator.ts';
export * from './gpu.ts';
