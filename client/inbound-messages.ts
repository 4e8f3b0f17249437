/**
 * The data channel's inbound side: each message the runtime sends, parsed and handed to the part
 * of the client it concerns. Model messages (application scope) settle the command they answer
 * and become `message` events; runtime messages settle requests (acks, failures, pongs), feed the
 * connection (connection_info, session_ended) and the features (frame metadata and times, quality
 * reports, model reloads), and are then repeated as `runtimeMessage` events — except the two
 * high-rate per-frame ones. One function, so the order of effects and events is read in one place.
 */

import type { Capabilities } from '../protocol/capabilities.ts';
import { ArclightError } from '../protocol/errors.ts';
import type { FrameMetadataData } from '../protocol/frame-metadata.ts';
import type { Envelope } from '../protocol/messages.ts';
import type { EmitClientEvent } from './client-types.ts';
import type { CommandChannel } from './command-channel.ts';
import type { ModelMessage } from './model-types.ts';
import type { MediaQuality } from './stats.ts';

/** Where the router sends what it reads. */
export interface InboundHandlers {
  readonly emit: EmitClientEvent;
  readonly commands: Pick<CommandChannel, 'resolve' | 'reject'>;
  /** A failure nobody waits on (a `command_failed` without a pending request). */
  fail(error: ArclightError): void;
  frameMetadata(data: FrameMetadataData): void;
  frameTimes(track: string, frames: Array<[number, number]>): void;
  /** The runtime attached its end of the channel (and may name the connection id). */
  connectionInfo(connectionId: number | undefined): void;
  mediaStats(quality: MediaQuality): void;
  /** `arclight dev` serves a new version of the model in place, with these capabilities. */
  modelReloaded(capabilities: Capabilities): void;
  sessionEnded(reason: string): void;
}

export function routeInbound(raw: string, to: InboundHandlers): void {
  let envelope: Envelope;
  try {
    envelope = JSON.parse(raw) as Envelope;
  } catch {
    return;
  }
  const body = envelope?.data;
  if (!body || typeof body.type !== 'string') return;
  const message: ModelMessage = {
    type: body.type,
    ...(body.data === undefined ? {} : { data: body.data }),
    ...(body.request_id ? { request_id: body.request_id } : {}),
  };
  if (envelope.scope === 'application') {
    if (body.request_id) to.commands.resolve(body.request_id, { type: body.type, data: body.data });
    // Typed clients see declared shapes; a model that changed since is reported at connect (schema_drift).
    to.emit('message', message);
    return;
  }
  switch (body.type) {
    case 'command_ack':
      if (body.request_id) to.commands.resolve(body.request_id, undefined);
      break;
    case 'command_failed': {
      const data = (body.data ?? {}) as { code?: string; message?: string; field?: string; command?: string };
      const error = new ArclightError(
        data.code ?? 'internal_error',
        data.message ?? 'The command failed.',
        data.field ? { field: data.field } : {},
      );
      if (!body.request_id || !to.commands.reject(body.request_id, error)) to.fail(error);
      break;
    }
    case 'frame_metadata': {
      const data = body.data as FrameMetadataData | undefined;
      if (!data || typeof data.track !== 'string' || typeof data.rtp_timestamp !== 'number') break;
      to.frameMetadata(data);
      return; // high rate: not repeated as a runtimeMessage
    }
    case 'frame_times': {
      const data = body.data as { track?: string; frames?: Array<[number, number]> } | undefined;
      if (data?.track && Array.isArray(data.frames)) to.frameTimes(data.track, data.frames);
      return; // high rate: not repeated as a runtimeMessage
    }
    case 'pong':
      if (body.request_id) to.commands.resolve(body.request_id, { type: 'pong', data: body.data });
      break;
    case 'connection_info': {
      const data = body.data as { connection_id?: number } | undefined;
      to.connectionInfo(typeof data?.connection_id === 'number' ? data.connection_id : undefined);
      break;
    }
    case 'media_stats': {
      const quality = body.data as MediaQuality | undefined;
      if (!quality || typeof quality !== 'object' || typeof quality.score !== 'number') break;
      to.mediaStats(quality);
      break;
    }
    case 'model_reloaded': {
      // `arclight dev` serves a new version of the model in place: the app's types may be stale now.
      const capabilities = ((body.data ?? {}) as { capabilities?: Capabilities }).capabilities;
      if (capabilities && typeof capabilities === 'object') to.modelReloaded(capabilities);
      break;
    }
    case 'session_ended':
      to.sessionEnded(((body.data ?? {}) as { reason?: string }).reason ?? 'ended');
      break;
  }
  to.emit('runtimeMessage', message);
}
