/**
 * Records one output video track as fMP4 segments: every frame the track sends is copied (the
 * live path keeps its own buffer), encoded by a separate H.264 encoder at the recording's quality
 * (off the live encoder, so viewers' keyframes and bitrate adaptation never shape the archive),
 * and cut into segments at keyframes it forces every `segmentSeconds` — or at once when a clip
 * needs the newest frames (`cut()`). A segment is written when the next keyframe (or the end)
 * closes it, so its duration is exact.
 *
 * Frames queue while the encoder works; past a few seconds of backlog new frames are dropped
 * (counted), so a slow machine loses recording frames rather than memory.
 */

import type { VideoFrame } from '../media/frames.ts';
import { VideoEncoder } from '../media/video-encoder-factory.ts';
import type { Logger } from '../../server-kit/log.ts';
import { AacEncoder, type AacPacket } from './aac-encoder.ts';
import { AUDIO_TRACK_ID, TIMESCALE, VIDEO_TRACK_ID, initSegment, mediaSegment, parameterSets, type TrackFragment } from './fmp4.ts';
import type { RecordingStorage } from './recording-storage.ts';

/**
 * Target segment length. A clip starts at a segment boundary, so it holds up to one segment more
 * than asked: 2 s keeps that excess under 2 s, where 4 s (the first default) let requestClip(5)
 * return up to 9 s. The cost — a keyframe every 2 s instead of 4 in the recording's own stream —
 * is measured by bench/clip-segments.ts (docs/performance.md, "Clip segments").
 */
export const DEFAULT_SEGMENT_SECONDS = 2;
export interface RecordedSegment {
  /** From 1, in order. */
  readonly sequence: number;
  /** The storage key. */
  readonly key: string;
  /** Wall-clock time of its first frame, ms since the epoch. */
  readonly startMs: number;
  readonly durationMs: number;
}

export interface TrackRecorderOptions {
  readonly storage: RecordingStorage;
  /** Key prefix, e.g. `<session id>/main_video`. */
  readonly prefix: string;
  readonly width: number;
  readonly height: number;
  readonly fps: number;
  readonly bitrateKbps?: number;
  /** Target segment length; default 4 s. */
  readonly segmentSeconds?: number;
  /** Also records this audio (48 kHz, AAC) into the same segments. */
  readonly audio?: { readonly channels: 1 | 2 };
  readonly log: Logger;
  /** Told of each segment once it is written (the session log and the runtime's event stream). */
  readonly onSegment?: (segment: RecordedSegment) => void;
}

const AUDIO_SAMPLE_RATE = 48_000;

/** Frames that may wait for the encoder: ~3 s at 30 fps. */
const MAX_BACKLOG = 90;

interface PendingFrame {
  readonly frame: VideoFrame;
  readonly timeMs: number;
  /** Its place among the frames taken (1, 2, …): what a cut promises to include. */
  readonly index: number;
}

export class TrackRecorder {
  readonly #options: TrackRecorderOptions;
  readonly #segmentMs: number;
  #encoder: Promise<VideoEncoder> | undefined;
  readonly #backlog: PendingFrame[] = [];
  #working: Promise<void> = Promise.resolve();
  #pumping = false;
  /** The open segment's samples (times relative to the first frame recorded). */
  #samples: Array<{ data: Buffer; keyframe: boolean; timeMs: number; index: number }> = [];
  #segmentStartMs = 0;
  #firstFrameMs: number | undefined;
  #initKey: string | undefined;
  #sequence = 0;
  readonly #segments: RecordedSegment[] = [];
  /** Frames taken so far (dropped ones not counted). */
  #taken = 0;
  /** The newest frame in a written segment. */
  #writtenThrough = 0;
  /** A cut is pending: the first frame taken after this one starts a new segment. */
  #cutAfter: number | undefined;
  #closed = false;
  #dropped = 0;
  #aac: Promise<AacEncoder> | undefined;
  #audioChain: Promise<void> = Promise.resolve();
  /** Encoded audio not yet in a segment, with the wall-clock time of its first sample. */
  #audioPackets: Array<AacPacket & { wallMs: number }> = [];
  /** Where the audio stream's positions meet the wall clock. */
  #audioAnchor: { position: number; wallMs: number } | undefined;
  #audioWallMs: number | undefined;

