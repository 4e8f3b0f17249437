import { describe, expect, it } from 'vitest';
import { videoBitrateFromFlags, videoCodecsFromFlag } from './video-codec-cli-options.ts';

describe('--codecs', () => {
  it('reads a preference list, case and spaces aside', () => {
    expect(videoCodecsFromFlag(undefined)).toBeUndefined();
    expect(videoCodecsFromFlag('h265,h264,vp8')).toEqual(['h265', 'h264', 'vp8']);
    expect(videoCodecsFromFlag(' H265 , vp8')).toEqual(['h265', 'vp8']);
    expect(videoCodecsFromFlag('vp8')).toEqual(['vp8']);
  });

  it('refuses unknown names, an empty list and repeats, saying what it takes', () => {
    for (const bad of ['', ' ', 'h266', 'h264,av1', 'h264,,vp8']) {
      expect(videoCodecsFromFlag(bad)).toEqual({
        error: expect.stringMatching(/^--codecs takes a comma-separated list of h265, h264, vp8/),
      });
    }
    expect(videoCodecsFromFlag('h264,h264')).toEqual({ error: expect.stringMatching(/twice/) });
  });
});

describe('--video-min-kbps / --video-max-kbps', () => {
  it('reads either or both, and says what is wrong', () => {
    expect(videoBitrateFromFlags(undefined, undefined)).toBeUndefined();
    expect(videoBitrateFromFlags('300', undefined)).toEqual({ minBitrateKbps: 300 });
    expect(videoBitrateFromFlags('300', '4000')).toEqual({ minBitrateKbps: 300, maxBitrateKbps: 4000 });
    for (const bad of ['', '0', '2.5', 'fast', '-1']) {
      expect(videoBitrateFromFlags(bad, undefined)).toEqual({ error: expect.stringMatching(/^--video-min-kbps must be/) });
      expect(videoBitrateFromFlags(undefined, bad)).toEqual({ error: expect.stringMatching(/^--video-max-kbps must be/) });
    }
  });
});
