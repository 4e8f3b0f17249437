/**
 * Records one output video track as fMP4 segments, from one of two sources, frame by frame:
 *
 * - **The live stream's encoded frames** (`pushEncoded`), when the track sends an H.264 stream at
 *   its full size to some viewer: no second encode. Segments are cut at the live stream's
 *   keyframes; the recorder asks that encoder for one when a segment is due (every
 *   `segmentSeconds`, or at once when a clip needs the newest frames), which costs the viewers one
 *   keyframe per segment (docs/performance.md, "What recording costs"). The archive is then the
 *   live stream: its profile, and the bitrate its viewers' congestion control allows.
 * - **Its own encoder** (`push`: a copy of each raw frame), when no live stream fits (only VP8
 *   viewers, say) or the operator asked for it (`RecordingSettings.encoder: 'own'`): H.264 High at
 *   the recording's bitrate, independent of viewers, forcing a keyframe every `segmentSeconds`.
 *   It is opened on the first raw frame and closed once the live stream has taken over.
 *
 * Which source feeds it is the track's choice, per frame (output-video-track.ts). On a change of
 * source the open segment ends and the next starts at the new source's first keyframe (frames
 * before it could not be decoded and are dropped, counted); the new source may have other SPS/PPS,
 * which every keyframe carries in band (fmp4.ts: `avc3`). A segment is written when the next
 * keyframe that starts one (or the end) closes it, so its duration is exact; keyframes a viewer's
 * picture loss causes stay inside the open segment.
 *
 * Frames queue while the encoder works; past a few seconds of backlog new frames are dropped
 * (counted), so a slow machine loses recording frames rather than memory.
 *
 * ~440 lines: where segments start is decided as frames arrive and carried out as they are
 * written, over one backlog both sources share; the fMP4 boxes are fmp4.ts, the AAC aac-encoder.ts.
 */

import type { VideoFrame } from '../media/frames.ts';
import type { EncodedVideoFrame } from '../media/video-encoder.ts';
import type { VideoRecordingTap } from '../media/output-video-track.ts';
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
/** Where a recording's encode comes from (TrackRecorderOptions.encoder). */
export type RecordingEncoder = 'shared' | 'own';

export interface RecordedSegment {
  /** From 1, in order. */
  readonly sequence: number;
  /** The storage key. */
  readonly key: string;
  /** Wall-clock time of its first frame, ms since the epoch. */
  readonly startMs: number;
  readonly durationMs: number;
  /** Whose encode it holds (a change of source starts a segment): a live stream's, or the recorder's own. */
  readonly encoder: 'live' | 'own';
}

export interface TrackRecorderOptions {
  readonly storage: RecordingStorage;
  /** Key prefix, e.g. `<session id>/main_video`. */
  readonly prefix: string;
  readonly width: number;
  readonly height: number;
  readonly fps: number;
  /** Its own encoder's bitrate; default the track's. */
  readonly bitrateKbps?: number;
  /**
   * `shared` (default): take a live H.264 stream's encoded frames when the track sends one, its
   * own encoder otherwise; `own`: always its own encoder (H.264 High at `bitrateKbps`, an archive
   * independent of viewers, at the cost of a second encode).
   */
  readonly encoder?: RecordingEncoder;
  /** Target segment length; default 2 s. */
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

/**
 * A live encoder whose frames the recorder takes: identity tells sources apart (a new encoder, or
 * another stream, is another source), and it can be asked for a keyframe.
 */
export interface LiveVideoSource {
  requestKeyframe(): void;
}

/** The recorder's own encoder, as a source. */
const OWN_ENCODER = Symbol('own encoder');

type Source = LiveVideoSource | typeof OWN_ENCODER;

type PendingFrame =
  | { readonly kind: 'raw'; readonly frame: VideoFrame; readonly timeMs: number; readonly index: number }
  | {
      readonly kind: 'encoded';
      readonly data: Buffer;
      readonly keyframe: boolean;
      readonly source: LiveVideoSource;
      readonly timeMs: number;
      readonly index: number;
    };

export class TrackRecorder implements VideoRecordingTap {
  readonly sharesLiveEncoder: boolean;
  readonly #options: TrackRecorderOptions;
  readonly #segmentMs: number;
  #encoder: Promise<VideoEncoder> | undefined;
  readonly #backlog: Array<PendingFrame & { readonly startsSegment: boolean }> = [];
  #working: Promise<void> = Promise.resolve();
  #pumping = false;
  /** The open segment's samples (times relative to the first frame recorded). */
  #samples: Array<{ data: Buffer; keyframe: boolean; timeMs: number; index: number }> = [];
  /** The source of the open segment's samples. */
  #source: Source | undefined;
  /**
   * The same, as seen where frames arrive (push, pushEncoded), ahead of the encoder: where the
   * next segment starts is decided there, so a live encoder is asked for one keyframe per segment.
   */
  #arriving: { source: Source | undefined; segmentStartMs: number } = { source: undefined, segmentStartMs: -Infinity };
  /** The live source asked for a keyframe that has not come yet. */
  #keyframeAskedOf: LiveVideoSource | undefined;
  #firstFrameMs: number | undefined;
  #initKey: string | undefined;
  #sequence = 0;
  readonly #segments: RecordedSegment[] = [];
  /** Frames taken so far (dropped ones not counted); each frame's `index` is its place among them. */
  #taken = 0;
  /** Every frame up to this one is in a written segment, or was dropped. */
  #writtenThrough = 0;
  /** A cut is pending: the first frame taken after this one starts a new segment. */
  #cutAfter: number | undefined;
  #closed = false;
  #dropped = 0;
  readonly #recordedFrom = { live: 0, own: 0 };
  #aac: Promise<AacEncoder> | undefined;
  #audioChain: Promise<void> = Promise.resolve();
  /** Encoded audio not yet in a segment, with the wall-clock time of its first sample. */
  #audioPackets: Array<AacPacket & { wallMs: number }> = [];
  /** Where the audio stream's positions meet the wall clock. */
  #audioAnchor: { position: number; wallMs: number } | undefined;
  #audioWallMs: number | undefined;

