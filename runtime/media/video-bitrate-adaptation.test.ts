import { describe, expect, it } from 'vitest';
import { adaptStreamBitrate, type AdaptedStream } from './video-bitrate-adaptation.ts';
import type { StreamVideoEncoder } from './video-encoder.ts';
import type { VideoSink } from './video-sinks.ts';

function stream(configuredKbps: number, bounds?: { minKbps: number; maxKbps: number }): AdaptedStream & { rates: number[] } {
  const rates: number[] = [];
  const encoder = {
    bitrateKbps: configuredKbps,
    adjustsBitrateLive: true,
    setBitrate(kbps: number) {
      encoder.bitrateKbps = kbps;
      rates.push(kbps);
    },
  };
  return { encoder: encoder as unknown as StreamVideoEncoder, configuredKbps, adaptedAt: 0, rates, ...(bounds ? { bounds } : {}) };
}

function viewer(estimate: () => number | undefined): { sink: VideoSink } {
  return { sink: { estimatedBitrateKbps: estimate } as unknown as VideoSink };
}

describe('adaptStreamBitrate', () => {
  it('lowers the rate at once and again 200 ms later, but raises it once a second at most', () => {
    const s = stream(2500);
    let kbps = 1000;
    const sinks = [viewer(() => kbps)];
    expect(adaptStreamBitrate(s, sinks, 5_000)).toBe(900); // 0.9 × the estimate
    kbps = 700;
    expect(adaptStreamBitrate(s, sinks, 5_100)).toBeUndefined(); // 100 ms after the last decrease
    expect(adaptStreamBitrate(s, sinks, 5_200)).toBe(630);
    kbps = 2000;
    expect(adaptStreamBitrate(s, sinks, 5_700)).toBeUndefined(); // an increase waits a second
    expect(adaptStreamBitrate(s, sinks, 6_200)).toBe(1800);
    kbps = 5000;
    expect(adaptStreamBitrate(s, sinks, 6_700)).toBeUndefined();
    expect(adaptStreamBitrate(s, sinks, 7_200)).toBe(2500); // never above the configured rate
  });

  it('keeps to the floor, the bounds given, and ignores changes under 5 %', () => {
    const s = stream(2500, { minKbps: 300, maxKbps: 2000 });
    let kbps = 100;
    const sinks = [viewer(() => kbps), viewer(() => undefined)];
    expect(adaptStreamBitrate(s, sinks, 1_000)).toBe(300);
    kbps = 1e6;
    expect(adaptStreamBitrate(s, sinks, 3_000)).toBe(2000);
    kbps = 2150; // 0.9 × 2150 = 1935: 3 % under
    expect(adaptStreamBitrate(s, sinks, 5_000)).toBeUndefined();
    expect(s.rates).toEqual([300, 2000]);
  });

  it('follows the slowest viewer, and leaves a rate no viewer has an estimate for', () => {
    const s = stream(2500);
    expect(adaptStreamBitrate(s, [viewer(() => undefined)], 1_000)).toBeUndefined();
    expect(adaptStreamBitrate(s, [viewer(() => 3000), viewer(() => 1000)], 2_000)).toBe(900);
  });
});
