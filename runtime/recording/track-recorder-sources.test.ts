/**
 * The recorder's two sources (track-recorder.ts): a live stream's encoded frames (no second
 * encode) and its own encoder, and changes between them. Real x264 encoders on both sides, and the
 * recording read back with FFmpeg (node-av): every frame decodes, with the right picture and
 * duration, also across a change of source whose encoders have different parameter sets (the
 * live stream is Constrained Baseline, the recorder's own High).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Decoder, Demuxer } from 'node-av/api';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../server-kit/log.ts';
import { solidI420 } from '../media/frame-convert.ts';
import type { StreamVideoEncoder } from '../media/video-encoder.ts';
import { streamEncoders } from '../media/video-encoder-factory.ts';
import { MemoryRecordingStorage } from '../../test/support/memory-recording-storage.ts';
import { TrackRecorder, type LiveVideoSource, type RecordedSegment } from './track-recorder.ts';

const W = 160;
const H = 96;
const FPS = 30;
const FRAME_MS = 1000 / FPS;
const SEGMENT_SECONDS = 1;
const START_MS = 1_700_000_000_000;

/** A live stream's encoder as the track has it: Constrained Baseline, keyframes when asked (counted). */
class LiveStream implements LiveVideoSource {
  keyframesAsked = 0;
  private constructor(readonly encoder: StreamVideoEncoder) {}
  static async open(): Promise<LiveStream> {
    return new LiveStream(await streamEncoders.open({ codec: 'h264', width: W, height: H, fps: FPS }));
  }
  requestKeyframe(): void {
    this.keyframesAsked++;
    this.encoder.requestKeyframe();
  }
  close(): void {
    this.encoder.close();
  }
}

/** Frame i's luma: a ramp that wraps, so each second's pictures differ and can be told apart when decoded. */
const shadeOf = (i: number): number => 30 + ((i * 4) % 190);

interface Readback {
  readonly shades: number[];
  readonly seconds: number;
  readonly profiles: Set<number>;
}

/** Joins init + segments into one MP4 (a clip download) and decodes it with FFmpeg: each picture's mean luma, and the duration. */
async function readBack(storage: MemoryRecordingStorage, recorder: TrackRecorder, segments: readonly RecordedSegment[]): Promise<Readback> {
  const file = Buffer.concat([storage.objects.get(recorder.initKey!)!, ...segments.map((s) => storage.objects.get(s.key)!)]);
  const path = join(mkdtempSync(join(tmpdir(), 'recorder-sources-')), 'clip.mp4');
  writeFileSync(path, file);
  const demuxer = await Demuxer.open(path);
  const stream = demuxer.video()!;
  const decoder = await Decoder.create(stream);
  const shades: number[] = [];
  let endSeconds = 0;
  const profiles = new Set<number>();
  const take = (frames: Awaited<ReturnType<typeof decoder.decodeAll>>): void => {
    for (const frame of frames) {
      const luma = frame.data![0]!;
      const stride = frame.linesize[0]!;
      let sum = 0;
      for (let y = 0; y < H; y++) for (let x = 0; x < W; x++) sum += luma[y * stride + x]!;
      shades.push(Math.round(sum / (W * H)));
      frame.free();
    }
  };
  for (const packet of demuxer.packetsSync()) {
    if (!packet) continue;
    if (packet.streamIndex === stream.index) {
      endSeconds = Math.max(endSeconds, (Number(packet.pts + packet.duration) * stream.timeBase.num) / stream.timeBase.den);
      // In-band SPS (avc3): length-prefixed NAL units; type 7's first byte after the header is profile_idc.
      const data = packet.data!;
      for (let at = 0; at + 4 < data.length;) {
        const length = data.readUInt32BE(at);
        if ((data[at + 4]! & 0x1f) === 7) profiles.add(data[at + 5]!);
        at += 4 + length;
      }
      take(await decoder.decodeAll(packet));
    }
    packet.free();
  }
  take(await decoder.decodeAll(null));
  await demuxer.close();
  return { shades, seconds: endSeconds, profiles };
}

