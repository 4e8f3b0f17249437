/**
 * Reusable frame buffers for one output track, so that `emit()` can copy the model's pixels
 * (the model may reuse its buffer as soon as emit resolves) without allocating 1.4 MB per
 * 720p frame. Buffers are returned once the encoder has taken its own copy.
 */

import type { VideoFrame } from './frames.ts';

export class FramePool {
  readonly #free = new Map<number, Uint8Array[]>();
  readonly #maxPerSize: number;

  constructor(maxPerSize: number) {
    this.#maxPerSize = maxPerSize;
  }

  /** A copy of `frame` whose data belongs to the pool until `release()`. */
  copy(frame: VideoFrame): VideoFrame {
    const size = frame.data.byteLength;
    const data = this.#free.get(size)?.pop() ?? new Uint8Array(size);
    data.set(frame.data);
    return { ...frame, data };
  }

  release(frame: VideoFrame): void {
    const size = frame.data.byteLength;
    let list = this.#free.get(size);
    if (!list) {
      list = [];
      this.#free.set(size, list);
    }
    if (list.length < this.#maxPerSize) list.push(frame.data);
  }
}
