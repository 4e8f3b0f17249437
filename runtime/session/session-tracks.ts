/**
 * A session's media tracks, made from its model's declared tracks: the output tracks the model
 * emits on (each with its encoder's events reported, and tapped for the recording when the
 * runtime records), the input tracks it reads, and who
 * publishes each input track. One connection publishes an input track at a time; the claim rules
 * (explicit `publish_track`, or 2.9.0's first packet, never after an explicit unpublish) live here
 * so the message handler and the media bindings apply the same ones.
 */

import { ArclightError } from '../../protocol/errors.ts';
import type { JsonObject } from '../../protocol/json-schema.ts';
import type { SessionLogLevel } from '../../protocol/session-logs.ts';
import type { RuntimeEventSink } from '../events/runtime-event-log.ts';
import type { Logger } from '../../server-kit/log.ts';
import type { EncoderBackendRegistry } from '../media/encoder-backends.ts';
import type { RuntimeMetrics } from '../metrics.ts';
import type { ModelDefinition, OutputAudioTrackSpec, OutputVideoTrackSpec, TrackSpec } from '../model/definition.ts';
import type { RecordingRegistry } from '../recording/recording-registry.ts';
import type { InputFrameAnnotation } from '../media/input-frame-aligner.ts';
import { InputAudioTrack, InputVideoTrack } from '../media/input-tracks.ts';
import { OutputAudioTrack } from '../media/output-audio-track.ts';
import { OutputVideoTrack, type VideoEncoderEvents } from '../media/output-video-track.ts';
import type { BitrateBounds } from '../media/video-bitrate-adaptation.ts';

/** Encoder restarts reported at most this often per track (the session log, the event stream). */
const ENCODER_RESTART_REPORT_INTERVAL_MS = 1000;

/** Where what happens to a session's tracks is reported: the session's log and the runtime's event stream. */
export interface SessionReports {
  readonly sessionId: string;
  recordEvent(level: SessionLogLevel, message: string, fields?: JsonObject): void;
  readonly runtimeEvents?: RuntimeEventSink | undefined;
}

export class SessionTracks {
  readonly outputVideo = new Map<string, OutputVideoTrack>();
  readonly outputAudio = new Map<string, OutputAudioTrack>();
  readonly inputVideo = new Map<string, InputVideoTrack>();
  readonly inputAudio = new Map<string, InputAudioTrack>();
  /** Per input track, connections that unpublished it explicitly: their late packets claim nothing. */
  readonly #unpublished = new Map<string, Set<number>>();

  constructor(
    specs: readonly TrackSpec[],
    fps: number,
    log: Logger,
    metrics: RuntimeMetrics | undefined,
    reports: SessionReports,
    encoderBackends?: EncoderBackendRegistry,
    videoBitrate?: BitrateBounds,
  ) {
    for (const spec of specs) {
      if (spec.kind === 'video' && spec.direction === 'recvonly') {
        this.outputVideo.set(
          spec.name,
          new OutputVideoTrack(spec, fps, log, metrics, encoderEvents(spec.name, reports), encoderBackends, videoBitrate),
        );
      } else if (spec.kind === 'audio' && spec.direction === 'recvonly') {
        this.outputAudio.set(spec.name, new OutputAudioTrack(spec, log, metrics));
      } else if (spec.kind === 'video') {
        this.inputVideo.set(spec.name, new InputVideoTrack(spec.name));
      } else {
        this.inputAudio.set(spec.name, new InputAudioTrack(spec.name));
      }
    }
  }

  /**
   * Records the session's picture (and sound) for clips: one picture per recording, the output
   * video track `recordings.trackName` names, else the first one; the first output audio track.
   */
  record(recordings: RecordingRegistry, model: ModelDefinition<unknown>, publicUrl: string, log: Logger, reports: SessionReports): void {
    const wanted = recordings.trackName;
    const recorded = model.tracks.find(
      (t): t is OutputVideoTrackSpec => t.kind === 'video' && t.direction === 'recvonly' && (wanted === undefined || t.name === wanted),
    );
    if (wanted !== undefined && !recorded) {
      log.warn(`recording.track "${wanted}" is not an output video track of this model; the session is not recorded`);
    }
    const heard = model.tracks.find((t): t is OutputAudioTrackSpec => t.kind === 'audio' && t.direction === 'recvonly');
    if (!recorded) return;
    const recording = recordings.begin(
      reports.sessionId,
      {
        name: recorded.name,
        width: recorded.width,
        height: recorded.height,
        fps: model.fps,
        ...(recorded.bitrateKbps ? { bitrateKbps: recorded.bitrateKbps } : {}),
      },
      publicUrl,
      heard ? { channels: heard.channels ?? 1 } : undefined,
      (segment) => {
        reports.recordEvent('info', 'recording segment written', {
          track: recorded.name,
          sequence: segment.sequence,
          duration_ms: Math.round(segment.durationMs),
          encoder: segment.encoder,
        });
        reports.runtimeEvents?.publish({
          type: 'recording_segment',
          session_id: reports.sessionId,
          track: recorded.name,
          sequence: segment.sequence,
          duration_ms: Math.round(segment.durationMs),
          encoder: segment.encoder,
        });
      },
    );
    this.outputVideo.get(recorded.name)?.setRecorder(recording.recorder);
    if (heard) this.outputAudio.get(heard.name)?.setFrameTap((samples, wallTimeMs) => recording.recorder.pushAudio(samples, wallTimeMs));
  }

