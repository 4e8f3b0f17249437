/**
 * The runtime's recordings, by session: begun with the session, closed when it ends, kept five
 * minutes more (the spec's "finished recording availability") and then deleted — after which
 * fetching any of it answers 410 `recording_gone`. Clips are answered here: a clip's playlist URL
 * (and every URL inside it) is presigned for 24 hours, so the file itself cannot outlive the
 * five-minute window even if its URL does.
 */

import { ArclightError } from '../../protocol/errors.ts';
import type { Logger } from '../../server-kit/log.ts';
import type { UrlSigner } from '../uploads/url-signer.ts';
import { clipPlaylist } from './hls-playlist.ts';
import type { RecordingStorage } from './recording-storage.ts';
import { SessionRecording } from './session-recording.ts';
import type { RecordedSegment, RecordingEncoder } from './track-recorder.ts';

export interface RecordingSettings {
  readonly storage: RecordingStorage;
  /**
   * The output video track to record, by name. Default: the model's first output (`recvonly`)
   * video track. One video track is recorded per session — a clip is one picture — with the
   * first output audio track beside it. A name the model has no output video track by fails
   * `startRuntime`; if a model reloaded by `arclight dev` drops the track, its sessions go
   * unrecorded (a warning in the log; clip requests fail with `recording_error`).
   */
  readonly track?: string;
  /** Target segment length; default 2 s (track-recorder.ts DEFAULT_SEGMENT_SECONDS). A clip holds up to one segment more than asked. */
  readonly segmentSeconds?: number;
  /**
   * Where the recording's H.264 comes from. `shared` (default): the live H.264 stream's encoded
   * frames whenever a viewer watches one (no second encode; the archive is that stream — its
   * profile and the bitrate its viewers' links allow — with a keyframe asked of it every segment),
   * and the recorder's own encoder while none does (only VP8 viewers, say). `own`: always the
   * recorder's own encoder (H.264 High at `bitrateKbps`): an archive independent of viewers, at
   * the cost of a second encode of every frame (docs/performance.md, "What recording costs").
   */
  readonly encoder?: RecordingEncoder;
  /** The recorder's own encoder's bitrate (quality); default the track's live bitrate. */
  readonly bitrateKbps?: number;
  /** requestClip's cap, never exceeded; default 300 s. At least the segment length (startRuntime refuses less). */
  readonly maxClipSeconds?: number;
  /** How long a finished recording stays; default 5 minutes. */
  readonly retainAfterEndMs?: number;
}

/** What a client gets for requestClip / requestRecording (a `clip_ready` reply). */
export interface ClipReply {
  readonly clip_id: string;
  readonly playlist_url: string;
  readonly duration_seconds: number;
  /** When the playlist URL stops working, ms since the epoch (24 h). */
  readonly expires_at: number;
}

export const CLIP_URL_LIFETIME_MS = 24 * 3600_000;
/** How long a finished session's recording (and its log) stays: the spec's five minutes. */
export const RECORDING_RETENTION_MS = 5 * 60_000;

interface Entry {
  readonly recording: SessionRecording;
  readonly publicUrl: string;
  endedAt?: number;
  removal?: NodeJS.Timeout;
}

export class RecordingRegistry {
  readonly #settings: RecordingSettings;
  readonly #signer: UrlSigner;
  readonly #log: Logger;
  readonly #now: () => number;
  readonly #entries = new Map<string, Entry>();
  /** Sessions whose recording was deleted: their URLs answer 410, not 404. */
  readonly #gone = new Set<string>();

  constructor(settings: RecordingSettings, signer: UrlSigner, log: Logger, now: () => number = Date.now) {
    this.#settings = settings;
    this.#signer = signer;
    this.#log = log;
    this.#now = now;
  }

  /** The output video track named to record (`RecordingSettings.track`), if one was. */
  get trackName(): string | undefined {
    return this.#settings.track;
  }

