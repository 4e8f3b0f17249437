/**
 * Handles what a client sends on the data channel: parses and checks the envelope, routes
 * application commands to the model and runtime messages to the session, and answers each
 * command with exactly one outcome correlated by `request_id`.
 */

import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { ArclightError } from '../../protocol/errors.ts';
import { decodeFrameMetadata, type InputFrameMetadataData } from '../../protocol/frame-metadata.ts';
import type { Envelope, EnvelopeBody } from '../../protocol/messages.ts';
import type { JsonValue } from '../../protocol/json-schema.ts';
import {
  envelopeSchema,
  inputFrameMetadataDataSchema,
  latencyReportDataSchema,
  publishTrackDataSchema,
  setLatencyModeDataSchema,
  subscribeFrameTimesDataSchema,
  trackNameDataSchema,
  trackSubscriptionDataSchema,
} from '../../protocol/schemas.ts';
import type { LatencyMode } from '../../protocol/messages.ts';
import type { Logger } from '../../server-kit/log.ts';
import type { CommandOutcome, CommandRouter } from '../model/command-router.ts';
import { describeSchemaError } from '../model/command-router.ts';
import { FILE_UPLOADED_MESSAGE } from '../../protocol/uploads.ts';
import type { UploadedFile } from '../uploads/upload-store.ts';
import type { Capabilities } from '../../protocol/capabilities.ts';
import type { JsonObject } from '../../protocol/json-schema.ts';
import type { SessionLogLevel } from '../../protocol/session-logs.ts';
import type { ModelSession } from '../model/model-session.ts';
import type { InputFrameAnnotation } from '../media/input-frame-aligner.ts';
import type { ClipReply } from '../recording/recording-registry.ts';
import type { Connection } from './connection.ts';

const ajv = new Ajv2020({ strict: false });
const validateEnvelope = ajv.compile(envelopeSchema);
const validateSubscription = ajv.compile(trackSubscriptionDataSchema);
const validateTrackName = ajv.compile(trackNameDataSchema);
const validatePublishTrack = ajv.compile(publishTrackDataSchema);
const validateInputFrameMetadata = ajv.compile(inputFrameMetadataDataSchema);
const validateLatencyMode = ajv.compile(setLatencyModeDataSchema);
const validateSubscribeFrameTimes = ajv.compile(subscribeFrameTimesDataSchema);
const validateLatencyReport = ajv.compile(latencyReportDataSchema);

/**
 * Runtime messages too frequent or too routine for the session's log: 2.9.0 pings every 5 s,
 * frame annotations and latency reports arrive many times a second.
 */
const UNLOGGED_RUNTIME_MESSAGES = new Set(['ping', 'input_frame_metadata', 'latency_report']);

/**
 * What the handler needs of its session, and no more (`Session` is one): the handler is built by
 * the session, so depending on `Session` itself would make the two files import each other.
 */
export interface MessageHandlerSession {
  /** The facade command handlers get. */
  readonly model: ModelSession<unknown>;
  /** What the session's model offers now (`request_schema` answers it). */
  readonly capabilities: Capabilities;
  /** Runs a command handler where author code may run (between a step model's steps). */
  readonly betweenSteps: <T>(fn: () => Promise<T>) => Promise<T>;
  /** A line for the session's log alone (refusals, command outcomes). */
  recordEvent(level: SessionLogLevel, message: string, fields?: JsonObject): void;
  uploadedFile(uploadId: string): UploadedFile;
  fileUploaded(connection: Connection, file: UploadedFile): Promise<void>;
  requestClip(durationSeconds: number | undefined): Promise<ClipReply>;
  setSubscribed(connection: Connection, trackName: string, subscribed: boolean): void;
  claimInput(connectionId: number, trackName: string, frameMetadata?: boolean): void;
  annotateInput(connectionId: number, trackName: string, frames: ReadonlyArray<{ rtpTimestamp: number } & InputFrameAnnotation>): void;
  releaseInput(connectionId: number, trackName: string): void;
  setLatencyMode(mode: LatencyMode): void;
  /** The output video track of that name, if the model has one. */
  outputVideoTrack(name: string): object | undefined;
  recordClientLatency(track: string, p50Ms: number, p95Ms: number): void;
}

export class MessageHandler {
  /** When each message being handled arrived (performance.now()), for its outcome's latency. */
  readonly #receivedAt = new WeakMap<EnvelopeBody, number>();
  readonly #session: MessageHandlerSession;
  /** Replaced when a new version of the model is adopted (`Session.adoptModel`). */
  #router: CommandRouter;
  readonly #maxBytes: number;
  readonly #log: Logger;