  input(name: string): InputVideoTrack | InputAudioTrack | undefined {
    return this.inputVideo.get(name) ?? this.inputAudio.get(name);
  }

  /**
   * Claims an input track for a connection; only one connection publishes a track at a time
   * (`holderIsLive`: whether the current publisher's connection is still ready).
   * `frameMetadata`: the publisher will annotate each video frame (`annotate`).
   */
  claim(connectionId: number, trackName: string, frameMetadata: boolean, holderIsLive: (connectionId: number) => boolean): void {
    const track = this.input(trackName);
    if (!track) throw new ArclightError('unknown_track', `The model has no input track "${trackName}".`);
    if (frameMetadata && !(track instanceof InputVideoTrack)) {
      throw new ArclightError('invalid_params', `Frame metadata is carried on input video tracks; "${trackName}" is audio.`, {
        field: '/frame_metadata',
      });
    }
    const holder = track.publisher;
    if (holder !== undefined && holder !== connectionId && holderIsLive(holder)) {
      throw new ArclightError('track_busy', `Input track "${trackName}" is published by connection ${holder}.`);
    }
    track.publisher = connectionId;
    this.#unpublished.get(trackName)?.delete(connectionId);
    if (track instanceof InputVideoTrack) track.expectAnnotations(frameMetadata);
  }

  /**
   * A packet of `trackName` arrived from a connection: whether that connection publishes the
   * track. A client that publishes without claiming (2.9.0) claims the track with its first
   * packet — unless it unpublished the track explicitly (then only publish_track claims it again).
   */
  claimByPacket(connectionId: number, trackName: string): boolean {
    const input = this.input(trackName);
    if (!input) return false;
    if (input.publisher === undefined && !this.#unpublished.get(trackName)?.has(connectionId)) input.publisher = connectionId;
    return input.publisher === connectionId;
  }

  /** Per-frame annotations from the publisher of an input video track (keyed by RTP timestamp). */
  annotate(connectionId: number, trackName: string, frames: ReadonlyArray<{ rtpTimestamp: number } & InputFrameAnnotation>): void {
    const track = this.inputVideo.get(trackName);
    if (!track) throw new ArclightError('unknown_track', `The model has no input video track "${trackName}".`);
    if (track.publisher !== connectionId || !track.expectsAnnotations) {
      throw new ArclightError('not_ready', `Publish "${trackName}" with frame_metadata: true before annotating its frames.`);
    }
    for (const { rtpTimestamp, ...annotation } of frames) track.annotate(rtpTimestamp, annotation);
  }

  /** An explicit unpublish: the claim is released and the connection's late packets claim nothing. */
  release(connectionId: number, trackName: string): void {
    const track = this.input(trackName);
    if (!track) throw new ArclightError('unknown_track', `The model has no input track "${trackName}".`);
    if (track.publisher === connectionId) track.publisher = undefined;
    // Its packets still in flight (or resent on NACK) must not claim the track back.
    let unpublished = this.#unpublished.get(trackName);
    if (!unpublished) this.#unpublished.set(trackName, (unpublished = new Set()));
    unpublished.add(connectionId);
  }

  /** Releases every input track the connection publishes (it was lost). */
  releaseAll(connectionId: number): void {
    for (const track of [...this.inputVideo.values(), ...this.inputAudio.values()]) {
      if (track.publisher === connectionId) track.publisher = undefined;
    }
  }

  /** Which kind of output track `track` is, if it is one. */
  outputKind(track: string): 'video' | 'audio' | undefined {
    return this.outputVideo.has(track) ? 'video' : this.outputAudio.has(track) ? 'audio' : undefined;
  }

  /** Closes every track (the session is ending): output video last, awaited, as its encoders flush. */
  async close(): Promise<void> {
    for (const track of this.outputAudio.values()) track.close();
    for (const track of this.inputVideo.values()) track.close();
    for (const track of this.inputAudio.values()) track.close();
    await Promise.all([...this.outputVideo.values()].map((t) => t.close()));
  }
}

function encoderEvents(track: string, reports: SessionReports): VideoEncoderEvents {
  // A last-candidate encoder that fails every frame is restarted every frame: report restarts
  // at most once a second, with how many were not reported; fallbacks always.
  let restartReportedAt = -Infinity;
  let restartsUnreported = 0;
  return {
    opened: (stream, backend) => {
      reports.recordEvent('info', 'video encoder opened', { track, stream, backend: backend.name, hardware: backend.hardware });
      reports.runtimeEvents?.publish({
        type: 'encoder_opened',
        session_id: reports.sessionId,
        track,
        codec: stream,
        backend: backend.name,
        hardware: backend.hardware,
      });
    },
    failed: (stream, backend, phase, action, reason) => {
      if (action === 'restart') {
        const now = performance.now();
        if (now - restartReportedAt < ENCODER_RESTART_REPORT_INTERVAL_MS) {
          restartsUnreported++;
          return;
        }
        restartReportedAt = now;
        if (restartsUnreported > 0) reason = `${reason} (${restartsUnreported} more restarts since the last report)`;
        restartsUnreported = 0;
      }
      reports.recordEvent(
        action === 'fallback' ? 'error' : 'warn',
        `video encoder failed (${phase}); ${action === 'fallback' ? 'its backend is demoted' : 'a fresh one follows'}`,
        { track, stream, backend: backend.name, phase, action, reason },
      );
      reports.runtimeEvents?.publish({
        type: 'encoder_failed',
        session_id: reports.sessionId,
        track,
        codec: stream,
        backend: backend.name,
        phase,
        action,
        reason,
      });
    },
  };
}
