/**
 * Writing a tightly packed frame into an FFmpeg frame's planes (the encoder's input), and keeping
 * those planes' views from frame to frame (see WritableFramePlanes: why that matters to the GC).
 */
import { FFmpegError, type Frame } from 'node-av/lib';
import type { VideoFrame } from './frames.ts';

/** An FFmpeg frame's planes as Buffers over its own memory, and each plane's row stride. */
export interface FramePlanes {
  readonly planes: readonly Buffer[];
  readonly strides: readonly number[];
}

/**
 * The planes of the FFmpeg frames an encoder writes into, made writable, as views kept from
 * frame to frame.
 *
 * node-av's `Frame.data` wraps the frame's memory in a new external Buffer per plane on every
 * call (1.4 MB of a 720p I420 frame). V8 counts such memory as young-generation ArrayBuffer
 * bytes until a scavenge, and once they pass twice the semi-space (~32 MB: ~23 frames at 720p)
 * the next ArrayBuffer anything allocates forces a scavenge ("external memory pressure"): one
 * GC every ~0.8 s, however little JavaScript garbage there was. The views are taken again only
 * when the frame's memory may have changed: `makeWritable` gives it a new buffer when the
 * encoder still references the old one (av_frame_ref on send), which a writable frame never
 * needs.
 */
export class WritableFramePlanes {
  #frame: Frame | undefined;
  #planes: FramePlanes | undefined;
  /** Times the views were taken (tests). */
  taken = 0;

  /** `frame`'s planes, after making it writable (a private buffer, not one the encoder still reads). */
  of(frame: Frame): FramePlanes {
    if (this.#frame === frame && this.#planes !== undefined && frame.isWritable) return this.#planes;
    // The encoder may still reference the buffer (av_frame_ref on send); writing into a
    // shared buffer would change a picture it has not finished with, so get a private one.
    FFmpegError.throwIfError(frame.makeWritable(), 'make encoder frame writable');
    const planes = frame.data;
    if (!planes) throw new Error('encoder frame has no buffers');
    this.#frame = frame;
    this.#planes = { planes, strides: frame.linesize };
    this.taken++;
    return this.#planes;
  }

  /** Forgets the views (the frame is about to be freed). */
  clear(): void {
    this.#frame = undefined;
    this.#planes = undefined;
  }
}

/**
 * Copies a tightly packed frame into an FFmpeg frame's planes of the same format and size, row by
 * row, because FFmpeg pads each row to its linesize (e.g. 642 wide -> 704 bytes).
 */
export function copyPackedIntoFrame(frame: VideoFrame, target: FramePlanes): void {
  const { planes, strides } = target;
  const { width, height, data } = frame;
  if (frame.format === 'rgba') {
    copyRows(data, 0, width * 4, planes[0]!, strides[0]!, height);
    return;
  }
  const chromaWidth = Math.ceil(width / 2);
  const chromaHeight = Math.ceil(height / 2);
  const uOffset = width * height;
  const vOffset = uOffset + chromaWidth * chromaHeight;
  copyRows(data, 0, width, planes[0]!, strides[0]!, height);
  copyRows(data, uOffset, chromaWidth, planes[1]!, strides[1]!, chromaHeight);
  copyRows(data, vOffset, chromaWidth, planes[2]!, strides[2]!, chromaHeight);
}

function copyRows(
  source: Uint8Array,
  sourceOffset: number,
  rowBytes: number,
  target: Uint8Array,
  targetStride: number,
  rows: number,
): void {
  if (targetStride === rowBytes) {
    target.set(source.subarray(sourceOffset, sourceOffset + rowBytes * rows));
    return;
  }
  for (let row = 0; row < rows; row++) {
    const start = sourceOffset + row * rowBytes;
    target.set(source.subarray(start, start + rowBytes), row * targetStride);
  }
}
