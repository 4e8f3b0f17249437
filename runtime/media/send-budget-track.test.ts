/**
 * Backpressure from the network (issue 25 part 5) on a real OutputVideoTrack and libx264: while
 * its viewer's link (its bandwidth estimate) is below what the encoder makes even at its floor,
 * a `block` model waits in emit() instead of having frames encoded that the link cannot carry,
 * and a drop-policy model's frames are dropped before the encoder, counted as `congestion`.
 * Each case is measured against the same track with no estimate, in the same run, so the bounds
 * hold on a loaded machine.
 */
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../server-kit/log.ts';
import type { DropPolicy } from '../model/definition.ts';
import { RuntimeMetrics } from '../metrics.ts';
import type { VideoFrame } from './frames.ts';
import { OutputVideoTrack, type VideoSink } from './output-video-track.ts';

const WIDTH = 320;
const HEIGHT = 240;
const RUN_MS = 3_000;

/** Fresh noise every frame: each costs the encoder its whole per-frame budget (~4 KB at 1,000 kbit/s). */
function noise(seed: number): VideoFrame {
  const data = new Uint8Array(WIDTH * HEIGHT * 1.5);
  let x = seed * 2654435761;
  for (let i = 0; i < data.length; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    data[i] = x >>> 24;
  }
  return { width: WIDTH, height: HEIGHT, format: 'i420', data };
}

async function run(estimateKbps: number | undefined, dropPolicy: DropPolicy) {
  const metrics = new RuntimeMetrics({ processMetrics: false });
  const track = new OutputVideoTrack(
    { name: 'main_video', kind: 'video', direction: 'recvonly', width: WIDTH, height: HEIGHT, bitrateKbps: 1_000, dropPolicy },
    30,
    createLogger({}, 'error'),
    metrics,
  );
  let bytesSent = 0;
  let framesSent = 0;
  const sink: VideoSink = {
    connectionId: 1,
    codec: 'h264',
    sendFrame(payloads, rtpTimestamp) {
      for (const p of payloads) bytesSent += p.length;
      framesSent++;
      return rtpTimestamp;
    },
    ...(estimateKbps === undefined ? {} : { estimatedBitrateKbps: () => estimateKbps }),
  };
  track.addSink(sink, { paused: false });
  track.sinkReady(sink);
  const pictures = Array.from({ length: 8 }, (_, i) => noise(i + 1));
  let emitted = 0;
  const started = performance.now();
  while (performance.now() - started < RUN_MS) {
    await track.emit(pictures[emitted % pictures.length]!);
    emitted++;
    // A model at the track's rate (drop policies never wait in emit, so this is their clock).
    if (dropPolicy !== 'block') await new Promise((resolve) => setTimeout(resolve, 1000 / 30));
  }
  const seconds = (performance.now() - started) / 1000;
  await track.close();
  const counter = async (name: 'framesDropped' | 'sendBudgetWait', labels: Record<string, string>) =>
    (await metrics[name].get()).values
      .filter((v) => Object.entries(labels).every(([k, val]) => (v.labels as Record<string, unknown>)[k] === val))
      .reduce((sum, v) => sum + v.value, 0);
  return {
    emitted,
    framesSent,
    kbps: (bytesSent * 8) / seconds / 1000,
    congestionDrops: await counter('framesDropped', { track: 'main_video', reason: 'congestion' }),
    waitedSeconds: await counter('sendBudgetWait', { track: 'main_video' }),
  };
}

describe('backpressure from the send budget', () => {
  it("a block model waits in emit() while its viewer's link is below the encoder's rate; without an estimate it runs at the track's pace", async () => {
    const free = await run(undefined, 'block');
    const slow = await run(100, 'block');
    const detail = JSON.stringify({ free, slow });
    // 100 kbit/s carries about one frame in five of the thirty (the encoder at its 500 kbit/s
    // floor): the model is held far below its pace (~20 frames in 3 s, with the bucket's first
    // half second, against 90 on a quiet machine and ~50 on a loaded one).
    expect(slow.emitted, detail).toBeLessThan(free.emitted * 0.6);
    // What was sent fits the link, with the bucket's half second and one frame of slack.
    expect(slow.kbps, detail).toBeLessThan(100 * 1.6);
    expect(slow.waitedSeconds, detail).toBeGreaterThan(1);
    expect(slow.congestionDrops, detail).toBe(0); // block: nothing dropped, the model waited
    expect(free.waitedSeconds, detail).toBe(0);
  }, 30_000);

  it('a drop-oldest model keeps its pace and its frames are dropped before the encoder, counted as congestion', async () => {
    const slow = await run(100, 'drop-oldest');
    const detail = JSON.stringify(slow);
    expect(slow.congestionDrops, detail).toBeGreaterThan(slow.emitted / 3);
    expect(slow.framesSent, detail).toBeLessThan(slow.emitted / 2);
    expect(slow.kbps, detail).toBeLessThan(100 * 1.6);
  }, 30_000);
});
