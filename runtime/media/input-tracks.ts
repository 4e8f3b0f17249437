/**
 * A model input track as the model reads it: decoded frames from whichever connection publishes
 * it (one at a time). Keeps only the newest video frame — a model that reads slower than the
 * client sends sees the latest picture, never a growing backlog.
 */

import type { InputAudio, InputVideo } from '../model/model-session.ts';
import type { AudioFrame, VideoFrame } from './frames.ts';
import { InputFrameAligner, type InputFrameAnnotation } from './input-frame-aligner.ts';

/** Single-slot latest-value channel with async iteration. */
class LatestValue<T> {
  #value: T | undefined;
  #version = 0;
  #waiters: Array<() => void> = [];
  #closed = false;

  get value(): T | undefined {
    return this.#value;
  }

  set(value: T): void {
    this.#value = value;
    this.#version++;
    for (const wake of this.#waiters.splice(0)) wake();
  }

  close(): void {
    this.#closed = true;
    for (const wake of this.#waiters.splice(0)) wake();
  }

  async *iterate(): AsyncIterableIterator<T> {
    let seen = this.#version;
    while (!this.#closed) {
      if (this.#version === seen) {
        await new Promise<void>((resolve) => this.#waiters.push(resolve));
        continue;
      }
      seen = this.#version;
      yield this.#value as T;
    }
  }
}

/** Bounded FIFO for audio: drops the oldest when a reader falls more than a second behind. */
class AudioFifo {
  readonly #frames: AudioFrame[] = [];
  #waiters: Array<() => void> = [];
  #closed = false;
  static readonly MAX_FRAMES = 50;

  push(frame: AudioFrame): void {
    if (this.#frames.length >= AudioFifo.MAX_FRAMES) this.#frames.shift();
    this.#frames.push(frame);
    for (const wake of this.#waiters.splice(0)) wake();
  }

  close(): void {
    this.#closed = true;
    for (const wake of this.#waiters.splice(0)) wake();
  }

  async *iterate(): AsyncIterableIterator<AudioFrame> {
    while (!this.#closed) {
      const frame = this.#frames.shift();
      if (frame) yield frame;
      else await new Promise<void>((resolve) => this.#waiters.push(resolve));
    }
  }
}

export class InputVideoTrack implements InputVideo {
  readonly name: string;
  #publisher: number | undefined;
  /** Set while the publisher announced per-frame annotations (`publish_track` `frame_metadata`). */
  #aligner: InputFrameAligner | undefined;
  readonly #latest = new LatestValue<VideoFrame>();
  #frames = 0;

  constructor(name: string) {
    this.name = name;
  }

  /** The connection publishing this track, if any. */
  get publisher(): number | undefined {
    return this.#publisher;
  }

  set publisher(connectionId: number | undefined) {
    if (connectionId === this.#publisher) return;
    this.#publisher = connectionId;
    this.expectAnnotations(false);
  }

  get framesReceived(): number {
    return this.#frames;
  }

  /** Whether the current publisher sends per-frame annotations (frames then wait briefly for them). */
  expectAnnotations(expect: boolean): void {
    if (expect) {
      this.#aligner ??= new InputFrameAligner((frame) => this.#accept(frame));
      return;
    }
    this.#aligner?.reset();
    this.#aligner = undefined;
  }

  /** Whether `annotate` is accepted now. */
  get expectsAnnotations(): boolean {
    return this.#aligner !== undefined;
  }

  annotate(rtpTimestamp: number, annotation: InputFrameAnnotation): void {
    this.#aligner?.annotate(rtpTimestamp, annotation);
  }

  /** A decoded frame from the publisher, with the RTP timestamp it arrived under. */
  deliver(frame: VideoFrame, rtpTimestamp?: number): void {
    if (this.#aligner && rtpTimestamp !== undefined) this.#aligner.push(frame, rtpTimestamp);
    else this.#accept(frame);
  }

  #accept(frame: VideoFrame): void {
    this.#frames++;
    this.#latest.set(frame);
  }

  latest(): VideoFrame | undefined {
    return this.#latest.value;
  }

  frames(): AsyncIterable<VideoFrame> {
    return { [Symbol.asyncIterator]: () => this.#latest.iterate() };
  }

  close(): void {
    this.#aligner?.close();
    this.#latest.close();
  }
}

export class InputAudioTrack implements InputAudio {
  readonly name: string;
  publisher: number | undefined;
  readonly #fifo = new AudioFifo();

  constructor(name: string) {
    this.name = name;
  }

  deliver(frame: AudioFrame): void {
    this.#fifo.push(frame);
  }

  frames(): AsyncIterable<AudioFrame> {
    return { [Symbol.asyncIterator]: () => this.#fifo.iterate() };
  }

  close(): void {
    this.#fifo.close();
  }
}