  /** Starts recording `track` of a new session; `publicUrl` is where its clients reach us. */
  begin(
    sessionId: string,
    track: { name: string; width: number; height: number; fps: number; bitrateKbps?: number },
    publicUrl: string,
    audio?: { channels: 1 | 2 },
    onSegment?: (segment: RecordedSegment) => void,
  ): SessionRecording {
    const recording = new SessionRecording({
      sessionId,
      ...(audio ? { audio } : {}),
      storage: this.#settings.storage,
      track: { ...track, ...(this.#settings.bitrateKbps ? { bitrateKbps: this.#settings.bitrateKbps } : {}) },
      ...(this.#settings.segmentSeconds ? { segmentSeconds: this.#settings.segmentSeconds } : {}),
      ...(this.#settings.encoder ? { encoder: this.#settings.encoder } : {}),
      ...(this.#settings.maxClipSeconds ? { maxClipSeconds: this.#settings.maxClipSeconds } : {}),
      log: this.#log.child({ session: sessionId, recording: track.name }),
      ...(onSegment ? { onSegment } : {}),
    });
    this.#entries.set(sessionId, { recording, publicUrl });
    return recording;
  }

  /** The session ended: the recording is finished, kept for the retention window, then deleted. */
  async ended(sessionId: string): Promise<void> {
    const entry = this.#entries.get(sessionId);
    if (!entry || entry.endedAt !== undefined) return;
    entry.endedAt = this.#now();
    await entry.recording.close().catch((error: unknown) => this.#log.warn('closing a recording failed', { error }));
    entry.removal = setTimeout(() => void this.#remove(sessionId), this.#settings.retainAfterEndMs ?? RECORDING_RETENTION_MS);
    entry.removal.unref();
  }

  /** A clip of the live session's last `durationSeconds` (> 0, checked where the request arrives; undefined: all of it). */
  async requestClip(sessionId: string, durationSeconds: number | undefined): Promise<ClipReply> {
    const entry = this.#entries.get(sessionId);
    if (!entry || entry.endedAt !== undefined) throw new ArclightError('recording_error', 'This session is not being recorded.');
    const clip = await entry.recording.clip(durationSeconds);
    const expiresAt = this.#now() + CLIP_URL_LIFETIME_MS;
    const path = `/sessions/${encodeURIComponent(sessionId)}/clips/${clip.id}/playlist.m3u8`;
    return {
      clip_id: clip.id,
      playlist_url: entry.publicUrl + this.#signer.sign('GET', path, expiresAt),
      duration_seconds: clip.durationSeconds,
      expires_at: Math.floor(expiresAt / 1000) * 1000,
    };
  }

  /** A clip's playlist, its URLs signed until `expiresAtSeconds` (the playlist URL's own expiry). */
  playlist(sessionId: string, clipId: string, expiresAtSeconds: number): string {
    const entry = this.#available(sessionId);
    const clip = entry.recording.clipById(clipId);
    if (!clip) throw new ArclightError('not_found', `No clip ${clipId} in this session.`);
    const expiresAt = expiresAtSeconds * 1000;
    const url = (key: string) =>
      this.#signer.sign('GET', `/sessions/${encodeURIComponent(sessionId)}/recording/${key.split('/').slice(1).join('/')}`, expiresAt);
    return clipPlaylist(
      url(clip.initKey),
      clip.segments.map((s) => ({ ...s, url: url(s.key) })),
    );
  }

  /** A recording file (`<track>/<file>`) of the session. */
  async file(sessionId: string, track: string, file: string): Promise<Buffer> {
    this.#available(sessionId);
    if (!/^[\w-]+$/.test(track) || !/^(init\.mp4|seg-\d{5}\.m4s)$/.test(file))
      throw new ArclightError('not_found', 'No such recording file.');
    return this.#settings.storage.read(`${sessionId}/${track}/${file}`);
  }

  async close(): Promise<void> {
    for (const [sessionId, entry] of this.#entries) {
      clearTimeout(entry.removal);
      if (entry.endedAt === undefined) await entry.recording.close().catch(() => undefined);
      await this.#settings.storage.removePrefix(sessionId).catch(() => undefined);
    }
    this.#entries.clear();
  }

  #available(sessionId: string): Entry {
    const entry = this.#entries.get(sessionId);
    const retain = this.#settings.retainAfterEndMs ?? RECORDING_RETENTION_MS;
    if (this.#gone.has(sessionId) || (entry?.endedAt !== undefined && this.#now() - entry.endedAt > retain)) {
      throw new ArclightError('recording_gone', 'Recordings are kept five minutes after their session ends; this one is gone.');
    }
    if (!entry) throw new ArclightError('not_found', 'No recording for this session.');
    return entry;
  }

  async #remove(sessionId: string): Promise<void> {
    this.#entries.delete(sessionId);
    this.#gone.add(sessionId);
    await this.#settings.storage
      .removePrefix(sessionId)
      .catch((error: unknown) => this.#log.warn('deleting a recording failed', { error }));
  }
}
