/**
 * A session's recording and its clips. One output video track of the session is recorded (the first,
 * or the one `recording.track` names), with its first output audio track
 * (track-recorder.ts); a clip is a run of finished segments — the last N seconds (at least N,
 * starting at a segment boundary, so up to one segment more), or everything recorded — taken
 * after cutting the open segment so it ends with the newest frame.
 */

import { randomUUID } from 'node:crypto';
import { ArclightError } from '../../protocol/errors.ts';
import type { Logger } from '../../server-kit/log.ts';
import type { RecordingStorage } from './recording-storage.ts';
import { TrackRecorder, type RecordedSegment, type RecordingEncoder } from './track-recorder.ts';

export interface Clip {
  readonly id: string;
  readonly initKey: string;
  readonly segments: readonly RecordedSegment[];
  readonly durationSeconds: number;
}

export interface SessionRecordingOptions {
  readonly sessionId: string;
  readonly storage: RecordingStorage;
  readonly track: {
    readonly name: string;
    readonly width: number;
    readonly height: number;
    readonly fps: number;
    readonly bitrateKbps?: number;
  };
  /** The session's first output audio track, recorded alongside (AAC). */
  readonly audio?: { readonly channels: 1 | 2 };
  readonly segmentSeconds?: number;
  /** Where the recording's encode comes from; default `shared` (TrackRecorderOptions.encoder). */
  readonly encoder?: RecordingEncoder;
  /** The longest clip (requestClip is capped to it); default 300 s. */
  readonly maxClipSeconds?: number;
  readonly log: Logger;
  readonly onSegment?: (segment: RecordedSegment) => void;
}

export const DEFAULT_MAX_CLIP_SECONDS = 300;

export class SessionRecording {
  readonly sessionId: string;
  readonly trackName: string;
  readonly recorder: TrackRecorder;
  readonly maxClipSeconds: number;
  readonly #clips = new Map<string, Clip>();

  constructor(options: SessionRecordingOptions) {
    this.sessionId = options.sessionId;
    this.trackName = options.track.name;
    this.maxClipSeconds = options.maxClipSeconds ?? DEFAULT_MAX_CLIP_SECONDS;
    this.recorder = new TrackRecorder({
      storage: options.storage,
      prefix: `${options.sessionId}/${options.track.name}`,
      width: options.track.width,
      height: options.track.height,
      fps: options.track.fps,
      ...(options.track.bitrateKbps ? { bitrateKbps: options.track.bitrateKbps } : {}),
      ...(options.segmentSeconds ? { segmentSeconds: options.segmentSeconds } : {}),
      ...(options.encoder ? { encoder: options.encoder } : {}),
      ...(options.audio ? { audio: options.audio } : {}),
      log: options.log,
      ...(options.onSegment ? { onSegment: options.onSegment } : {}),
    });
  }

  /**
   * A clip of the last `durationSeconds` (capped at `maxClipSeconds`), or of everything recorded
   * when undefined. Throws `recording_error` when nothing has been recorded yet.
   *
   * The clip ends with the newest frame (the open segment is cut first) and starts at a segment
   * boundary — a keyframe — so it holds whole segments: at least the asked length (when that much
   * is recorded) and less than one segment more. It never holds more than `maxClipSeconds`: where
   * the boundary that would cover the asked length lies past the cap, the clip starts at the next
   * one instead, under one segment short of the cap.
   */
  async clip(durationSeconds: number | undefined): Promise<Clip> {
    await this.recorder.cut();
    const all = this.recorder.segments;
    const initKey = this.recorder.initKey;
    if (!initKey || all.length === 0) {
      throw new ArclightError(
        'recording_error',
        'Nothing has been recorded yet: the recording starts with the first frame a client receives.',
      );
    }
    const segments = durationSeconds === undefined ? all : clipSegments(all, durationSeconds, this.maxClipSeconds);
    const clip: Clip = {
      id: randomUUID(),
      initKey,
      segments,
      durationSeconds: segments.reduce((sum, s) => sum + s.durationMs, 0) / 1000,
    };
    this.#clips.set(clip.id, clip);
    return clip;
  }

  clipById(id: string): Clip | undefined {
    return this.#clips.get(id);
  }

  async close(): Promise<void> {
    await this.recorder.close();
  }
}

/**
 * The newest segments that make a clip of `askedSeconds` under a cap of `capSeconds` (see
 * SessionRecording#clip): a suffix of `all`, covering the asked length (or all there is) with
 * less than one segment to spare, and no longer than the cap — then it starts one boundary later,
 * less than one segment short of the cap. Only a newest segment longer than the cap on its own is
 * returned over it (the cap is at least the segment length, so only by a frame).
 */
export function clipSegments<S extends { readonly durationMs: number }>(
  all: readonly S[],
  askedSeconds: number,
  capSeconds: number,
): readonly S[] {
  // Whole milliseconds, as segment durations are: 4.012 × 1000 is 4011.999…, which would refuse
  // a segment that fits the cap exactly.
  const capMs = Math.round(capSeconds * 1000);
  const wanted = Math.min(Math.round(askedSeconds * 1000), capMs);
  let covered = 0;
  let first = all.length;
  while (first > 0 && covered < wanted && covered + all[first - 1]!.durationMs <= capMs) covered += all[--first]!.durationMs;
  if (first === all.length && all.length > 0) first = all.length - 1;
  return all.slice(first);
}
