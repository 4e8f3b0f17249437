/**
 * `arclight/runtime/operator` — host a model: start a runtime from code and configure it (ICE and
 * TURN, hosted mode behind a coordinator, the playground, uploads, recording, session logs,
 * moderators), load model modules, and read what the process found (encoder backends, the native
 * addon). `arclight serve` is this from the command line (docs/operations.md).
 *
 * @example
 * ```ts
 * import { startRuntime } from 'arclight/runtime/operator';
 * import model from './my-model.ts';
 * const runtime = await startRuntime({ model, port: 8080 });
 * ```
 */
export { startRuntime, type Runtime } from './server.ts';
export { capabilitiesOf } from './hosting/served-version.ts';
export type { RuntimeIceOptions, RuntimeOptions, RecordingOptions } from './runtime-options.ts';
export type { RuntimeState, ModelReloadOutcome } from './hosting/model-host.ts';
export { loadModelModule, ModelModuleError } from './model/load-model-module.ts';
export type { SessionLogSettings } from './logs/session-log-registry.ts';
export type { RecordingStorage } from './recording/recording-storage.ts';
export type { RecordingEncoder } from './recording/track-recorder.ts';
export type { VideoCodecPreference } from './media/video-encoder.ts';
export type { Logger } from '../server-kit/log.ts';
export type { ModelLoadErrorInfo } from '../protocol/session-logs.ts';
export type { IcePolicyOptions } from './transport/signalling/ice-policy.ts';
export type { TurnOptions } from './transport/signalling/turn-credentials.ts';
export type { HostedOptions } from './hosted/coordinator-link.ts';
export type { PlaygroundHostedOptions } from './http/playground-routes.ts';
export type { UploadLimits } from './uploads/upload-store.ts';
/** Moderators: what checks a model's `moderated()` parameters (docs/model-authors.md "Moderation"). */
export type { Moderator, ModerationRequest, ModerationVerdict, ModerationOptions } from './moderation/moderator.ts';
export { HttpModerator, type HttpModeratorOptions } from './moderation/http-moderator.ts';
export { WordListModerator } from './moderation/word-list-moderator.ts';
/** What the process found at start: the native addon, and which encoder serves each codec. */
export { nativeAddonStatus, type NativeAddonStatus } from './native/native-addon.ts';
export {
  listEncoderBackends,
  describeEncoderBackendSelection,
  type EncoderBackendListing,
  type EncoderCandidateOutcome,
} from './media/encoder-backends.ts';
