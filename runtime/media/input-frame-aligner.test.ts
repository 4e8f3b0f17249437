import { afterEach, describe, expect, it, vi } from 'vitest';
import type { VideoFrame } from './frames.ts';
import { ANNOTATION_WAIT_MS, InputFrameAligner } from './input-frame-aligner.ts';

function frame(tag: number): VideoFrame {
  return { width: 2, height: 2, format: 'i420', data: Uint8Array.of(tag, 0, 0, 0, 0, 0) };
}

function collect(): { aligner: InputFrameAligner; out: VideoFrame[] } {
  const out: VideoFrame[] = [];
  return { aligner: new InputFrameAligner((f) => out.push(f)), out };
}

describe('InputFrameAligner', () => {
  afterEach(() => vi.useRealTimers());

  it('joins an annotation that arrives before its frame', () => {
    const { aligner, out } = collect();
    aligner.annotate(3000, { captureTime: 12.5, metadata: { n: 1 } });
    aligner.push(frame(1), 3000);
    expect(out).toHaveLength(1);
    expect(out[0]).toMatchObject({ metadata: { n: 1 }, captureTime: 12.5 });
    expect(out[0]!.data[0]).toBe(1);
    expect(aligner.annotated).toBe(1);
  });

  it('holds a frame until its annotation arrives', () => {
    const { aligner, out } = collect();
    aligner.push(frame(1), 3000);
    expect(out).toHaveLength(0);
    aligner.annotate(3000, { metadata: Uint8Array.of(9, 8) });
    expect(out).toHaveLength(1);
    expect(out[0]!.metadata).toEqual(Uint8Array.of(9, 8));
  });

  it('keeps order: a later annotated frame waits behind an earlier one', () => {
    const { aligner, out } = collect();
    aligner.push(frame(1), 3000);
    aligner.push(frame(2), 6000);
    aligner.annotate(6000, { metadata: { n: 2 } });
    expect(out).toHaveLength(0);
    aligner.annotate(3000, { metadata: { n: 1 } });
    expect(out.map((f) => f.data[0])).toEqual([1, 2]);
    expect(out.map((f) => f.metadata)).toEqual([{ n: 1 }, { n: 2 }]);
  });

  it('delivers a frame without its annotation after the wait, and counts it', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const { aligner, out } = collect();
    aligner.push(frame(1), 3000);
    vi.advanceTimersByTime(ANNOTATION_WAIT_MS - 5);
    expect(out).toHaveLength(0);
    vi.advanceTimersByTime(10);
    expect(out).toHaveLength(1);
    expect(out[0]!.metadata).toBeUndefined();
    expect(aligner.unannotated).toBe(1);
    // A late annotation is kept (bounded) but never attached to an already delivered frame.
    aligner.annotate(3000, { metadata: { late: true } });
    expect(out).toHaveLength(1);
  });

  it('never holds more than a few frames', () => {
    const { aligner, out } = collect();
    for (let i = 0; i < 20; i++) aligner.push(frame(i), i * 3000);
    expect(out.length).toBe(12);
    expect(out.map((f) => f.data[0])).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
    aligner.close();
  });

  it('matches timestamps modulo 2^32 and forgets the oldest of too many annotations', () => {
    const { aligner, out } = collect();
    for (let i = 0; i < 300; i++) aligner.annotate(i, { metadata: { i } });
    aligner.push(frame(1), 299);
    expect(out[0]!.metadata).toEqual({ i: 299 });
    aligner.annotate(2 ** 32 - 1, { metadata: { wrapped: true } });
    aligner.push(frame(2), -1);
    expect(out[1]!.metadata).toEqual({ wrapped: true });
    aligner.push(frame(3), 0); // evicted: waits, then goes without
    expect(out).toHaveLength(2);
    aligner.reset();
    expect(out).toHaveLength(3);
    expect(out[2]!.metadata).toBeUndefined();
  });
});
