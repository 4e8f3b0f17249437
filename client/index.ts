/**
 * `arclight/client` — connect apps to Arclight models (browsers; Node via `arclight/client/node`).
 *
 * @example
 * ```ts
 * import { ArclightClient } from 'arclight/client';
 * const client = new ArclightClient({ modelName: 'pattern', local: true });
 * client.on('statusChanged', (s) => console.log(s)); // connecting, waiting, ready
 * await client.connect();
 * ```
 */
export { ArclightClient, DEFAULT_API_URL, DEFAULT_LOCAL_RUNTIME_URL } from './arclight-client.ts';
export type {
  CommandData,
  Clip,
  ArclightClientOptions,
  ClientEvents,
  ClientWarning,
  ClientWarningCode,
  ClientState,
  ClientStatus,
  ConnectOptions,
  FrameMetadataEvent,
  InputFrameMetadata,
  InputFrameMetadataSource,
  ModelMessage,
  PublishOptions,
  ReconnectedEvent,
  ReconnectingEvent,
} from './arclight-client.ts';
export type { ReconnectPolicy } from './connection-recovery.ts';
export type {
  CommandName,
  CommandParamsArgument,
  CommandResultOf,
  DeclaredMessage,
  MessageOf,
  ModelTypes,
  ReplyMessage,
  TypedReply,
  UntypedModel,
  ValueOf,
} from './model-types.ts';
export type { InputFrameInfo } from './input-frame-stamper.ts';
export type { CommandReply } from './pending-commands.ts';
export type { ClientStats, MediaQuality } from './stats.ts';
export type { LatencySummary } from './latency-tracker.ts';
export type { LostReason, RtcImplementation } from './peer-link.ts';
export type { TokenSource } from './token.ts';
export { cacheToken, type ExpiringToken, type TokenCacheOptions } from './token-cache.ts';
export { FileRef } from './file-ref.ts';
export { downloadClipAsFile, DEFAULT_CLIP_FILENAME, type DownloadClipOptions } from './clip-download.ts';
export { ArclightError } from '../protocol/errors.ts';
export type { Capabilities, TrackCapability, CommandCapability, MessageCapability } from '../protocol/capabilities.ts';
export type { SessionResponse } from '../protocol/session.ts';
export type { LatencyMode } from '../protocol/messages.ts';
export type { SessionLogQuery } from './session-logs.ts';
export type { SessionLogLine, SessionLogPage, SessionLogLevel, SessionLogSource } from '../protocol/session-logs.ts';
