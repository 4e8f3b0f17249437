/**
 * Where recordings are kept: keys like `<session>/seg-00001.m4s`. Local disk by default; the
 * interface is what an S3-compatible backend would implement (write whole objects, read them,
 * delete a session's prefix).
 */

import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join, normalize } from 'node:path';
import { ArclightError } from '../../protocol/errors.ts';

export interface RecordingStorage {
  write(key: string, data: Buffer): Promise<void>;
  /** The object's bytes; throws a `not_found` ArclightError when there is none. */
  read(key: string): Promise<Buffer>;
  /** Deletes every object under `prefix` (a session's folder). */
  removePrefix(prefix: string): Promise<void>;
}

export class LocalDiskStorage implements RecordingStorage {
  readonly #root: string;

  constructor(root: string) {
    this.#root = root;
  }

  async write(key: string, data: Buffer): Promise<void> {
    const path = this.#path(key);
    await mkdir(dirname(path), { recursive: true });
    await writeFile(path, data);
  }

  async read(key: string): Promise<Buffer> {
    try {
      return await readFile(this.#path(key));
    } catch {
      throw new ArclightError('not_found', `No recording file ${key}.`);
    }
  }

  async removePrefix(prefix: string): Promise<void> {
    await rm(this.#path(prefix), { recursive: true, force: true });
  }

  /** Keys come from our own ids, but a path must never leave the root whatever they hold. */
  #path(key: string): string {
    const path = normalize(join(this.#root, key));
    if (!path.startsWith(this.#root)) throw new ArclightError('invalid_request', 'Bad recording key.');
    return path;
  }
}
