/**
 * OutputVideoTrack against a recording sink (a stand-in for a WebRTC connection; the encoder is
 * the real libx264): the order and timing of what one viewer receives.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../server-kit/log.ts';
import { RuntimeMetrics } from '../metrics.ts';
import { clearVideoEncodeFaults, failNextVideoEncodes, pendingVideoEncodeFaults } from '../faults/encoder-faults.ts';
import { solidI420 } from './frame-convert.ts';
import { openVideoEncoderCount } from './open-encoders.ts';
import { OutputVideoTrack, type VideoSink } from './output-video-track.ts';
import type { VideoCodec } from './video-encoder.ts';

const WIDTH = 64;
const HEIGHT = 64;

interface Received {
  mediaTimeMs: number;
  rtpTimestamp: number;
  keyframe: boolean;
  /** Sent after every injected encoder fault had fired. */
  afterFaults: boolean;
}

/** H.264 RTP: an IDR slice, or SPS/PPS aggregated ahead of one, opens a keyframe. */
function isKeyframe(payloads: readonly Buffer[]): boolean {
  const first = payloads[0]!;
  const type = first[0]! & 0x1f;
  if (type === 24 || type === 7 || type === 5) return true;
  return type === 28 && (first[1]! & 0x1f) === 5;
}

/** Set when a test arms encoder faults, so a sink can tell frames sent once they have all fired. */
let faultsArmed = false;

function recordingSink(received: Received[], codec: VideoCodec = 'h264'): VideoSink {
  return {
    connectionId: 1,
    codec,
    sendFrame(payloads, rtpTimestamp, mediaTimeMs) {
      received.push({
        mediaTimeMs,
        rtpTimestamp,
        keyframe: isKeyframe(payloads),
        afterFaults: faultsArmed && pendingVideoEncodeFaults() === 0,
      });
      return rtpTimestamp;
    },
  };
}

function metricValue(
  metrics: RuntimeMetrics,
  name: 'videoEncoderFailures' | 'framesDropped' | 'playoutFps' | 'productionFps',
  labels: Record<string, string>,
): Promise<number> {
  return metrics[name]
    .get()
    .then((m) =>
      m.values
        .filter((v) => Object.entries(labels).every(([k, val]) => (v.labels as Record<string, string | number | undefined>)[k] === val))
        .reduce((sum, v) => sum + v.value, 0),
    );
}

/** Emits a picture until `done()` or `limit` frames. */
async function emitUntil(track: OutputVideoTrack, done: () => boolean, limit = 300): Promise<void> {
  const picture = solidI420(WIDTH, HEIGHT, 80, 90, 200);
  for (let i = 0; i < limit && !done(); i++) await track.emit(picture);
}

afterEach(() => {
  clearVideoEncodeFaults();
  faultsArmed = false;
});

