import { describe, expect, it } from 'vitest';
import { CaptureClock, inputFrameMetadataSupported } from './input-frame-stamper.ts';

describe('CaptureClock', () => {
  it('keeps the RTP spacing and anchors at the quickest observation', () => {
    const clock = new CaptureClock();
    // Frames captured at 1000, 1033.3, 1066.7 ms; seen after 9, 4 and 6 ms of encoding.
    expect(clock.observe(90_000, 1009)).toBeCloseTo(1009, 6);
    expect(clock.observe(93_000, 1037.33)).toBeCloseTo(1037.33, 1);
    // The anchor moved 4.67 ms earlier: later frames are late by 4 ms, the fastest encode.
    expect(clock.observe(96_000, 1072.67)).toBeCloseTo(1070.67, 1);
    expect(clock.observe(99_000, 1110)).toBeCloseTo(1104, 1);
  });

  it('unwraps the 32-bit RTP clock', () => {
    const clock = new CaptureClock();
    const start = 2 ** 32 - 1500;
    const first = clock.observe(start, 5000);
    const second = clock.observe(1500, 5100); // 3000 ticks later, across the wrap
    expect(second - first).toBeCloseTo(3000 / 90, 6);
  });
});

describe('inputFrameMetadataSupported', () => {
  it('is false in Node (no RTCRtpScriptTransform)', () => {
    expect(inputFrameMetadataSupported()).toBe(false);
  });
});
