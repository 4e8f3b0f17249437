import { Frame } from 'node-av/lib';
import { AV_PIX_FMT_YUV420P } from 'node-av/constants';
import { afterEach, describe, expect, it } from 'vitest';
import { solidI420 } from './frame-convert.ts';
import { WritableFramePlanes } from './ffmpeg-frame-planes.ts';
import { VideoDecoder } from './video-decoder.ts';
import { VideoEncoder } from './video-encoder-factory.ts';

const frames: Frame[] = [];
afterEach(() => {
  for (const frame of frames.splice(0)) frame.free();
});

function i420Frame(width: number, height: number): Frame {
  const frame = new Frame();
  frame.alloc();
  frame.format = AV_PIX_FMT_YUV420P;
  frame.width = width;
  frame.height = height;
  expect(frame.allocBuffer()).toBe(0);
  frames.push(frame);
  return frame;
}

describe('WritableFramePlanes (the encoder frame’s planes, kept between frames)', () => {
  it('takes the views once while the frame stays writable', () => {
    const frame = i420Frame(64, 48);
    const planes = new WritableFramePlanes();
    const first = planes.of(frame);
    for (let i = 0; i < 10; i++) expect(planes.of(frame)).toBe(first);
    expect(planes.taken).toBe(1);
    first.planes[0]!.fill(77);
    expect(frame.data![0]![0]).toBe(77); // the views are the frame's own memory
  });

  it('gives fresh, private planes while something (the encoder) still references the frame’s buffer', () => {
    const frame = i420Frame(64, 48);
    const planes = new WritableFramePlanes();
    planes.of(frame).planes[0]!.fill(10);
    // What avcodec_send_frame does with a frame an encoder keeps (NVENC, frame threads): a reference.
    const held = new Frame();
    held.alloc();
    frames.push(held);
    expect(held.ref(frame)).toBe(0);
    expect(frame.isWritable).toBe(false);
    const fresh = planes.of(frame);
    expect(planes.taken).toBe(2);
    fresh.planes[0]!.fill(200);
    expect(held.data![0]![0]).toBe(10); // the referenced picture is untouched
    expect(frame.data![0]![0]).toBe(200); // and the frame now reads the new memory
    expect(planes.of(frame)).toBe(fresh);
  });

  it('takes the views again for another frame (a new staging frame)', () => {
    const planes = new WritableFramePlanes();
    const a = planes.of(i420Frame(64, 48));
    const b = planes.of(i420Frame(32, 24));
    expect(b).not.toBe(a);
    expect(b.planes[0]!.length).toBeLessThan(a.planes[0]!.length);
  });
});

describe('FfmpegVideoEncoder with the kept planes', () => {
  it.each([
    ['synchronous', undefined],
    ['thread pool', 0],
  ])('encodes each frame’s own pixels, frame after frame (%s)', async (_name, syncBelowMs) => {
    const encoder = await VideoEncoder.create({
      codec: 'h264',
      width: 320,
      height: 240,
      fps: 30,
      ...(syncBelowMs === undefined ? {} : { syncBelowMs }),
    });
    const decoder = await VideoDecoder.create('h264');
    try {
      // One buffer the caller rewrites every frame (as the track's frame pool does).
      const source = solidI420(320, 240, 0, 128, 128);
      const levels = [40, 200, 90, 160, 20, 230, 120];
      for (const level of levels) {
        source.data.fill(level, 0, 320 * 240);
        const encoded = await encoder.encode(source);
        expect(encoded).toHaveLength(1);
        const [decoded] = await decoder.decode(encoded[0]!.data);
        expect(Math.abs(decoded!.data[120 * 320 + 160]! - level), `level ${level}`).toBeLessThanOrEqual(6);
      }
    } finally {
      encoder.close();
      decoder.close();
    }
  });
});