describe('OutputVideoTrack', () => {
  it('never sends a viewer a frame stamped before one it already has, when a black frame overtakes an encode', async () => {
    const track = new OutputVideoTrack(
      { name: 'main_video', kind: 'video', direction: 'recvonly', width: WIDTH, height: HEIGHT },
      30,
      createLogger({}, 'error'),
    );
    const received: Received[] = [];
    const sink = recordingSink(received);
    track.addSink(sink, { paused: false });
    track.sinkReady(sink);
    // A flush from inside the frame tap runs just before that frame is stamped and encoded: its
    // black frame leaves while the encode is in flight, so the encoded frame is the older one.
    let flushes = 0;
    track.setFrameTap(() => {
      if (flushes < 10) {
        flushes++;
        track.flush();
      }
    });
    const picture = solidI420(WIDTH, HEIGHT, 80, 90, 200);
    for (let i = 0; i < 60 && (flushes < 10 || received.length < 25); i++) {
      await track.emit(picture);
    }
    await track.close();

    expect(flushes).toBe(10);
    expect(received.length).toBeGreaterThan(15);
    for (let i = 1; i < received.length; i++) {
      expect(received[i]!.mediaTimeMs, `frame ${i} of ${received.length}`).toBeGreaterThan(received[i - 1]!.mediaTimeMs);
      expect(received[i]!.rtpTimestamp).not.toBe(received[i - 1]!.rtpTimestamp);
    }
    // The picture opens on a keyframe, and each flush's black frame is one.
    expect(received[0]!.keyframe).toBe(true);
    expect(received.filter((r) => r.keyframe).length).toBeGreaterThanOrEqual(flushes);
  }, 30_000);

  it('opens a new viewer on the model frame in hand: the keyframe its black frame overtook is sent after it, not dropped for the next one (issue 26)', async () => {
    const metrics = new RuntimeMetrics({ processMetrics: false });
    const track = new OutputVideoTrack(
      { name: 'main_video', kind: 'video', direction: 'recvonly', width: WIDTH, height: HEIGHT },
      30,
      createLogger({}, 'error'),
      metrics,
    );
    let encodes = 0;
    track.setFrameTap(() => encodes++);
    for (let viewer = 0; viewer < 5; viewer++) {
      // As a session does: the sink is bound at the answer, the model emits (held while nobody
      // views), and the connection becomes ready.
      const received: Received[] = [];
      const sink = recordingSink(received);
      track.addSink(sink, { paused: false });
      const encodesBefore = encodes;
      const emitting = emitUntil(track, () => received.length >= 2);
      await new Promise((resolve) => setTimeout(resolve, 20));
      track.sinkReady(sink);
      await emitting;
      const [black, picture] = received;
      expect(black!.keyframe, `viewer ${viewer}`).toBe(true);
      expect(picture!.keyframe, `viewer ${viewer}`).toBe(true);
      expect(picture!.mediaTimeMs).toBeGreaterThan(black!.mediaTimeMs);
      // The model frame it opened on is the first one encoded for it, not a later one.
      expect(encodes - encodesBefore, `viewer ${viewer}: frames encoded before its picture`).toBeLessThanOrEqual(2);
      track.removeSink(sink);
    }
    expect(await metricValue(metrics, 'framesDropped', { reason: 'overtaken' })).toBe(0);
    await track.close();
  }, 30_000);

  it("encodes the black opening keyframe once per process: a later session's viewer gets it at once, with no encoder opened for it (issue 26)", async () => {
    const spec = { name: 'main_video', kind: 'video', direction: 'recvonly', width: WIDTH + 16, height: HEIGHT + 16 } as const;
    const first = new OutputVideoTrack(spec, 30, createLogger({}, 'error'));
    const firstReceived: Received[] = [];
    const firstSink = recordingSink(firstReceived);
    first.addSink(firstSink, { paused: false });
    first.sinkReady(firstSink);
    for (let i = 0; i < 200 && firstReceived.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(firstReceived.map((r) => r.keyframe)).toEqual([true]);
    await first.close();

    // Another session's track of the same size: its viewer's black frame leaves within the
    // microtasks of sinkReady — no encoder opened, no timer waited for.
    const second = new OutputVideoTrack(spec, 30, createLogger({}, 'error'));
    const received: Received[] = [];
    const sink = recordingSink(received);
    second.addSink(sink, { paused: false });
    const encoders = openVideoEncoderCount();
    second.sinkReady(sink);
    expect(openVideoEncoderCount()).toBe(encoders);
    for (let i = 0; i < 5; i++) await Promise.resolve();
    expect(received.map((r) => r.keyframe)).toEqual([true]);
    await second.close();
  }, 30_000);

  it('a viewer that paused does not stop the model: frames are taken at the track pace and never encoded; resuming opens on a keyframe', async () => {
    const fps = 30;
    const intervalMs = 1000 / fps;
    const metrics = new RuntimeMetrics({ processMetrics: false });
    const track = new OutputVideoTrack(
      { name: 'main_video', kind: 'video', direction: 'recvonly', width: WIDTH, height: HEIGHT },
      fps,
      createLogger({}, 'error'),
      metrics,
    );
    const received: Received[] = [];
    const sink = recordingSink(received);
    track.addSink(sink, { paused: false });
    track.sinkReady(sink);
    let encoded = 0;
    track.setFrameTap(() => encoded++);
    await emitUntil(track, () => received.length >= 3);
    track.setPaused(sink, true);
    const sentBefore = received.length;
    const encodedBefore = encoded;
    // 30 emits as fast as the track takes them. With nobody playing they used to wait forever
    // (the pacer took nothing): a 20 s ceiling turns that into a failure, not a hang.
    const picture = solidI420(WIDTH, HEIGHT, 80, 90, 200);
    const started = performance.now();
    const emitted = (async () => {
      for (let i = 0; i < 30; i++) await track.emit(picture);
    })();
    const outcome = await Promise.race([
      emitted.then(() => 'emitted'),
      new Promise((resolve) => setTimeout(() => resolve('blocked'), 20_000)),
    ]);
    const elapsedMs = performance.now() - started;
    expect(outcome).toBe('emitted');
    // Paced, not free-running: the queue (2) and the frame in hand go in at once, every other frame
    // waits for one interval (less the pacer's 4 ms slack). A lower bound only, which load cannot break.
    expect(elapsedMs).toBeGreaterThanOrEqual(27 * (intervalMs - 4));
    // Nothing encoded or sent for the paused viewer.
    expect(encoded - encodedBefore).toBeLessThanOrEqual(1); // a frame already in the encoder when the pause came
    expect(received.length - sentBefore).toBeLessThanOrEqual(1);
    expect(await metricValue(metrics, 'framesDropped', { reason: 'paused' })).toBeGreaterThanOrEqual(25);
    // Resumed: the viewer's picture opens on a keyframe.
    track.setPaused(sink, false);
    const resumedAt = received.length;
    await emitUntil(track, () => received.length >= resumedAt + 3);
    expect(received[resumedAt]!.keyframe).toBe(true);
    await track.close();
  }, 60_000);

  it('restarts an encoder that fails mid-stream: the failed one is freed, and the viewer gets a keyframe before any delta of the new one', async () => {
    const before = openVideoEncoderCount();
    const metrics = new RuntimeMetrics({ processMetrics: false });
    const track = new OutputVideoTrack(
      { name: 'main_video', kind: 'video', direction: 'recvonly', width: WIDTH, height: HEIGHT },
      60,
      createLogger({}, 'error'),
      metrics,
    );
    const received: Received[] = [];
    const sink = recordingSink(received);
    track.addSink(sink, { paused: false });
    track.sinkReady(sink);
    await emitUntil(track, () => received.length >= 5);
    faultsArmed = true;
    failNextVideoEncodes(1, { codec: 'h264' });
    await emitUntil(track, () => received.filter((r) => r.afterFaults).length >= 5);
    // One model pipeline open (plus nothing else: the black frame's encoder is gone).
    expect(openVideoEncoderCount()).toBe(before + 1);
    await track.close();
    await new Promise((resolve) => setImmediate(resolve));

    const after = received.filter((r) => r.afterFaults);
    expect(after.length).toBeGreaterThanOrEqual(5);
    expect(after[0]!.keyframe, 'the first frame after the failure').toBe(true);
    expect(
      await metricValue(metrics, 'videoEncoderFailures', { track: 'main_video', codec: 'h264', backend: 'libx264', action: 'restart' }),
    ).toBe(1);
    expect(await metricValue(metrics, 'framesDropped', { reason: 'encode_error' })).toBe(1);
    expect(openVideoEncoderCount()).toBe(before);
  }, 30_000);

  it('restarts it again and again (20 failures in a row) without leaking an encoder, then streams on', async () => {
    const before = openVideoEncoderCount();
    const metrics = new RuntimeMetrics({ processMetrics: false });
    const track = new OutputVideoTrack(
      { name: 'main_video', kind: 'video', direction: 'recvonly', width: WIDTH, height: HEIGHT },
      60,
      createLogger({}, 'silent'),
      metrics,
    );
    const received: Received[] = [];
    const sink = recordingSink(received);
    track.addSink(sink, { paused: false });
    track.sinkReady(sink);
    await emitUntil(track, () => received.length >= 3);
    faultsArmed = true;
    failNextVideoEncodes(20);
    let most = 0;
    await emitUntil(track, () => {
      most = Math.max(most, openVideoEncoderCount());
      return received.filter((r) => r.afterFaults).length >= 3;
    });
    expect(most).toBeLessThanOrEqual(before + 1);
    await track.close();
    await new Promise((resolve) => setImmediate(resolve));
    expect(received.find((r) => r.afterFaults)?.keyframe).toBe(true);
    expect(await metricValue(metrics, 'videoEncoderFailures', { action: 'restart' })).toBe(20);
    expect(await metricValue(metrics, 'videoEncoderFailures', { action: 'fallback' })).toBe(0);
    expect(openVideoEncoderCount()).toBe(before);
  }, 30_000);

  it("a stream whose encoder keeps failing costs only its own viewers: the VP8 viewer's frames keep coming", async () => {
    const track = new OutputVideoTrack(
      { name: 'main_video', kind: 'video', direction: 'recvonly', width: WIDTH, height: HEIGHT },
      60,
      createLogger({}, 'silent'),
    );
    const h264: Received[] = [];
    const vp8: Received[] = [];
    const h264Sink = recordingSink(h264);
    const vp8Sink = { ...recordingSink(vp8, 'vp8'), connectionId: 2 };
    for (const sink of [h264Sink, vp8Sink]) {
      track.addSink(sink, { paused: false });
      track.sinkReady(sink);
    }
    await emitUntil(track, () => h264.length >= 3 && vp8.length >= 3);
    const h264Before = h264.length;
    const vp8Before = vp8.length;
    failNextVideoEncodes(Infinity, { codec: 'h264' });
    await emitUntil(track, () => vp8.length >= vp8Before + 10);
    await track.close();
    expect(vp8.length).toBeGreaterThanOrEqual(vp8Before + 10);
    // An encode already past its fault check when the faults were armed may still arrive.
    expect(h264.length).toBeLessThanOrEqual(h264Before + 1);
  }, 30_000);

  it('publishes its playout rate to /metrics: the declared fps when fixed; the chosen rate and production estimate when adaptive', async () => {
    const metrics = new RuntimeMetrics({ processMetrics: false });
    const spec = { kind: 'video', direction: 'recvonly', width: WIDTH, height: HEIGHT } as const;
    const fixed = new OutputVideoTrack({ ...spec, name: 'fixed_video' }, 30, createLogger({}, 'silent'), metrics);
    const adaptive = new OutputVideoTrack({ ...spec, name: 'adaptive_video', fps: 'adaptive' }, 24, createLogger({}, 'silent'), metrics);
    try {
      expect(await metricValue(metrics, 'playoutFps', { track: 'fixed_video' })).toBe(30);
      // Before any batch: the ceiling, and no production estimate yet.
      expect(await metricValue(metrics, 'playoutFps', { track: 'adaptive_video' })).toBe(24);
      expect((await metrics.productionFps.get()).values).toEqual([]);
      // Batches of 4 frames, each taking the model 250 ms: 16 fps. Nobody watches, so frames only
      // queue (a drop policy, so emit never waits).
      const picture = solidI420(WIDTH, HEIGHT, 80, 90, 200);
      for (let i = 0; i < 3; i++) await adaptive.emit([picture, picture, picture, picture], 'drop-oldest', undefined, 250);
      expect(await metricValue(metrics, 'productionFps', { track: 'adaptive_video' })).toBeCloseTo(16, 6);
      const playout = adaptive.playout;
      expect(playout.mode).toBe('adaptive');
      expect(await metricValue(metrics, 'playoutFps', { track: 'adaptive_video' })).toBe(playout.fps);
      expect(playout.fps).toBeGreaterThan(1);
      expect(playout.fps).toBeLessThanOrEqual(24);
      // A fixed track has no production estimate.
      expect(await metricValue(metrics, 'productionFps', { track: 'fixed_video' })).toBe(0);
      expect((await metrics.productionFps.get()).values).toHaveLength(1);
    } finally {
      await Promise.all([fixed.close(), adaptive.close()]);
    }
  });
});