describe('TrackRecorder sources', () => {
  const cleanups: Array<() => void> = [];
  afterEach(() => {
    for (const cleanup of cleanups.splice(0)) cleanup();
  });

  function newRecorder(encoder?: 'shared' | 'own'): {
    recorder: TrackRecorder;
    storage: MemoryRecordingStorage;
    segments: RecordedSegment[];
  } {
    const storage = new MemoryRecordingStorage();
    const segments: RecordedSegment[] = [];
    const recorder = new TrackRecorder({
      storage,
      prefix: 's/main_video',
      width: W,
      height: H,
      fps: FPS,
      segmentSeconds: SEGMENT_SECONDS,
      ...(encoder ? { encoder } : {}),
      log: createLogger({}, 'silent'),
      onSegment: (s) => segments.push(s),
    });
    return { recorder, storage, segments };
  }

  /** Frames [from, to) through the live stream: encoded once, handed to the recorder as the track does. */
  async function live(recorder: TrackRecorder, stream: LiveStream, from: number, to: number): Promise<void> {
    for (let i = from; i < to; i++) {
      const units = await stream.encoder.encode(solidI420(W, H, shadeOf(i), 128, 128));
      for (const unit of units) recorder.pushEncoded(unit, START_MS + i * FRAME_MS, stream);
    }
  }

  /**
   * Frames [from, to) as raw frames for the recorder's own encoder, then waits until it has
   * encoded them: a live track sends at 30 fps, which the encoder keeps up with, where this
   * loop pushes far faster and would fill the recorder's backlog.
   */
  async function raw(recorder: TrackRecorder, from: number, to: number): Promise<void> {
    const before = recorder.framesRecordedFrom.own;
    for (let i = from; i < to; i++) recorder.push(solidI420(W, H, shadeOf(i), 128, 128), START_MS + i * FRAME_MS);
    const deadline = Date.now() + 30_000;
    while (recorder.framesRecordedFrom.own < before + (to - from) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  it('shares the live encoder: no encoder of its own, one keyframe asked per segment, segments at its keyframes', async () => {
    const { recorder, storage, segments } = newRecorder();
    expect(recorder.sharesLiveEncoder).toBe(true);
    const stream = await LiveStream.open();
    cleanups.push(() => stream.close());
    const frames = 4 * FPS;
    await live(recorder, stream, 0, frames);
    await recorder.close();

    expect(recorder.ownEncoderOpen).toBe(false);
    expect(recorder.framesRecordedFrom).toEqual({ live: frames, own: 0 });
    // Segments of 1 s: the stream's first keyframe opened the first; each later one was asked for
    // once, a frame ahead (at frames 29, 59, 89 and 119, the last for a segment not begun).
    expect(segments.map((s) => Math.round(s.durationMs / FRAME_MS))).toEqual([30, 30, 30, 30]);
    expect(stream.keyframesAsked).toBe(4);
    const back = await readBack(storage, recorder, segments);
    expect(back.shades).toHaveLength(frames);
    back.shades.forEach((shade, i) => expect(Math.abs(shade - shadeOf(i)), `frame ${i}`).toBeLessThanOrEqual(3));
    expect(back.seconds).toBeCloseTo(frames / FPS, 2);
    expect(back.profiles).toEqual(new Set([66])); // Constrained Baseline: the live stream's own bytes
  }, 60_000);

  it('changes source mid-recording (own → live → own), and the joined recording decodes whole', async () => {
    const { recorder, storage, segments } = newRecorder();
    const stream = await LiveStream.open();
    cleanups.push(() => stream.close());
    // A VP8 viewer only (no live H.264): its own encoder. Then an H.264 viewer joins whose
    // stream is already running (its keyframe must be asked for), then leaves.
    await raw(recorder, 0, 45);
    const warm = await stream.encoder.encode(solidI420(W, H, 0, 128, 128)); // the stream began before
    expect(warm.some((u) => u.keyframe)).toBe(true);
    await live(recorder, stream, 45, 90);
    await raw(recorder, 90, 135);
    await recorder.close();

    const from = recorder.framesRecordedFrom;
    // Only the live delta that came before its asked-for keyframe is lost.
    expect(from.live).toBe(44);
    expect(from.own).toBe(90);
    expect(recorder.framesDropped).toBe(1);
    // Once on arrival (its deltas are useless without one), once for the segment due a second later.
    expect(stream.keyframesAsked).toBe(2);
    expect(recorder.ownEncoderOpen).toBe(false); // closed once the live stream took over, and at the end
    const back = await readBack(storage, recorder, segments);
    // Both encoders' parameter sets are in the file, each keyframe carrying its own (avc3).
    expect(back.profiles).toEqual(new Set([66, 100]));
    const expected = [...Array(135).keys()].filter((i) => i !== 45).map(shadeOf);
    expect(back.shades).toHaveLength(expected.length);
    back.shades.forEach((shade, i) => expect(Math.abs(shade - expected[i]!), `picture ${i}`).toBeLessThanOrEqual(3));
    // Its timeline is the wall clock: the lost frame's slot is held by the one before it.
    expect(back.seconds).toBeCloseTo(135 / FPS, 2);
  }, 60_000);

  it('a cut asks the live stream for a keyframe and ends the segment with the newest frame', async () => {
    const { recorder, segments } = newRecorder();
    const stream = await LiveStream.open();
    cleanups.push(() => stream.close());
    await live(recorder, stream, 0, 20);
    const asked = stream.keyframesAsked;
    const cut = recorder.cut(10_000);
    await live(recorder, stream, 20, 22);
    await cut;
    expect(stream.keyframesAsked).toBe(asked + 1);
    // The frame after the cut was encoded before the ask reached the encoder: it ends the segment.
    expect(segments).toHaveLength(1);
    expect(Math.round(segments[0]!.durationMs / FRAME_MS)).toBe(21);
    await recorder.close();
  }, 60_000);

  it('with encoder "own", it does not take the live stream', () => {
    expect(newRecorder('own').recorder.sharesLiveEncoder).toBe(false);
  });
});
