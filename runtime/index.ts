/**
 * `arclight/runtime` — write a model, host it.
 *
 * @example
 * ```ts
 * import { defineModel, command, CommandError } from 'arclight/runtime';
 * export default defineModel({ name: 'my-model', fps: 30, tracks: [...], commands: {...}, run: async (session) => {...} });
 * ```
 * Then `arclight serve my-model.ts` (or `startRuntime({ model })` from code).
 */
export { defineModel, command, commandFor, SKIP_STEP } from './model/definition.ts';
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
export { loadModelModule, ModelModuleError } from './model/load-model-module.ts';
export type { VideoFrame, CudaVideoFrame, AudioFrame, PixelFormat, FrameMetadata } from './media/frames.ts';
export { videoFrameByteLength } from './media/frames.ts';
export { startRuntime, capabilitiesOf } from './server.ts';
export type { Runtime, RuntimeIceOptions, RuntimeOptions, RuntimeState, ModelReloadOutcome, RecordingOptions } from './server.ts';
export type { SessionLogSettings } from './logs/session-log-registry.ts';
export type { RecordingStorage } from './recording/recording-storage.ts';
export type { VideoCodecPreference } from './webrtc/peer-factory.ts';
export type { Logger } from '../server-kit/log.ts';
export type { ModelLoadErrorInfo } from '../protocol/session-logs.ts';
export type { IcePolicyOptions } from './webrtc/ice-policy.ts';
export type { TurnOptions } from './webrtc/turn-credentials.ts';
export type { HostedOptions } from './hosted/coordinator-link.ts';
export type { PlaygroundHostedOptions } from './http/playground-routes.ts';
export type { LatencyMode } from '../protocol/messages.ts';
export type { UploadedFile, UploadLimits } from './uploads/upload-store.ts';
/** A command parameter that is a file: `params: { type: 'object', properties: { image: FILE_PARAMETER_SCHEMA } }`. */
export { FILE_PARAMETER_SCHEMA } from '../protocol/uploads.ts';
/** Moderation: `moderated()` opts a free-text parameter in; a `Moderator` checks it (docs/model-authors.md "Moderation"). */
export { moderated } from './moderation/moderated-fields.ts';
export { MODERATED_KEYWORD } from '../protocol/moderation.ts';
export type { Moderator, ModerationRequest, ModerationVerdict, ModerationOptions } from './moderation/moderator.ts';
export { HttpModerator, type HttpModeratorOptions } from './moderation/http-moderator.ts';
export { WordListModerator } from './moderation/word-list-moderator.ts';
/** Tensor → I420/NV12 for emit(): the native addon when built, JavaScript otherwise. */
export { convertToYuv, yuvByteLength, type YuvConvertOptions, type YuvSourceFormat, type YuvSourceLayout, type YuvTarget } from './media/colour-convert.ts';
export { nativeAddonStatus, type NativeAddonStatus } from './native/native-addon.ts';
/**
 * Video encoding outside a session (benchmarks, tools, a model that encodes its own frames): the
 * process-wide backend choice, and NVENC directly — including `encodeCuda` for frames already in
 * GPU memory (native/README.md).
 */
export { VideoEncoder, type VideoEncoderOptions, type EncodedVideoFrame, type VideoCodec, type VideoEncoderStats, type H264Profile, type CheckedEncoderOptions } from './media/video-encoder.ts';
export { NvencVideoEncoder } from './media/nvenc-video-encoder.ts';
export { listEncoderBackends, describeEncoderBackendSelection, type EncoderBackend, type EncoderBackendListing, type EncoderImplementation, type EncoderCandidateOutcome } from './media/encoder-backends.ts';
export type { CudaFrame, CudaBuffer, CudaFrameShape, CudaFrameDownload, CudaDeviceInfo, NvencProbeResult, NvencEncoderOptions, NvencCodec, NvencInputFormat, NativeAddon, NvencEncoder, NvencPicture } from './native/native-addon.ts';
/** The native addon itself (undefined when not built): nvencProbe, CudaBuffer, … (native/README.md). */
export { nativeAddon } from './native/native-addon.ts';
/**
 * A model whose inference is Python: worker processes supervised by the runtime, frames through a
 * shared-memory ring, commands declared in Python and validated here (docs/python-worker.md).
 */
export { definePythonModel, type PythonModelDefinition, type PythonModelOptions, type PythonModelTimeouts, type PythonSessionState, type PythonStepInput } from './python/define-python-model.ts';
export type { PythonWorkerGroup, PythonWorkerGroupOptions } from './python/worker-group.ts';
export type { ModelDescription as PythonModelDescription, DeclaredCommand as PythonDeclaredCommand, SlotFrame as PythonSlotFrame, SuccessfulReply as PythonWorkerReply, WorkerPixelFormat as PythonPixelFormat, WorkerMessage as PythonWorkerMessage, WorkerReply as PythonWorkerAnyReply, WorkerFailure as PythonWorkerFailure, WorkerRequest as PythonWorkerRequest } from './python/worker-protocol.ts';
export type { FrameRing } from './python/frame-ring.ts';
export { PythonWorkerError, isPythonWorkerError, type PythonWorkerErrorCode } from './python/python-worker-error.ts';
