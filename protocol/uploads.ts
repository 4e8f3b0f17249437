/**
 * Uploads: a client reserves a slot (`POST /sessions/{id}/uploads`), PUTs the bytes to the
 * presigned URL it gets back, then passes a reference to the file as a command parameter. Shaped
 * like `@reactor-team/js-sdk@2.9.0`'s (its response fields, its `fileUploaded` runtime message and
 * its `uploads` section of a command), plus a presigned download URL.
 */

/** `POST /sessions/{id}/uploads` body. */
export interface CreateUploadRequest {
  /** The file's name (2.9.0: the File's name, or `upload` for a Blob). */
  readonly name: string;
  /** Exact size in bytes; the PUT must carry exactly this many. */
  readonly size: number;
  readonly mime_type: string;
}

/** `POST /sessions/{id}/uploads` answer (201). */
export interface CreateUploadResponse {
  /** The upload's id: what a file reference names. */
  readonly presigned_id: string;
  /** HTTP PUT the bytes here (no other credentials); valid `UPLOAD_URL_LIFETIME_SECONDS`. */
  readonly presigned_url: string;
  /** Where the runtime keeps the bytes (2.9.0 requires the field; informational). */
  readonly path: string;
  /** HTTP GET the bytes back from here once uploaded; valid `DOWNLOAD_URL_LIFETIME_SECONDS`. */
  readonly download_url: string;
  /** When `presigned_url` stops working, ms since the epoch. */
  readonly expires_at: number;
  /** When `download_url` stops working, ms since the epoch. */
  readonly download_expires_at: number;
}

/** A file as a command parameter refers to it (2.9.0's `uploads` entries, and `fileUploaded`'s data). */
export interface UploadReference {
  readonly upload_id: string;
  readonly name: string;
  readonly mime_type: string;
  readonly size: number;
}

/** The spec's lifetimes: upload (PUT) URLs 15 minutes, download (GET) URLs 5 minutes. */
export const UPLOAD_URL_LIFETIME_SECONDS = 15 * 60;
export const DOWNLOAD_URL_LIFETIME_SECONDS = 5 * 60;

/** The runtime-scope message a client sends after its PUT (fires the model's `file_uploaded` hook). */
export const FILE_UPLOADED_MESSAGE = 'fileUploaded';

/**
 * The JSON Schema of a file parameter, for a command's `params`: the reference a client sends.
 * The handler receives the resolved `UploadedFile` in its place.
 */
export const FILE_PARAMETER_SCHEMA = {
  type: 'object',
  properties: {
    upload_id: { type: 'string', minLength: 1, maxLength: 128 },
    name: { type: 'string', maxLength: 1024 },
    mime_type: { type: 'string', maxLength: 255 },
    size: { type: 'integer', minimum: 1 },
  },
  required: ['upload_id'],
  'x-arclight-file': true,
} as const;

/**
 * Sent by the coordinator when it relays a reservation to a runtime: the coordinator's public
 * origin, which the presigned URLs then point at (clients never reach a hosted runtime directly).
 */
export const PUBLIC_URL_HEADER = 'Arclight-Public-Url';
