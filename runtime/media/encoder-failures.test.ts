import { describe, expect, it } from 'vitest';
import type { EncoderBackend } from './encoder-backends.ts';
import { EncoderFailurePolicy, FailureWindow } from './encoder-failures.ts';

const NVENC: EncoderBackend = { name: 'arclight_nvenc_h264', codec: 'h264', hardware: true, implementation: 'native-nvenc' };
const X264: EncoderBackend = { name: 'libx264', codec: 'h264', hardware: false, implementation: 'ffmpeg' };

/** A policy whose demotions are recorded, and refused for `lastCandidate` (nothing after it). */
function policy(lastCandidate = 'libx264'): { policy: EncoderFailurePolicy; demoted: string[] } {
  const demoted: string[] = [];
  const demote = (_codec: string, name: string, reason: string): boolean => {
    if (name === lastCandidate) return false;
    demoted.push(`${name}: ${reason}`);
    return true;
  };
  return { policy: new EncoderFailurePolicy({ failures: 3, windowMs: 30_000 }, demote), demoted };
}

describe('FailureWindow', () => {
  it('counts the failures of a key within the window only', () => {
    const window = new FailureWindow({ failures: 3, windowMs: 1000 });
    expect(window.record('a', 0)).toBe(1);
    expect(window.record('a', 500)).toBe(2);
    expect(window.record('b', 600)).toBe(1);
    expect(window.record('a', 1200)).toBe(2); // the one at 0 has left the window
    window.forget('a');
    expect(window.record('a', 1300)).toBe(1);
  });
});

describe('EncoderFailurePolicy', () => {
  it('restarts after an encode failure, and demotes the backend at the third within 30 s, saying why', () => {
    const { policy: p, demoted } = policy();
    const error = new Error('NV_ENC_ERR_DEVICE_NOT_EXIST');
    expect(p.failed(NVENC, 'encode', error, 0)).toEqual({ action: 'restart' });
    expect(p.failed(NVENC, 'encode', error, 10_000)).toEqual({ action: 'restart' });
    const third = p.failed(NVENC, 'encode', error, 20_000);
    expect(third.action).toBe('fallback');
    expect(third.reason).toBe('3 encode failures within 30 s, the last: NV_ENC_ERR_DEVICE_NOT_EXIST');
    expect(demoted).toEqual([`arclight_nvenc_h264: ${third.reason}`]);
  });

  it('only restarts failures spread wider than the window', () => {
    const { policy: p, demoted } = policy();
    for (let i = 0; i < 10; i++) expect(p.failed(NVENC, 'encode', new Error('x'), i * 16_000).action).toBe('restart');
    expect(demoted).toEqual([]);
  });

  it('demotes a backend that no longer opens at once', () => {
    const { policy: p, demoted } = policy();
    expect(p.failed(NVENC, 'open', new Error('no device'), 0)).toEqual({ action: 'fallback', reason: 'failed to open: no device' });
    expect(demoted).toHaveLength(1);
  });

  it('keeps restarting the last candidate, which cannot be demoted', () => {
    const { policy: p, demoted } = policy();
    for (let i = 0; i < 20; i++) expect(p.failed(X264, 'encode', new Error('x'), i).action).toBe('restart');
    expect(p.failed(X264, 'open', new Error('x'), 21).action).toBe('restart');
    expect(demoted).toEqual([]);
  });
});
