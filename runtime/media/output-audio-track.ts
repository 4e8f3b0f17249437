/**
 * One model output audio track: samples from `emit()` are played out on the wall clock in 20 ms
 * Opus frames. A tick with too few samples is padded with silence; the clock never waits for
 * the model. The clock runs whether or not anyone listens (so a model that emits audio and
 * video in one loop is paced the same either way); encoding happens only for unpaused sinks.
 */

import type { OutputAudioTrackSpec } from '../model/definition.ts';
import type { Logger } from '../../server-kit/log.ts';
import type { RuntimeMetrics } from '../metrics.ts';
import { assertEmittableAudio } from './emit-checks.ts';
import type { AudioFrame } from './frames.ts';
import { OpusEncoder } from './opus.ts';

export const AUDIO_SAMPLE_RATE = 48_000;
/** The audio clock's tick: one Opus frame. */
export const AUDIO_FRAME_MS = 20;
const FRAME_MS = AUDIO_FRAME_MS;
const SAMPLES_PER_FRAME = (AUDIO_SAMPLE_RATE * FRAME_MS) / 1000;
/** emit() waits while more than this much audio is buffered ahead of the clock. */
export const MAX_BUFFERED_AUDIO_MS = 200;
const MAX_BUFFERED_MS = MAX_BUFFERED_AUDIO_MS;

/** Where a piece of audio queued by `place()` falls on the track's clock. */
export interface AudioPlacement {
  /** When its first sample plays (ms of `performance.now()`): the audio clock's time for it. */
  readonly startMs: number;
  /** How long it lasts, ms (its samples at 48 kHz). */
  readonly durationMs: number;
}

export interface AudioSink {
  readonly connectionId: number;
  /** `mediaTimeMs`: the moment (ms of `performance.now()`) the frame's first sample stands for: when the model emitted it. */
  sendFrame(payloads: readonly Buffer[], rtpTimestamp: number, mediaTimeMs: number): void;
}

export class OutputAudioTrack {
  readonly name: string;
  readonly channels: 1 | 2;
  readonly #log: Logger;
  readonly #metrics: RuntimeMetrics | undefined;
  readonly #sinks = new Map<AudioSink, { paused: boolean }>();
  /**
   * Interleaved samples not yet played, each chunk with the moment (ms of `performance.now()`)
   * its first sample stands for: when the model emitted it (a chunk cut by a frame boundary
   * moves on by the samples taken) — or, for audio that video follows (`place()`), none: such a
   * frame stands for when it plays, its tick, as a frame of silence does.
   */
  #pending: Array<{ samples: Int16Array; atMs: number | undefined }> = [];
  /** Sees every 20 ms frame played to someone (the session's recorder), with its wall-clock time. */
  #frameTap: ((samples: Int16Array, wallTimeMs: number) => void) | undefined;

  /** Lets the recorder hear what is played (it copies what it keeps). */
  setFrameTap(tap: ((samples: Int16Array, wallTimeMs: number) => void) | undefined): void {
    this.#frameTap = tap;
  }
  #pendingSamples = 0;
  #roomWaiters: Array<() => void> = [];
  #encoder: Promise<OpusEncoder> | undefined;
  /** Encodes run one after another so packets leave in timestamp order. */
  #encodeChain: Promise<void> = Promise.resolve();
  #timer: NodeJS.Timeout | undefined;
  #startedAt = 0;
  #ticks = 0;
  #rtpTimestamp = Math.floor(Math.random() * 0xffffffff);
  #closed = false;

  constructor(spec: OutputAudioTrackSpec, log: Logger, metrics?: RuntimeMetrics) {
    this.name = spec.name;
    this.channels = spec.channels ?? 1;
    this.#log = log.child({ track: spec.name });
    this.#metrics = metrics;
    this.#startedAt = performance.now();
    this.#schedule();
  }

