/**
 * A file uploaded to the session (`uploadFile()`), to pass as a command parameter:
 * `client.sendCommand('stylise', { image: ref, strength: 0.5 })`. The model's handler receives it
 * resolved (its bytes on the runtime). Like 2.9.0's `FileRef`, it travels in the command's
 * `uploads` section, apart from the scalar data.
 */

import type { UploadReference } from '../protocol/uploads.ts';

export class FileRef {
  constructor(
    readonly uploadId: string,
    readonly name: string,
    readonly mimeType: string,
    readonly size: number,
    /** Where the bytes can be fetched back, until `downloadExpiresAt` (ms since the epoch). */
    readonly downloadUrl?: string,
    readonly downloadExpiresAt?: number,
  ) {}

  /** The wire form (an entry of a command's `uploads`). */
  toReference(): UploadReference {
    return { upload_id: this.uploadId, name: this.name, mime_type: this.mimeType, size: this.size };
  }
}
