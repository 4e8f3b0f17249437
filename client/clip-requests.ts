/**
 * Asking the runtime for a clip (`request_clip`: the last n seconds) or the whole recording so far
 * (`request_recording`) on the data channel. Every failure, whatever its cause, reaches the app as
 * `recording_error`, the one code the clip calls document. Fetching the clip is clip-download.ts.
 */

import { ArclightError } from '../protocol/errors.ts';
import type { JsonObject } from '../protocol/json-schema.ts';
import type { Clip } from './client-types.ts';
import type { RequestSender } from './command-channel.ts';
import { asError } from './error-coercion.ts';
import type { CommandReply } from './pending-commands.ts';

export async function requestClip(sender: RequestSender, type: 'request_clip' | 'request_recording', data: JsonObject): Promise<Clip> {
  let reply: CommandReply | undefined;
  try {
    reply = await sender.request('runtime', type, data);
  } catch (error) {
    const e = asError(error, 'recording_error');
    throw e.code === 'recording_error' ? e : new ArclightError('recording_error', `The clip could not be made: ${e.message}`, { cause: e });
  }
  const body = (reply?.data ?? {}) as { clip_id?: string; playlist_url?: string; duration_seconds?: number; expires_at?: number };
  if (typeof body.playlist_url !== 'string' || typeof body.clip_id !== 'string')
    throw new ArclightError('recording_error', 'The runtime answered without a clip.');
  return {
    clipId: body.clip_id,
    playlistUrl: body.playlist_url,
    durationSeconds: body.duration_seconds ?? 0,
    expiresAt: body.expires_at ?? 0,
  };
}
