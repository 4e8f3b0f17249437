import { describe, expect, it } from 'vitest';
import { convertVideoFrame, solidI420 } from './frame-convert.ts';
import { videoFrameByteLength, type VideoFrame } from './frames.ts';

function rgbaFrame(width: number, height: number, rgba: readonly [number, number, number, number]): VideoFrame {
  const data = new Uint8Array(width * height * 4);
  for (let i = 0; i < data.length; i += 4) data.set(rgba, i);
  return { width, height, format: 'rgba', data };
}

describe('solidI420', () => {
  it('fills each plane with its value, with ceil-sized chroma for odd sizes', () => {
    const frame = solidI420(5, 3, 10, 20, 30);
    expect(frame).toMatchObject({ width: 5, height: 3, format: 'i420' });
    expect(frame.data.byteLength).toBe(videoFrameByteLength('i420', 5, 3));
    expect(Array.from(frame.data)).toEqual([...Array(15).fill(10), ...Array(6).fill(20), ...Array(6).fill(30)]);
  });

  it('rejects non-positive or fractional sizes', () => {
    expect(() => solidI420(0, 2, 0, 0, 0)).toThrow(RangeError);
    expect(() => solidI420(2.5, 2, 0, 0, 0)).toThrow(RangeError);
  });
});

describe('convertVideoFrame', () => {
  it('returns the same frame when the format already matches', () => {
    const frame = solidI420(4, 4, 16, 128, 128);
    expect(convertVideoFrame(frame, 'i420')).toBe(frame);
  });

  it.each([
    ['white', [255, 255, 255, 255], [235, 128, 128]],
    ['black', [0, 0, 0, 255], [16, 128, 128]],
    ['red', [255, 0, 0, 255], [82, 90, 240]],
    ['green', [0, 255, 0, 255], [145, 54, 34]],
    ['blue', [0, 0, 255, 255], [41, 240, 110]],
  ] as const)('maps %s to BT.601 limited-range YUV', (_name, rgba, [y, u, v]) => {
    const i420 = convertVideoFrame(rgbaFrame(4, 2, rgba), 'i420');
    expect(i420.format).toBe('i420');
    expect(i420.data.byteLength).toBe(videoFrameByteLength('i420', 4, 2));
    expect(Math.abs(i420.data[0]! - y)).toBeLessThanOrEqual(1);
    expect(Math.abs(i420.data[8]! - u)).toBeLessThanOrEqual(1);
    expect(Math.abs(i420.data[10]! - v)).toBeLessThanOrEqual(1);
  });

  it('round-trips rgba -> i420 -> rgba within rounding for flat colours, odd sizes included', () => {
    for (const colour of [
      [200, 40, 40, 255],
      [20, 180, 90, 255],
      [128, 128, 128, 255],
    ] as const) {
      const source = rgbaFrame(7, 5, colour);
      const back = convertVideoFrame(convertVideoFrame(source, 'i420'), 'rgba');
      expect(back.data.byteLength).toBe(7 * 5 * 4);
      for (let i = 0; i < back.data.length; i += 4) {
        expect(Math.abs(back.data[i]! - colour[0])).toBeLessThanOrEqual(3);
        expect(Math.abs(back.data[i + 1]! - colour[1])).toBeLessThanOrEqual(3);
        expect(Math.abs(back.data[i + 2]! - colour[2])).toBeLessThanOrEqual(3);
        expect(back.data[i + 3]).toBe(255);
      }
    }
  });

  it('keeps timestamp and metadata', () => {
    const frame = { ...solidI420(2, 2, 16, 128, 128), timestampUs: 42, metadata: { step: 1 } };
    expect(convertVideoFrame(frame, 'rgba')).toMatchObject({ timestampUs: 42, metadata: { step: 1 }, format: 'rgba' });
  });

  it('rejects unknown pixel formats', () => {
    const frame = { width: 2, height: 2, format: 'nv12', data: new Uint8Array(6) } as unknown as VideoFrame;
    expect(() => convertVideoFrame(frame, 'rgba')).toThrow(/unsupported pixel format/);
  });

  it('rejects data shorter than the declared shape', () => {
    expect(() => convertVideoFrame({ width: 4, height: 4, format: 'rgba', data: new Uint8Array(8) }, 'i420')).toThrow(RangeError);
  });
});
