/**
 * The operator's adaptation bounds (RuntimeOptions `video`) reach each stream's encoder: a real
 * OutputVideoTrack with libx264 and a viewer whose estimate is far below the floor settles at
 * the bound given, not at the default 500 kbit/s.
 */
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../server-kit/log.ts';
import { RuntimeMetrics } from '../metrics.ts';
import { processEncoderBackends } from './encoder-backends.ts';
import { solidI420 } from './frame-convert.ts';
import { OutputVideoTrack, type VideoSink } from './output-video-track.ts';
import type { BitrateBounds } from './video-bitrate-adaptation.ts';

async function settledTargetKbps(bounds: BitrateBounds | undefined): Promise<number> {
  const metrics = new RuntimeMetrics({ processMetrics: false });
  const track = new OutputVideoTrack(
    { name: 'main_video', kind: 'video', direction: 'recvonly', width: 64, height: 64, bitrateKbps: 2_000 },
    30,
    createLogger({}, 'error'),
    metrics,
    undefined,
    processEncoderBackends,
    bounds,
  );
  const sink: VideoSink = { connectionId: 1, codec: 'h264', sendFrame: (_p, ts) => ts, estimatedBitrateKbps: () => 60 };
  track.addSink(sink, { paused: false });
  track.sinkReady(sink);
  const picture = solidI420(64, 64, 80, 90, 200);
  for (let i = 0; i < 10; i++) await track.emit(picture);
  await track.close();
  const target = (await metrics.targetBitrate.get()).values.find((v) => v.labels['codec'] === 'h264');
  return (target?.value ?? NaN) / 1000;
}

describe('adaptation bounds', () => {
  it("keeps the encoder at the operator's floor (default 500 kbit/s) when the viewer's estimate is below it", async () => {
    expect(await settledTargetKbps(undefined)).toBe(500);
    expect(await settledTargetKbps({ minKbps: 800, maxKbps: 5_000 })).toBe(800);
  }, 30_000);
});
