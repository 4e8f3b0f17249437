/**
 * Where uploaded files live while their session does: a folder per session under the runtime's
 * upload directory, one file per upload. A slot is reserved first (name, exact size, MIME type,
 * checked against the limits), then filled by one PUT streamed to disk — never held in memory —
 * and refused as soon as it passes the declared size. A session's files are deleted when it ends.
 */

import { randomUUID } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { ArclightError } from '../../protocol/errors.ts';
import type { CreateUploadRequest, UploadReference } from '../../protocol/uploads.ts';

export interface UploadLimits {
  /** Largest file, bytes. Default 100 MiB. */
  readonly maxBytes?: number;
  /** Accepted MIME types, exact (`image/png`) or by family (`image/*`). Default: any. */
  readonly mimeTypes?: readonly string[];
  /** Uploads per session. Default 100. */
  readonly maxFilesPerSession?: number;
}

/** What a model's handler (and its `file_uploaded` hook) receives for a file. */
export interface UploadedFile extends UploadReference {
  /** The file on the runtime's disk (deleted when the session ends). */
  readonly path: string;
  readonly mimeType: string;
  /** The whole file. */
  read(): Promise<Buffer>;
  /** The file as a stream. */
  stream(): Readable;
}

interface Slot extends UploadReference {
  readonly path: string;
  complete: boolean;
}

export const DEFAULT_UPLOAD_MAX_BYTES = 100 * 1024 * 1024;
const DEFAULT_MAX_FILES_PER_SESSION = 100;
const MAX_NAME_LENGTH = 1024;

export class UploadStore {
  readonly #directory: string;
  readonly #maxBytes: number;
  readonly #mimeTypes: readonly string[] | undefined;
  readonly #maxFiles: number;
  readonly #sessions = new Map<string, Map<string, Slot>>();

  constructor(directory: string, limits: UploadLimits = {}) {
    this.#directory = directory;
    this.#maxBytes = limits.maxBytes ?? DEFAULT_UPLOAD_MAX_BYTES;
    this.#mimeTypes = limits.mimeTypes;
    this.#maxFiles = limits.maxFilesPerSession ?? DEFAULT_MAX_FILES_PER_SESSION;
  }

  /** Reserves a slot for `request` (an unchecked body); throws 400/413/415 ArclightErrors. */
  reserve(sessionId: string, request: unknown): UploadReference {
    const { name, size, mime_type: mimeType } = parseRequest(request);
    if (size > this.#maxBytes)
      throw new ArclightError('payload_too_large', `The file is ${size} bytes; uploads are at most ${this.#maxBytes}.`, { field: '/size' });
    if (this.#mimeTypes && !this.#mimeTypes.some((accepted) => mimeMatches(accepted, mimeType))) {
      throw new ArclightError(
        'unsupported_media_type',
        `Files of type ${mimeType} are not accepted; accepted: ${this.#mimeTypes.join(', ')}.`,
        { field: '/mime_type' },
      );
    }
    let slots = this.#sessions.get(sessionId);
    if (!slots) this.#sessions.set(sessionId, (slots = new Map()));
    if (slots.size >= this.#maxFiles) throw new ArclightError('payload_too_large', `A session holds at most ${this.#maxFiles} uploads.`);
    const id = randomUUID();
    const slot: Slot = { upload_id: id, name, size, mime_type: mimeType, path: join(this.#directory, sessionId, id), complete: false };
    slots.set(id, slot);
    return { upload_id: id, name, size, mime_type: mimeType };
  }

  /**
   * Streams a PUT body into the slot: exactly its declared size, or it is refused (413 past it,
   * 400 short of it) and nothing is kept.
   */
  async receive(sessionId: string, uploadId: string, body: WebReadableStream<Uint8Array> | null): Promise<UploadReference> {
    const slot = this.#slot(sessionId, uploadId);
    if (slot.complete) throw new ArclightError('invalid_request', 'This upload already has its bytes; reserve a new one.');
    await mkdir(join(this.#directory, sessionId), { recursive: true });
    let received = 0;
    const limit = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        received += chunk.length;
        if (received > slot.size)
          done(new ArclightError('payload_too_large', `The upload carries more than the ${slot.size} bytes reserved.`));
        else done(null, chunk);
      },
    });
    try {
      await pipeline(body ? Readable.fromWeb(body) : Readable.from([]), limit, createWriteStream(slot.path));
      if (received !== slot.size)
        throw new ArclightError('invalid_request', `The upload carried ${received} bytes; ${slot.size} were reserved.`);
    } catch (error) {
      await rm(slot.path, { force: true });
      throw error instanceof ArclightError ? error : new ArclightError('invalid_request', 'The upload was interrupted.', { cause: error });
    }
    slot.complete = true;
    return { upload_id: slot.upload_id, name: slot.name, size: slot.size, mime_type: slot.mime_type };
  }

  /** The uploaded file (bytes received), or an ArclightError naming what is wrong. */
  file(sessionId: string, uploadId: string): UploadedFile {
    const slot = this.#slot(sessionId, uploadId);
    if (!slot.complete) throw new ArclightError('not_ready', `Upload ${uploadId} has no bytes yet: PUT them to its presigned URL first.`);
    return Object.freeze({
      upload_id: slot.upload_id,
      name: slot.name,
      mime_type: slot.mime_type,
      mimeType: slot.mime_type,
      size: slot.size,
      path: slot.path,
      read: () => readFile(slot.path),
      stream: () => createReadStream(slot.path),
    });
  }

  /** Deletes a session's files (its end). */
  async dropSession(sessionId: string): Promise<void> {
    if (!this.#sessions.delete(sessionId)) return;
    await rm(join(this.#directory, sessionId), { recursive: true, force: true });
  }

  #slot(sessionId: string, uploadId: string): Slot {
    const slot = this.#sessions.get(sessionId)?.get(uploadId);
    if (!slot) throw new ArclightError('not_found', `No upload ${uploadId} in this session.`);
    return slot;
  }
}

function parseRequest(body: unknown): CreateUploadRequest {
  const b = (typeof body === 'object' && body !== null ? body : {}) as Record<string, unknown>;
  const { name, size, mime_type: mimeType } = b;
  if (typeof name !== 'string' || name.length === 0 || name.length > MAX_NAME_LENGTH || /[\u0000-\u001f/\\]/.test(name)) {
    throw new ArclightError(
      'invalid_request',
      `name must be a file name of 1–${MAX_NAME_LENGTH} characters, without slashes or control characters.`,
      { field: '/name' },
    );
  }
  if (typeof size !== 'number' || !Number.isSafeInteger(size) || size < 1) {
    throw new ArclightError('invalid_request', 'size must be the file size in bytes (a positive integer; empty files are refused).', {
      field: '/size',
    });
  }
  if (typeof mimeType !== 'string' || !/^[\w.+-]+\/[\w.+-]+$/.test(mimeType)) {
    throw new ArclightError('invalid_request', 'mime_type must be a MIME type such as image/png.', { field: '/mime_type' });
  }
  return { name, size, mime_type: mimeType.toLowerCase() };
}

function mimeMatches(accepted: string, mimeType: string): boolean {
  const pattern = accepted.toLowerCase();
  return pattern.endsWith('/*') ? mimeType.startsWith(pattern.slice(0, -1)) : pattern === mimeType;
}