  constructor(session: MessageHandlerSession, router: CommandRouter, maxBytes: number, log: Logger) {
    this.#session = session;
    this.#router = router;
    this.#maxBytes = maxBytes;
    this.#log = log;
  }

  /** Commands from now on go to this router's handlers (a command already dispatched finishes on the old one). */
  useRouter(router: CommandRouter): void {
    this.#router = router;
  }

  async handle(connection: Connection, raw: string | Buffer): Promise<void> {
    const received = performance.now();
    const text = typeof raw === 'string' ? raw : raw.toString('utf8');
    const bytes = typeof raw === 'string' ? Buffer.byteLength(raw) : raw.length;
    let parsed: unknown;
    let parseFailed = false;
    try {
      parsed = JSON.parse(text);
    } catch {
      parseFailed = true;
    }
    // Size first: an oversized message is refused as such whatever its content. It is still
    // parsed (SCTP bounds it at 1 MiB) so the refusal can carry its request_id.
    if (bytes > this.#maxBytes) {
      this.#session.recordEvent('warn', `message refused: message_too_large (${bytes} bytes)`, {
        connection: connection.id,
        code: 'message_too_large',
        bytes,
      });
      this.#fail(
        connection,
        extractRequestId(parsed),
        extractType(parsed),
        'message_too_large',
        `The message is ${bytes} bytes; the limit is ${this.#maxBytes}.`,
      );
      return;
    }
    if (parseFailed) {
      this.#session.recordEvent('warn', 'message refused: invalid_message (not JSON)', {
        connection: connection.id,
        code: 'invalid_message',
      });
      this.#fail(connection, undefined, '', 'invalid_message', 'The message is not valid JSON.');
      return;
    }
    const requestId = extractRequestId(parsed);
    const type = extractType(parsed);
    if (!validateEnvelope(parsed)) {
      const { message } = describeSchemaError(validateEnvelope.errors, 'the message');
      this.#session.recordEvent('warn', 'message refused: invalid_message (not an envelope)', {
        connection: connection.id,
        code: 'invalid_message',
      });
      this.#fail(connection, requestId, type, 'invalid_message', `Not a valid envelope {scope, data: {type, data}}: ${message}.`);
      return;
    }
    const envelope = parsed as Envelope;
    this.#receivedAt.set(envelope.data, received);
    if (envelope.scope === 'application') await this.#command(connection, envelope.data);
    else if (envelope.data.type === FILE_UPLOADED_MESSAGE) await this.#fileUploaded(connection, envelope.data);
    else if (envelope.data.type === 'request_clip' || envelope.data.type === 'request_recording')
      await this.#clip(connection, envelope.data);
    else if (envelope.data.type === 'request_schema') this.#schema(connection, envelope.data);
    else this.#runtime(connection, envelope.data);
  }

  async #command(connection: Connection, body: EnvelopeBody): Promise<void> {
    let files: Record<string, UploadedFile> | undefined;
    let data = body.data;
    if (body.uploads !== undefined && Object.keys(body.uploads).length > 0) {
      // 2.9.0 sends file parameters apart from `data`: each is validated with the rest (as the
      // reference the schema describes), then handed to the handler as the uploaded file.
      try {
        files = this.#resolveUploads(body.uploads);
      } catch (error) {
        const e = error instanceof ArclightError ? error : new ArclightError('invalid_params', 'Bad uploads section.');
        this.#send(connection, body, {
          kind: 'failed',
          code: 'invalid_params',
          message: e.message,
          ...(e.field ? { field: e.field } : {}),
        });
        return;
      }
      data = { ...(typeof data === 'object' && data !== null && !Array.isArray(data) ? data : {}), ...body.uploads };
    }
    const outcome = await this.#router.dispatch(
      body.type,
      data,
      { session: this.#session.model, connection: connection.handle, requestId: body.request_id },
      files,
      this.#log,
      this.#session.betweenSteps,
    );
    this.#send(connection, body, outcome);
  }

  #resolveUploads(uploads: Record<string, unknown>): Record<string, UploadedFile> {
    const files: Record<string, UploadedFile> = {};
    for (const [key, reference] of Object.entries(uploads)) {
      const uploadId = typeof reference === 'object' && reference !== null ? (reference as { upload_id?: unknown }).upload_id : undefined;
      if (typeof uploadId !== 'string')
        throw new ArclightError('invalid_params', `uploads.${key} must be a file reference {upload_id, …}.`, { field: `/${key}` });
      try {
        files[key] = this.#session.uploadedFile(uploadId);
      } catch (error) {
        throw new ArclightError('invalid_params', `"${key}": ${(error as Error).message}`, { field: `/${key}` });
      }
    }
    return files;
  }

  /** `request_clip {duration_seconds}` / `request_recording {}` → `clip_ready` to this client alone. */
  async #clip(connection: Connection, body: EnvelopeBody): Promise<void> {
    try {
      let duration: number | undefined;
      if (body.type === 'request_clip') {
        const value =
          typeof body.data === 'object' && body.data !== null ? (body.data as { duration_seconds?: unknown }).duration_seconds : undefined;
        if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
          throw new ArclightError('recording_error', 'duration_seconds must be a positive number of seconds.', {
            field: '/duration_seconds',
          });
        }
        duration = value;
      }
      const clip = await this.#session.requestClip(duration);
      this.#send(connection, body, { kind: 'reply', type: 'clip_ready', data: { ...clip } });
    } catch (error) {
      this.#sendFailure(connection, body, error, new ArclightError('recording_error', 'The clip could not be made.'));
    }
  }

  /**
   * `request_schema {}` → `schema {capabilities}` to this client alone (runtime behaviour 4): the
   * model's commands with their JSON Schemas, its tracks and `schema_hash`, as the session serves
   * them now (after a reload that kept the session, the new version's) — GET /capabilities over
   * the data channel, for a client that has no HTTP route to the runtime of its own.
   */
  #schema(connection: Connection, body: EnvelopeBody): void {
    this.#send(connection, body, {
      kind: 'reply',
      type: 'schema',
      data: { capabilities: this.#session.capabilities as unknown as JsonValue },
    });
  }

  /** A correlated failure for `error`: its own code when it is an ArclightError, else `fallback` (logged). */
  #sendFailure(connection: Connection, body: EnvelopeBody, error: unknown, fallback: ArclightError): void {
    if (!(error instanceof ArclightError)) this.#log.error(`${body.type} failed`, { error });
    const e = error instanceof ArclightError ? error : fallback;
    this.#send(connection, body, { kind: 'failed', code: e.code, message: e.message, ...(e.field ? { field: e.field } : {}) });
  }

  async #fileUploaded(connection: Connection, body: EnvelopeBody): Promise<void> {
    const uploadId = typeof body.data === 'object' && body.data !== null ? (body.data as { upload_id?: unknown }).upload_id : undefined;
    try {
      if (typeof uploadId !== 'string')
        throw new ArclightError('invalid_message', `${FILE_UPLOADED_MESSAGE} needs data.upload_id.`, { field: '/upload_id' });
      await this.#session.fileUploaded(connection, this.#session.uploadedFile(uploadId));
      this.#send(connection, body, { kind: 'ack' });
    } catch (error) {
      this.#sendFailure(connection, body, error, new ArclightError('internal_error', 'The upload could not be announced.'));
    }
  }

  #runtime(connection: Connection, body: EnvelopeBody): void {
    try {
      switch (body.type) {
        case 'ping':
          connection.sendMessage('runtime', withRequestId({ type: 'pong', data: { server_time: Date.now() } }, body.request_id));
          return;
        case 'track_subscription': {
          const data = this.#checked(validateSubscription, body) as { track: string; subscribed: boolean };
          this.#session.setSubscribed(connection, data.track, data.subscribed);
          break;
        }
        case 'publish_track': {
          const data = this.#checked(validatePublishTrack, body) as { track: string; frame_metadata?: boolean };
          this.#session.claimInput(connection.id, data.track, data.frame_metadata === true);
          break;
        }
        case 'input_frame_metadata': {
          const data = this.#checked(validateInputFrameMetadata, body) as InputFrameMetadataData;
          this.#session.annotateInput(
            connection.id,
            data.track,
            data.frames.map((f) => ({
              rtpTimestamp: f.rtp_timestamp,
              ...(f.capture_time !== undefined ? { captureTime: f.capture_time } : {}),
              ...(f.metadata !== undefined ? { metadata: decodeFrameMetadata(f.metadata) } : {}),
            })),
          );
          break;
        }
        case 'unpublish_track': {
          const data = this.#checked(validateTrackName, body) as { track: string };
          this.#session.releaseInput(connection.id, data.track);
          break;
        }
        case 'set_latency_mode': {
          const data = this.#checked(validateLatencyMode, body) as { mode: LatencyMode };
          this.#session.setLatencyMode(data.mode);
          break;
        }
        case 'subscribe_frame_times': {
          const data = this.#checked(validateSubscribeFrameTimes, body) as { track: string; subscribed: boolean };
          if (!this.#session.outputVideoTrack(data.track))
            throw new ArclightError('unknown_track', `The model has no output video track "${data.track}".`);
          connection.frameTimes.setSubscribed(data.track, data.subscribed);
          break;
        }
        case 'latency_report': {
          const data = this.#checked(validateLatencyReport, body) as { track: string; p50_ms: number; p95_ms: number };
          this.#session.recordClientLatency(data.track, data.p50_ms, data.p95_ms);
          break;
        }
        default:
          throw new ArclightError('unknown_command', `Unknown runtime message "${body.type}".`);
      }
      this.#send(connection, body, { kind: 'ack' });
    } catch (error) {
      if (error instanceof ArclightError) {
        this.#send(connection, body, {
          kind: 'failed',
          code: error.code,
          message: error.message,
          ...(error.field ? { field: error.field } : {}),
        });
      } else {
        this.#log.error('runtime message failed', { error, type: body.type });
        this.#send(connection, body, { kind: 'failed', code: 'internal_error', message: 'The runtime failed to handle the message.' });
      }
    }
  }

  #checked(validate: ValidateFunction, body: EnvelopeBody): unknown {
    if (!validate(body.data)) {
      const { message, field } = describeSchemaError(validate.errors);
      throw new ArclightError('invalid_params', `${body.type}: ${message}`, { field });
    }
    return body.data;
  }

  #send(connection: Connection, request: EnvelopeBody, outcome: CommandOutcome): void {
    this.#recordOutcome(connection, request, outcome);
    switch (outcome.kind) {
      case 'reply':
        connection.sendMessage('application', withRequestId({ type: outcome.type, data: outcome.data }, request.request_id));
        return;
      case 'ack':
        // A bodyless ack only means something to a client that correlates; 2.9.0 gets nothing.
        if (request.request_id !== undefined) {
          connection.sendMessage('runtime', { type: 'command_ack', data: { command: request.type }, request_id: request.request_id });
        }
        return;
      case 'failed':
        this.#fail(connection, request.request_id, request.type, outcome.code, outcome.message, outcome.field);
    }
  }

  /** The session log's line for a command's outcome: what, for whom, how it ended and how long it took. */
  #recordOutcome(connection: Connection, request: EnvelopeBody, outcome: CommandOutcome): void {
    const received = this.#receivedAt.get(request);
    if (received === undefined || UNLOGGED_RUNTIME_MESSAGES.has(request.type)) return;
    const latencyMs = Math.round((performance.now() - received) * 100) / 100;
    const summary = outcome.kind === 'reply' ? `reply ${outcome.type}` : outcome.kind === 'ack' ? 'ack' : `failed ${outcome.code}`;
    this.#session.recordEvent(
      outcome.kind !== 'failed' ? 'info' : outcome.code === 'internal_error' ? 'error' : 'warn',
      `command ${request.type}: ${summary} (${latencyMs} ms)`,
      {
        command: request.type,
        connection: connection.id,
        outcome: outcome.kind,
        latency_ms: latencyMs,
        ...(outcome.kind === 'failed'
          ? { code: outcome.code, error: outcome.message, ...(outcome.field ? { field: outcome.field } : {}) }
          : {}),
        ...(request.request_id !== undefined ? { request_id: request.request_id } : {}),
      },
    );
  }

  #fail(connection: Connection, requestId: string | undefined, command: string, code: string, message: string, field?: string): void {
    connection.sendMessage(
      'runtime',
      withRequestId({ type: 'command_failed', data: { command, code, message, ...(field ? { field } : {}) } }, requestId),
    );
  }
}

function withRequestId(body: EnvelopeBody, requestId: string | undefined): EnvelopeBody {
  return requestId === undefined ? body : { ...body, request_id: requestId };
}

function extractRequestId(value: unknown): string | undefined {
  const id = (value as { data?: { request_id?: unknown } } | null)?.data?.request_id;
  return typeof id === 'string' && id.length > 0 && id.length <= 64 ? id : undefined;
}

function extractType(value: unknown): string {
  const type = (value as { data?: { type?: unknown } } | null)?.data?.type;
  return typeof type === 'string' ? type.slice(0, 128) : '';
}
