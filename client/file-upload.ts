/**
 * `uploadFile()`'s steps: reserve an upload slot on the session (HTTP, outside connect's abort
 * signal), PUT the bytes to the presigned URL it names (no credentials of ours travel there),
 * then tell the runtime on the data channel (`file_uploaded`), whose answer means the model's
 * hook has run. The result is the FileRef an app passes as a command parameter.
 */

import { ArclightError } from '../protocol/errors.ts';
import { FILE_UPLOADED_MESSAGE } from '../protocol/uploads.ts';
import { FileRef } from './file-ref.ts';
import { errorFromResponse } from './http-errors.ts';
import type { ConnectionView } from './session-connection.ts';

export async function uploadFile(connection: ConnectionView, file: Blob, options: { readonly name?: string }): Promise<FileRef> {
  connection.assertReady('uploadFile');
  const sessionId = connection.sessionId!;
  const name =
    options.name ?? (typeof (file as { name?: unknown }).name === 'string' && (file as File).name !== '' ? (file as File).name : 'upload');
  const mimeType = file.type || 'application/octet-stream';
  if (file.size === 0) throw new ArclightError('invalid_request', 'The file is empty.');
  const api = connection.standaloneApi();
  let slot = await api.createUpload(sessionId, { name, size: file.size, mime_type: mimeType });
  let put = await putUpload(slot.presigned_url, file, mimeType);
  // A PUT URL past its 15 minutes (a tab suspended between reserving and sending, a clock far
  // off) is answered 403 url_expired: reserve a fresh slot and send once more. Only once —
  // a second expiry in a row means the clocks disagree, which another try will not fix.
  if (put.status === 403) {
    const error = await errorFromResponse(put);
    if (error.code !== 'url_expired') throw error;
    slot = await api.createUpload(sessionId, { name, size: file.size, mime_type: mimeType });
    put = await putUpload(slot.presigned_url, file, mimeType);
  }
  if (!put.ok) throw await errorFromResponse(put);
  await connection.request('runtime', FILE_UPLOADED_MESSAGE, { upload_id: slot.presigned_id, name, mime_type: mimeType, size: file.size });
  return new FileRef(slot.presigned_id, name, mimeType, file.size, slot.download_url, slot.download_expires_at);
}

/** PUTs an upload's bytes to its presigned URL (no other credentials); a network failure is `connection_failed`. */
async function putUpload(url: string, file: Blob, mimeType: string): Promise<Response> {
  try {
    return await fetch(url, { method: 'PUT', body: file, headers: { 'Content-Type': mimeType } });
  } catch (error) {
    throw new ArclightError('connection_failed', `The upload could not be sent: ${(error as Error).message}`, { cause: error });
  }
}
