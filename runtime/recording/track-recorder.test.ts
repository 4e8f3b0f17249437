/**
 * A cut (requestClip / requestRecording) ends the recording after every frame taken before it,
 * also the frames still waiting for the encoder: on a loaded machine the recorder has a backlog,
 * and a cut that closed the segment at whatever frame the encoder was on lost them.
 */
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../server-kit/log.ts';
import type { VideoFrame } from '../media/frames.ts';
import { MemoryRecordingStorage } from '../../test/support/memory-recording-storage.ts';
import { TrackRecorder, type RecordedSegment } from './track-recorder.ts';

const FPS = 30;
const FRAME_MS = 1000 / FPS;

function grey(shade: number): VideoFrame {
  const data = new Uint8Array(64 * 64 * 1.5).fill(128);
  data.fill(shade, 0, 64 * 64);
  return { width: 64, height: 64, format: 'i420', data };
}

describe('TrackRecorder.cut', () => {
  it('includes every frame taken before it, also those still waiting for the encoder', async () => {
    const segments: RecordedSegment[] = [];
    const recorder = new TrackRecorder({
      storage: new MemoryRecordingStorage(),
      prefix: 's/main_video',
      width: 64,
      height: 64,
      fps: FPS,
      log: createLogger({}, 'silent'),
      onSegment: (s) => segments.push(s),
    });
    const start = 1_000_000;
    // 30 frames at once: the encoder has taken at most the first when the cut is asked for.
    for (let i = 0; i < 30; i++) recorder.push(grey(16 + i), start + i * FRAME_MS);
    const cut = recorder.cut(10_000);
    // The frame after the cut starts the next segment, as a live model's next frame would.
    recorder.push(grey(200), start + 30 * FRAME_MS);
    await cut;
    const recorded = segments.reduce((sum, s) => sum + s.durationMs, 0);
    expect(segments[0]!.startMs).toBe(start);
    expect(Math.round(recorded / FRAME_MS), JSON.stringify(segments)).toBe(30);
    await recorder.close();
  }, 30_000);
});