  constructor(options: TrackRecorderOptions) {
    this.#options = options;
    this.#segmentMs = (options.segmentSeconds ?? DEFAULT_SEGMENT_SECONDS) * 1000;
  }

  /** The init segment's key, once the first keyframe has been recorded. */
  get initKey(): string | undefined {
    return this.#initKey;
  }

  /** Finished segments, oldest first. */
  get segments(): readonly RecordedSegment[] {
    return this.#segments;
  }

  get framesDropped(): number {
    return this.#dropped;
  }

  /** Takes a copy of `frame` (sent at wall-clock `timeMs`); never blocks the live path. */
  push(frame: VideoFrame, timeMs: number): void {
    if (this.#closed) return;
    if (this.#backlog.length >= MAX_BACKLOG) {
      this.#dropped++;
      return;
    }
    this.#backlog.push({
      frame: { width: frame.width, height: frame.height, format: frame.format, data: new Uint8Array(frame.data) },
      timeMs,
      index: ++this.#taken,
    });
    if (!this.#pumping) {
      this.#pumping = true;
      this.#working = this.#pump().finally(() => (this.#pumping = false));
    }
  }

  /**
   * Ends the open segment after every frame taken so far — the first frame taken after this call
   * starts a new one (a forced keyframe) — and resolves once that segment is written, or at once
   * when nothing is open. A clip then includes every frame emitted before it was asked for, also
   * those still waiting for the encoder when it was (a loaded machine has a backlog).
   */
  async cut(timeoutMs = 5_000): Promise<void> {
    if (this.#samples.length === 0 && this.#backlog.length === 0) return;
    const through = this.#taken;
    this.#cutAfter = Math.max(this.#cutAfter ?? 0, through);
    const deadline = Date.now() + timeoutMs;
    while (this.#writtenThrough < through && Date.now() < deadline && !this.#closed) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  /**
   * Takes 48 kHz interleaved s16 audio that started playing at wall-clock `wallMs`. Audio before
   * the first video frame is not kept: the recording's timeline starts with the picture.
   */
  pushAudio(samples: Int16Array, wallMs: number): void {
    if (this.#closed || !this.#options.audio || this.#firstFrameMs === undefined) return;
    const copy = samples.slice();
    this.#audioWallMs ??= wallMs;
    this.#audioChain = this.#audioChain
      .then(async () => {
        const aac = await this.#audioEncoder();
        for (const packet of await aac.encode(copy)) {
          this.#audioAnchor ??= { position: packet.position, wallMs: this.#audioWallMs! };
          const wall = this.#audioAnchor.wallMs + ((packet.position - this.#audioAnchor.position) / AUDIO_SAMPLE_RATE) * 1000;
          this.#audioPackets.push({ ...packet, wallMs: wall });
        }
      })
      .catch((error: unknown) => this.#options.log.warn('recording audio failed', { error }));
  }

  /** Writes what is open and stops. */
  async close(): Promise<void> {
    this.#closed = true;
    await this.#working;
    await this.#audioChain;
    await this.#flushSegment(undefined);
    if (this.#encoder) (await this.#encoder.catch(() => undefined))?.close();
    if (this.#aac) (await this.#aac.catch(() => undefined))?.close();
  }

  #audioEncoder(): Promise<AacEncoder> {
    this.#aac ??= AacEncoder.create({ sampleRate: AUDIO_SAMPLE_RATE, channels: this.#options.audio!.channels });
    return this.#aac;
  }

  async #pump(): Promise<void> {
    for (let next = this.#backlog.shift(); next; next = this.#backlog.shift()) {
      try {
        await this.#record(next);
      } catch (error) {
        this.#dropped++;
        this.#options.log.warn('recording a frame failed', { error });
      }
    }
  }

  async #record({ frame, timeMs, index }: PendingFrame): Promise<void> {
    const { width, height, fps, bitrateKbps } = this.#options;
    // Always on node-av's thread pool (syncBelowMs 0): the archive can wait a frame, the live
    // path's event loop should not wait for the archive.
    this.#encoder ??= VideoEncoder.create({
      codec: 'h264',
      width,
      height,
      fps,
      profile: 'high',
      syncBelowMs: 0,
      ...(bitrateKbps ? { bitrateKbps } : {}),
    });
    const encoder = await this.#encoder;
    this.#firstFrameMs ??= timeMs;
    const cutDue = this.#cutAfter !== undefined && index > this.#cutAfter;
    const due = this.#samples.length === 0 || cutDue || timeMs - this.#segmentStartMs >= this.#segmentMs;
    if (due) encoder.requestKeyframe();
    for (const unit of await encoder.encode(frame)) {
      if (unit.keyframe) {
        await this.#flushSegment(timeMs);
        if (cutDue) this.#cutAfter = undefined;
        this.#segmentStartMs = timeMs;
        if (this.#initKey === undefined) {
          const sets = parameterSets(unit.data);
          if (!sets) throw new Error('a keyframe without SPS/PPS');
          const key = `${this.#options.prefix}/init.mp4`;
          // The AAC configuration is known once its encoder opens, before any sound arrives.
          const aac = this.#options.audio ? await this.#audioEncoder() : undefined;
          const audio = aac ? { sampleRate: AUDIO_SAMPLE_RATE, channels: aac.channels, config: aac.config } : undefined;
          await this.#options.storage.write(key, initSegment({ video: { width, height, ...sets }, ...(audio ? { audio } : {}) }));
          this.#initKey = key;
        }
      } else if (this.#samples.length === 0) {
        continue; // a segment starts at a keyframe
      }
      this.#samples.push({ data: unit.data, keyframe: unit.keyframe, timeMs, index });
    }
  }

  /** Writes the open segment; `endMs` is when the next one starts (undefined: the end, one frame on). */
  async #flushSegment(endMs: number | undefined): Promise<void> {
    const samples = this.#samples;
    if (samples.length === 0) return;
    this.#samples = [];
    const frameMs = 1000 / this.#options.fps;
    const end = endMs ?? samples.at(-1)!.timeMs + frameMs;
    const origin = this.#firstFrameMs!;
    const ticks = (ms: number) => Math.round((ms - origin) * (TIMESCALE / 1000));
    const video: TrackFragment = {
      trackId: VIDEO_TRACK_ID,
      time: ticks(samples[0]!.timeMs),
      samples: samples.map((s, i) => {
        const next = i + 1 < samples.length ? samples[i + 1]!.timeMs : end;
        return { data: s.data, keyframe: s.keyframe, duration: Math.max(1, ticks(next) - ticks(s.timeMs)) };
      }),
    };
    const fragments: TrackFragment[] = [video];
    // The audio that started before this segment's end goes with it (the rest waits for the next).
    const cut = endMs === undefined ? this.#audioPackets.length : this.#audioPackets.findIndex((p) => p.wallMs >= end);
    const audio = this.#audioPackets.splice(0, cut === -1 ? this.#audioPackets.length : cut).filter((p) => p.wallMs >= origin);
    if (audio.length > 0 && this.#audioAnchor) {
      const anchorTime = Math.round(((this.#audioAnchor.wallMs - origin) / 1000) * AUDIO_SAMPLE_RATE);
      fragments.push({
        trackId: AUDIO_TRACK_ID,
        time: Math.max(0, anchorTime + audio[0]!.position - this.#audioAnchor.position),
        samples: audio.map((p) => ({ data: p.data, duration: 1024, keyframe: true })),
      });
    }
    const sequence = this.#sequence + 1;
    const key = `${this.#options.prefix}/seg-${String(sequence).padStart(5, '0')}.m4s`;
    await this.#options.storage.write(key, mediaSegment(sequence, fragments));
    const segment = { sequence, key, startMs: samples[0]!.timeMs, durationMs: end - samples[0]!.timeMs };
    this.#segments.push(segment);
    this.#sequence = sequence;
    this.#writtenThrough = samples.at(-1)!.index;
    this.#options.onSegment?.(segment);
  }
}