  constructor(options: TrackRecorderOptions) {
    this.#options = options;
    this.sharesLiveEncoder = (options.encoder ?? 'shared') === 'shared';
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

  /** Frames in the recording by where their encode came from: a live stream's encoder, or the recorder's own. */
  get framesRecordedFrom(): { readonly live: number; readonly own: number } {
    return { ...this.#recordedFrom };
  }

  /** Whether the recorder's own encoder is open (it is closed once a live stream feeds the recording). */
  get ownEncoderOpen(): boolean {
    return this.#encoder !== undefined;
  }

  /** Takes a copy of `frame` (sent at wall-clock `timeMs`) for the recorder's own encoder; never blocks the live path. */
  push(frame: VideoFrame, timeMs: number): void {
    if (this.#closed) return;
    if (this.#backlog.length >= MAX_BACKLOG) {
      this.#dropped++;
      return;
    }
    const index = ++this.#taken;
    // A fresh or reopened encoder's first frame is a keyframe; an open one is asked for it (#record).
    const startsSegment = this.#segmentDue(OWN_ENCODER, timeMs, index);
    this.#enqueue({
      kind: 'raw',
      frame: { width: frame.width, height: frame.height, format: frame.format, data: new Uint8Array(frame.data) },
      timeMs,
      index,
      startsSegment,
    });
  }

  /**
   * Takes a copy of one H.264 access unit that `source` (a live stream's encoder) made of the
   * frame sent at wall-clock `timeMs`. Asks `source` for a keyframe when a segment is due, or when
   * it is new to the recording (its deltas are useless until then).
   */
  pushEncoded(unit: EncodedVideoFrame, timeMs: number, source: LiveVideoSource): void {
    if (this.#closed) return;
    if (unit.codec !== 'h264') throw new TypeError(`the recording is H.264; got ${unit.codec}`);
    if (this.#backlog.length >= MAX_BACKLOG) {
      this.#dropped++;
      return;
    }
    const index = ++this.#taken;
    let startsSegment = false;
    if (unit.keyframe) {
      if (this.#keyframeAskedOf === source) this.#keyframeAskedOf = undefined;
      startsSegment = this.#segmentDue(source, timeMs, index);
    } else if (this.#arriving.source !== source || this.#cutPending(index) || this.#segmentAged(timeMs, 1)) {
      if (this.#keyframeAskedOf !== source) {
        this.#keyframeAskedOf = source;
        source.requestKeyframe();
      }
    }
    this.#enqueue({ kind: 'encoded', data: Buffer.from(unit.data), keyframe: unit.keyframe, source, timeMs, index, startsSegment });
  }

  /**
   * Ends the open segment after every frame taken so far — the first frame taken after this call
   * starts a new one (a keyframe: forced from the recorder's own encoder, asked of a live one) —
   * and resolves once that segment is written, or at once when nothing is open. A clip then
   * includes every frame emitted before it was asked for, also those still waiting for the encoder
   * when it was (a loaded machine has a backlog).
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
    await this.#flushSegment(undefined, this.#taken);
    await this.#closeOwnEncoder();
    if (this.#aac) (await this.#aac.catch(() => undefined))?.close();
  }

  #audioEncoder(): Promise<AacEncoder> {
    this.#aac ??= AacEncoder.create({ sampleRate: AUDIO_SAMPLE_RATE, channels: this.#options.audio!.channels });
    return this.#aac;
  }

  #cutPending(index: number): boolean {
    return this.#cutAfter !== undefined && index > this.#cutAfter;
  }

  /**
   * Whether the open segment is at its length (less half a frame, for timing jitter) `framesAhead`
   * frames from now: a live encoder asked for a keyframe makes it of the next frame it encodes,
   * so it is asked one frame ahead.
   */
  #segmentAged(timeMs: number, framesAhead = 0): boolean {
    const frameMs = 1000 / this.#options.fps;
    return timeMs + framesAhead * frameMs - this.#arriving.segmentStartMs >= this.#segmentMs - frameMs / 2;
  }

  /** Whether a keyframe from `source` arriving now starts a segment; if so, notes that it does. */
  #segmentDue(source: Source, timeMs: number, index: number): boolean {
    const due = this.#arriving.source !== source || this.#cutPending(index) || this.#segmentAged(timeMs);
    if (due) {
      this.#arriving = { source, segmentStartMs: timeMs };
      if (this.#cutPending(index)) this.#cutAfter = undefined;
    }
    return due;
  }

  #enqueue(pending: PendingFrame & { readonly startsSegment: boolean }): void {
    this.#backlog.push(pending);
    if (!this.#pumping) {
      this.#pumping = true;
      this.#working = this.#pump();
    }
  }

  async #pump(): Promise<void> {
    try {
      for (let next = this.#backlog.shift(); next; next = this.#backlog.shift()) {
        try {
          if (next.kind === 'raw') await this.#record(next);
          else await this.#take(next.data, next.keyframe, next.timeMs, next.index, next.source, next.startsSegment);
        } catch (error) {
          this.#dropped++;
          this.#options.log.warn('recording a frame failed', { error });
        }
      }
    } finally {
      // In the same tick as the empty backlog was seen: cleared later (a `.finally` on the
      // promise), a frame pushed in between would wait, unpumped, for the next push.
      this.#pumping = false;
    }
  }

