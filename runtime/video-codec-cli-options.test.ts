import { describe, expect, it } from 'vitest';
import { videoCodecsFromFlag } from './video-codec-cli-options.ts';

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
