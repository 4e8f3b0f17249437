/**
 * The shared-memory frame ring: one file on tmpfs (/dev/shm) cut into equal slots, which the
 * runtime and its Python worker(s) both map. Frame bytes cross here and nowhere else; which slot
 * holds what is agreed per request over the control socket (worker-protocol.ts).
 *
 * The file is unlinked as soon as it is created: the runtime keeps its descriptor and hands it to
 * each worker as fd 3 at spawn, so the memory lives exactly as long as some process holds it, and
 * nothing is left in /dev/shm even when the runtime is SIGKILLed.
 *
 * Node has no mmap, so the runtime's side reads and writes slots with pread/pwrite
 * (`fs.readSync`/`fs.writeSync` at an offset) into buffers it reuses: one copy each way, a
 * memcpy in the kernel. The Python side maps the file (mmap) and wraps slots in numpy views: no copy.
 * Layout: python/arclight_worker/_ring.py.
 */

import { closeSync, existsSync, ftruncateSync, openSync, readSync, unlinkSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';

export const RING_MAGIC = 'ARCLRING';
export const RING_LAYOUT_VERSION = 1;
export const RING_HEADER_BYTES = 4096;
/** Every segment's name starts with this (tests count /dev/shm entries by it). */
export const RING_FILE_PREFIX = 'arclight-ring-';
const PAGE = 4096;

export interface FrameRingOptions {
  readonly slotCount: number;
  /** Bytes each slot must hold (rounded up to a page). */
  readonly slotBytes: number;
  /** Where the file is created: /dev/shm when it exists, else the OS temp folder. */
  readonly directory?: string;
}

export class FrameRing {
  readonly slotCount: number;
  readonly slotBytes: number;
  /** The descriptor the workers inherit (fd 3 in each). */
  readonly fd: number;
  #closed = false;

  private constructor(fd: number, slotCount: number, slotBytes: number) {
    this.fd = fd;
    this.slotCount = slotCount;
    this.slotBytes = slotBytes;
  }

  static create(options: FrameRingOptions): FrameRing {
    if (!Number.isInteger(options.slotCount) || options.slotCount < 1)
      throw new RangeError(`slotCount must be a positive integer, got ${options.slotCount}`);
    if (!(options.slotBytes > 0)) throw new RangeError(`slotBytes must be positive, got ${options.slotBytes}`);
    const slotBytes = Math.ceil(options.slotBytes / PAGE) * PAGE;
    const directory = options.directory ?? (existsSync('/dev/shm') ? '/dev/shm' : tmpdir());
    const path = join(directory, `${RING_FILE_PREFIX}${process.pid}-${randomBytes(6).toString('hex')}`);
    const fd = openSync(path, 'wx+', 0o600);
    try {
      unlinkSync(path);
      ftruncateSync(fd, RING_HEADER_BYTES + options.slotCount * slotBytes);
      const header = Buffer.alloc(32);
      header.write(RING_MAGIC, 0, 'latin1');
      header.writeUInt32LE(RING_LAYOUT_VERSION, 8);
      header.writeUInt32LE(options.slotCount, 12);
      header.writeBigUInt64LE(BigInt(slotBytes), 16);
      header.writeBigUInt64LE(BigInt(RING_HEADER_BYTES), 24);
      writeSync(fd, header, 0, header.length, 0);
    } catch (error) {
      closeSync(fd);
      throw error;
    }
    return new FrameRing(fd, options.slotCount, slotBytes);
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Copies `data` into slot `slot` (one pwrite). */
  write(slot: number, data: Uint8Array): void {
    const at = this.#offset(slot, data.byteLength);
    let done = 0;
    while (done < data.byteLength) done += writeSync(this.fd, data, done, data.byteLength - done, at + done);
  }

  /** Copies the first `length` bytes of slot `slot` into `into` (one pread); returns `into`'s view of them. */
  read(slot: number, length: number, into: Uint8Array): Uint8Array {
    if (into.byteLength < length) throw new RangeError(`a ${into.byteLength}-byte buffer cannot take ${length} bytes`);
    const at = this.#offset(slot, length);
    let done = 0;
    while (done < length) {
      const n = readSync(this.fd, into, done, length - done, at + done);
      if (n === 0) throw new RangeError(`slot ${slot} ends before ${length} bytes`);
      done += n;
    }
    return into.subarray(0, length);
  }

  /** Closes the runtime's descriptor; the memory goes once every worker holding it has exited. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    closeSync(this.fd);
  }

  #offset(slot: number, length: number): number {
    if (this.#closed) throw new Error('the frame ring is closed');
    if (!Number.isInteger(slot) || slot < 0 || slot >= this.slotCount)
      throw new RangeError(`slot ${slot} is outside the ring (0..${this.slotCount - 1})`);
    if (length > this.slotBytes) throw new RangeError(`${length} bytes do not fit a ${this.slotBytes}-byte slot`);
    return RING_HEADER_BYTES + slot * this.slotBytes;
  }
}