  async emit(frame: AudioFrame): Promise<void> {
    if (this.#closed) return;
    assertEmittableAudio(this.name, frame, AUDIO_SAMPLE_RATE);
    const samples = remix(frame.samples, frame.channels, this.channels);
    this.#metrics?.framesEmitted.inc({ track: this.name });
    while (!this.#closed && this.#bufferedMs() > MAX_BUFFERED_MS) {
      await new Promise<void>((resolve) => this.#roomWaiters.push(resolve));
    }
    if (this.#closed) return;
    this.#pending.push({ samples, atMs: performance.now() });
    this.#pendingSamples += samples.length;
  }

  /**
   * Queues a step's audio as one piece that the step's video is timed to (the adaptive track,
   * output-video-track.ts), and says where it falls: when its first sample plays, on this track's
   * clock, and for how long. Waits, as `emit` does, while more than MAX_BUFFERED_AUDIO_MS is
   * buffered (a model faster than real time is held to it), then queues every frame at once, so
   * the piece plays unbroken from `startMs`.
   *
   * Its frames are stamped with when they play (their tick), not when they were emitted: the
   * video beside them is stamped with its planned slots, which this placement sets, so both
   * streams' sender reports put a frame and its sound at the same moment.
   */
  async place(frames: readonly AudioFrame[]): Promise<AudioPlacement> {
    const pieces = frames.map((frame) => {
      assertEmittableAudio(this.name, frame, AUDIO_SAMPLE_RATE);
      return remix(frame.samples, frame.channels, this.channels);
    });
    while (!this.#closed && this.#bufferedMs() > MAX_BUFFERED_MS) {
      await new Promise<void>((resolve) => this.#roomWaiters.push(resolve));
    }
    const samples = pieces.reduce((n, piece) => n + piece.length, 0);
    const durationMs = (samples / this.channels / AUDIO_SAMPLE_RATE) * 1000;
    // The next frame the clock plays is due at tick #ticks + 1; what is buffered plays first.
    const startMs = this.#startedAt + (this.#ticks + 1) * FRAME_MS + this.#bufferedMs();
    if (this.#closed) return { startMs, durationMs };
    for (const piece of pieces) {
      this.#metrics?.framesEmitted.inc({ track: this.name });
      if (piece.length === 0) continue;
      this.#pending.push({ samples: piece, atMs: undefined });
      this.#pendingSamples += piece.length;
    }
    return { startMs, durationMs };
  }

  addSink(sink: AudioSink, options: { paused: boolean }): void {
    this.#sinks.set(sink, { paused: options.paused });
  }

  removeSink(sink: AudioSink): void {
    this.#sinks.delete(sink);
  }

  setPaused(sink: AudioSink, paused: boolean): void {
    const state = this.#sinks.get(sink);
    if (state) state.paused = paused;
  }

  close(): void {
    this.#closed = true;
    if (this.#timer) clearTimeout(this.#timer);
    for (const resolve of this.#roomWaiters.splice(0)) resolve();
    // Close the encoder after the encodes already queued, which then see #closed and skip.
    const encoder = this.#encoder;
    void this.#encodeChain
      .then(() => encoder)
      .then(
        (e) => e?.close(),
        () => {},
      );
  }

  #bufferedMs(): number {
    return (this.#pendingSamples / this.channels / AUDIO_SAMPLE_RATE) * 1000;
  }

  /** Drift-free: each tick is scheduled against the start time, not the previous tick. */
  #schedule(): void {
    if (this.#closed) return;
    const due = this.#startedAt + (this.#ticks + 1) * FRAME_MS;
    this.#timer = setTimeout(() => this.#tick(), Math.max(0, due - performance.now()));
  }

  #tick(): void {
    // After a stall (a blocked event loop), play the missed frames at once, up to 100 ms, then
    // skip the rest: the clock stays on the wall rather than drifting behind it.
    const dueTicks = Math.floor((performance.now() - this.#startedAt) / FRAME_MS);
    let frames = Math.min(dueTicks - this.#ticks, 5);
    if (dueTicks - this.#ticks > 5) {
      // The RTP clock skips with the wall clock (the receiver conceals the gap), so timestamps
      // keep meaning wall time and audio stays in sync with video.
      const skipped = dueTicks - 5 - this.#ticks;
      this.#ticks += skipped;
      this.#rtpTimestamp = (this.#rtpTimestamp + skipped * SAMPLES_PER_FRAME) >>> 0;
    }
    while (frames-- > 0) {
      this.#ticks++;
      const { samples, atMs } = this.#takeFrame();
      this.#playFrame(samples, atMs);
    }
    for (const resolve of this.#roomWaiters.splice(0)) resolve();
    this.#schedule();
  }

  /** The next 20 ms, and the moment its first sample stands for (undefined: it starts with silence). */
  #takeFrame(): { samples: Int16Array; atMs: number | undefined } {
    const needed = SAMPLES_PER_FRAME * this.channels;
    const out = new Int16Array(needed); // zero = silence for whatever the model did not fill
    let filled = 0;
    const atMs = this.#pending[0]?.atMs;
    while (filled < needed && this.#pending.length > 0) {
      const head = this.#pending[0]!;
      const take = Math.min(head.samples.length, needed - filled);
      out.set(head.samples.subarray(0, take), filled);
      filled += take;
      if (take === head.samples.length) this.#pending.shift();
      else
        this.#pending[0] = {
          samples: head.samples.subarray(take),
          atMs: head.atMs === undefined ? undefined : head.atMs + (take / this.channels / AUDIO_SAMPLE_RATE) * 1000,
        };
    }
    this.#pendingSamples -= filled;
    return { samples: out, atMs };
  }

  /**
   * `emittedAtMs`: when the model emitted the frame's first sample. That, not the tick it leaves
   * on, is the moment the frame stands for in sender reports: a model that emits a click with a
   * flash means them together, and the audio waits in its queue (one or two 20 ms frames) longer
   * than the video waits for its pacer — stamped by send time, audio lagged video by ~40 ms. A
   * frame of silence the model did not fill, or one of placed audio (`place()`), stands for its
   * tick.
   */
  #playFrame(samples: Int16Array, emittedAtMs: number | undefined): void {
    const timestamp = this.#rtpTimestamp;
    const mediaTimeMs = emittedAtMs ?? this.#startedAt + this.#ticks * FRAME_MS;
    this.#rtpTimestamp = (this.#rtpTimestamp + SAMPLES_PER_FRAME) >>> 0;
    const listeners = [...this.#sinks.entries()].filter(([, s]) => !s.paused).map(([sink]) => sink);
    if (listeners.length === 0) return;
    try {
      this.#frameTap?.(samples, performance.timeOrigin + mediaTimeMs);
    } catch (error) {
      this.#log.warn('the audio tap failed', { error });
    }
    const encoder = (this.#encoder ??= OpusEncoder.create({ sampleRate: AUDIO_SAMPLE_RATE, channels: this.channels }));
    this.#encodeChain = this.#encodeChain
      .then(() => encoder)
      .then((opus) => (this.#closed ? [] : opus.encode(samples)))
      .then((packets) => {
        for (const sink of listeners) {
          if (!this.#sinks.has(sink)) continue;
          for (const packet of packets) sink.sendFrame([packet], timestamp, mediaTimeMs);
          this.#metrics?.framesSent.inc({ track: this.name });
        }
      })
      .catch((error: unknown) => this.#log.error('audio frame could not be encoded', { error }));
  }
}

function remix(samples: Int16Array, from: number, to: 1 | 2): Int16Array {
  if (from === to) return samples;
  if (from === 1 && to === 2) {
    const out = new Int16Array(samples.length * 2);
    for (let i = 0; i < samples.length; i++) out[2 * i] = out[2 * i + 1] = samples[i]!;
    return out;
  }
  if (from === 2 && to === 1) {
    const out = new Int16Array(samples.length / 2);
    for (let i = 0; i < out.length; i++) out[i] = (samples[2 * i]! + samples[2 * i + 1]!) >> 1;
    return out;
  }
  throw new TypeError(`audio with ${from} channels is not supported (1 or 2)`);
}
