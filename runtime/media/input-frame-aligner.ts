/**
 * Joins decoded input video frames with the annotations (metadata, capture time) that the
 * publishing client sends for them over the data channel, keyed by RTP timestamp.
 *
 * The two travel separately — RTP over SRTP, annotations over SCTP — so either may arrive first.
 * An annotation that comes first waits in a bounded map; a frame that comes first waits (in
 * order, behind any earlier waiting frame) up to `waitMs` for its annotation and is then
 * delivered without one, so a lost or never-sent annotation costs at most that delay once.
 */

import type { FrameMetadata, VideoFrame } from './frames.ts';

export interface InputFrameAnnotation {
  /** Sender's capture time, Unix epoch ms on the runtime's clock. */
  readonly captureTime?: number;
  readonly metadata?: FrameMetadata;
}

/** How long a decoded frame may wait for its annotation. */
export const ANNOTATION_WAIT_MS = 100;
/** Annotations kept for frames not decoded yet; the oldest go first (their frames were lost). */
const MAX_ANNOTATIONS = 256;
/** Frames held waiting; beyond this the oldest is delivered at once (never a growing backlog). */
const MAX_WAITING_FRAMES = 8;

interface WaitingFrame {
  readonly frame: VideoFrame;
  readonly rtpTimestamp: number;
  readonly deadline: number;
}

export class InputFrameAligner {
  readonly #deliver: (frame: VideoFrame) => void;
  readonly #waitMs: number;
  readonly #annotations = new Map<number, InputFrameAnnotation>();
  readonly #waiting: WaitingFrame[] = [];
  #timer: ReturnType<typeof setTimeout> | undefined;
  #annotated = 0;
  #unannotated = 0;

  constructor(deliver: (frame: VideoFrame) => void, options: { waitMs?: number } = {}) {
    this.#deliver = deliver;
    this.#waitMs = options.waitMs ?? ANNOTATION_WAIT_MS;
  }

  /** Frames delivered with their annotation. */
  get annotated(): number {
    return this.#annotated;
  }

  /** Frames delivered without one (it never came, or came later than `waitMs`). */
  get unannotated(): number {
    return this.#unannotated;
  }

  annotate(rtpTimestamp: number, annotation: InputFrameAnnotation): void {
    if (this.#annotations.size >= MAX_ANNOTATIONS) {
      this.#annotations.delete(this.#annotations.keys().next().value!);
    }
    this.#annotations.set(rtpTimestamp >>> 0, annotation);
    this.#release();
  }

  push(frame: VideoFrame, rtpTimestamp: number): void {
    this.#waiting.push({ frame, rtpTimestamp: rtpTimestamp >>> 0, deadline: performance.now() + this.#waitMs });
    if (this.#waiting.length > MAX_WAITING_FRAMES) this.#emit(this.#waiting.shift()!);
    this.#release();
  }

  /** Delivers what is waiting without annotations and forgets the rest (publisher changed, track closed). */
  reset(): void {
    for (const waiting of this.#waiting.splice(0)) this.#emit(waiting);
    this.#annotations.clear();
    this.#clearTimer();
  }

  close(): void {
    this.#waiting.length = 0;
    this.#annotations.clear();
    this.#clearTimer();
  }

  /** Delivers waiting frames from the head while each has its annotation or has waited long enough. */
  #release(): void {
    const now = performance.now();
    while (this.#waiting.length > 0) {
      const head = this.#waiting[0]!;
      if (!this.#annotations.has(head.rtpTimestamp) && head.deadline > now) break;
      this.#emit(this.#waiting.shift()!);
    }
    this.#clearTimer();
    const head = this.#waiting[0];
    if (head) this.#timer = setTimeout(() => this.#release(), Math.max(0, head.deadline - now));
  }

  #emit({ frame, rtpTimestamp }: WaitingFrame): void {
    const annotation = this.#annotations.get(rtpTimestamp);
    if (!annotation) {
      this.#unannotated++;
      this.#deliver(frame);
      return;
    }
    this.#annotations.delete(rtpTimestamp);
    this.#annotated++;
    this.#deliver({
      ...frame,
      ...(annotation.metadata !== undefined ? { metadata: annotation.metadata } : {}),
      ...(annotation.captureTime !== undefined ? { captureTime: annotation.captureTime } : {}),
    });
  }

  #clearTimer(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}