  /** Encodes a raw frame with the recorder's own encoder (opened on first use) and takes its output. */
  async #record(pending: Extract<PendingFrame, { kind: 'raw' }> & { readonly startsSegment: boolean }): Promise<void> {
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
    if (pending.startsSegment || this.#source !== OWN_ENCODER || this.#samples.length === 0) encoder.requestKeyframe();
    for (const unit of await encoder.encode(pending.frame)) {
      await this.#take(unit.data, unit.keyframe, pending.timeMs, pending.index, OWN_ENCODER, pending.startsSegment);
    }
  }

  /**
   * Adds one access unit to the recording: a keyframe that starts a segment (as decided where it
   * arrived, or because its source is new to the recording) writes the open one first; a frame
   * that cannot be decoded from what is recorded (a delta of a source whose keyframe has not
   * come) is dropped.
   */
  async #take(data: Buffer, keyframe: boolean, timeMs: number, index: number, source: Source, startsSegment: boolean): Promise<void> {
    const switched = source !== this.#source;
    if (keyframe && (startsSegment || switched || this.#samples.length === 0)) {
      await this.#flushSegment(timeMs, index - 1);
      this.#firstFrameMs ??= timeMs;
      this.#source = source;
      if (this.#initKey === undefined) await this.#writeInit(data);
      // The live stream has taken over: free the encoder's threads and frames until it is needed again.
      if (source !== OWN_ENCODER) await this.#closeOwnEncoder();
    } else if (switched || this.#samples.length === 0) {
      this.#dropped++;
      return;
    }
    this.#samples.push({ data, keyframe, timeMs, index });
    this.#recordedFrom[source === OWN_ENCODER ? 'own' : 'live']++;
  }

  async #writeInit(keyframe: Buffer): Promise<void> {
    const sets = parameterSets(keyframe);
    if (!sets) throw new Error('a keyframe without SPS/PPS');
    const { width, height } = this.#options;
    const key = `${this.#options.prefix}/init.mp4`;
    // The AAC configuration is known once its encoder opens, before any sound arrives.
    const aac = this.#options.audio ? await this.#audioEncoder() : undefined;
    const audio = aac ? { sampleRate: AUDIO_SAMPLE_RATE, channels: aac.channels, config: aac.config } : undefined;
    await this.#options.storage.write(key, initSegment({ video: { width, height, ...sets }, ...(audio ? { audio } : {}) }));
    this.#initKey = key;
  }

  async #closeOwnEncoder(): Promise<void> {
    const encoder = this.#encoder;
    if (!encoder) return;
    this.#encoder = undefined;
    (await encoder.catch(() => undefined))?.close();
  }

  /**
   * Writes the open segment; `endMs` is when the next one starts (undefined: the end, one frame
   * on); every frame through `throughIndex` has then been written or dropped.
   */
  async #flushSegment(endMs: number | undefined, throughIndex: number): Promise<void> {
    const samples = this.#samples;
    if (samples.length === 0) {
      this.#writtenThrough = Math.max(this.#writtenThrough, throughIndex);
      return;
    }
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
    const segment: RecordedSegment = {
      sequence,
      key,
      startMs: samples[0]!.timeMs,
      durationMs: end - samples[0]!.timeMs,
      encoder: this.#source === OWN_ENCODER ? 'own' : 'live',
    };
    this.#segments.push(segment);
    this.#sequence = sequence;
    this.#writtenThrough = Math.max(samples.at(-1)!.index, throughIndex);
    this.#options.onSegment?.(segment);
  }
}
