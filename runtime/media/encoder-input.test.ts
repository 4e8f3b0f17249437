/**
 * RGBA on the fast path (issue 26 part 3): an RGBA frame is converted to I420 once per frame, by
 * the native converter, before the track's encoders and its frame tap read it — however many
 * there are — and what the viewers decode is still the picture emitted. Without the addon (here:
 * `nativeAddon()` mocked to undefined) RGBA goes to the encoders as before.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../../server-kit/log.ts';
import { RuntimeMetrics } from '../metrics.ts';
import { nativeAddon } from '../native/native-addon.ts';
import { H264Depacketizer } from '../transport/rtp/h264-depacketizer.ts';
import { Vp8Depacketizer } from '../transport/rtp/vp8-depacketizer.ts';
import { convertToYuv } from './colour-convert.ts';
import { EncoderInput, setConvertRgbaOnce } from './encoder-input.ts';
import type { VideoFrame } from './frames.ts';
import { OutputVideoTrack, type VideoSink } from './output-video-track.ts';
import { VideoDecoder } from './video-decoder.ts';
import type { VideoCodec } from './video-encoder.ts';

/** When set, the addon is "not built" for everything in this file's module graph. */
const addon = vi.hoisted(() => ({ off: false }));
vi.mock('../native/native-addon.ts', async (importOriginal) => {
  const actual = await importOriginal<typeof import('../native/native-addon.ts')>();
  return { ...actual, nativeAddon: () => (addon.off ? undefined : actual.nativeAddon()) };
});

/** In CI the addon is built (npm install); on a machine without a compiler these are skipped. */
const built = nativeAddon() !== undefined;

const WIDTH = 96;
const HEIGHT = 64;
const FRAMES = 8;
const RED = [200, 60, 40] as const;

afterEach(() => {
  addon.off = false;
  setConvertRgbaOnce(true);
});

function solidRgba(width: number, height: number, [r, g, b]: readonly [number, number, number]): VideoFrame {
  const data = new Uint8Array(width * height * 4);
  for (let i = 0; i < data.length; i += 4) {
    data[i] = r;
    data[i + 1] = g;
    data[i + 2] = b;
    data[i + 3] = 255;
  }
  return { width, height, format: 'rgba', data };
}

/** BT.601 limited range, as swscale and the native converter compute it. */
function expectedYuv([r, g, b]: readonly [number, number, number]): [number, number, number] {
  return [
    16 + (65.738 * r + 129.057 * g + 25.064 * b) / 256,
    128 + (-37.945 * r - 74.494 * g + 112.439 * b) / 256,
    128 + (112.439 * r - 94.154 * g - 18.285 * b) / 256,
  ];
}

/** The Y, U and V of an I420 frame's centre. */
function centre(frame: VideoFrame): [number, number, number] {
  const { width, height, data } = frame;
  const cw = Math.ceil(width / 2);
  const ch = Math.ceil(height / 2);
  const c = (ch >> 1) * cw + (cw >> 1);
  return [data[(height >> 1) * width + (width >> 1)]!, data[width * height + c]!, data[width * height + cw * ch + c]!];
}

function expectColour(frame: VideoFrame, rgb: readonly [number, number, number], what: string): void {
  const got = centre(frame);
  const want = expectedYuv(rgb);
  for (let i = 0; i < 3; i++)
    expect(Math.abs(got[i]! - want[i]!), `${what}: ${'YUV'[i]} ${got[i]} vs ${want[i]!.toFixed(1)}`).toBeLessThanOrEqual(4);
}

function counterValue(metrics: RuntimeMetrics, labels: Record<string, string>): Promise<number> {
  return metrics.framesConverted
    .get()
    .then((m) =>
      m.values
        .filter((v) => Object.entries(labels).every(([k, val]) => (v.labels as Record<string, unknown>)[k] === val))
        .reduce((sum, v) => sum + v.value, 0),
    );
}

/** Frames encoded for one stream (the track observes each encode once in arclight_encode_duration_seconds). */
async function encodes(metrics: RuntimeMetrics, codec: string): Promise<number> {
  const m = await metrics.encodeDuration.get();
  return m.values.find((v) => v.metricName === 'arclight_encode_duration_seconds_count' && v.labels['codec'] === codec)?.value ?? 0;
}

interface SentFrame {
  readonly payloads: Buffer[];
  readonly rtpTimestamp: number;
}

function recordingSink(connectionId: number, codec: VideoCodec, sent: SentFrame[]): VideoSink {
  return {
    connectionId,
    codec,
    sendFrame(payloads, rtpTimestamp) {
      sent.push({ payloads: payloads.map((p) => Buffer.from(p)), rtpTimestamp });
      return rtpTimestamp;
    },
  };
}

/** What a viewer shows last: the sink's RTP payloads depacketized and decoded in order. */
async function lastPicture(codec: VideoCodec, sent: readonly SentFrame[]): Promise<VideoFrame | undefined> {
  const depacketizer = codec === 'h264' ? new H264Depacketizer() : new Vp8Depacketizer();
  const decoder = await VideoDecoder.create(codec);
  let last: VideoFrame | undefined;
  let sequenceNumber = 0;
  try {
    for (const { payloads, rtpTimestamp } of sent) {
      for (const [i, payload] of payloads.entries()) {
        const frame = depacketizer.push({
          payload,
          marker: i === payloads.length - 1,
          sequenceNumber: sequenceNumber++,
          timestamp: rtpTimestamp,
        });
        if (frame) for (const picture of await decoder.decode(frame.data)) last = picture;
      }
    }
  } finally {
    decoder.close();
  }
  return last;
}

describe('EncoderInput', () => {
  it.skipIf(!built)(
    'gives an RGBA frame to its readers as I420, converted once by the native converter, with its timestamp and metadata',
    async () => {
      const metrics = new RuntimeMetrics({ processMetrics: false });
      const rgba = { ...solidRgba(WIDTH, HEIGHT, RED), timestampUs: 1234, metadata: { step: 7 } };
      const input = new EncoderInput(rgba, 'main_video', metrics);
      const first = await input.host();
      const again = await input.host();
      expect(again).toBe(first);
      expect(first).toMatchObject({ width: WIDTH, height: HEIGHT, format: 'i420', timestampUs: 1234, metadata: { step: 7 } });
      // Within 1 LSB of the float64 reference (what the native converter is tested against).
      const reference = convertToYuv(rgba.data, { width: WIDTH, height: HEIGHT, format: 'rgba', implementation: 'js' });
      expect(first.data.length).toBe(reference.length);
      expect(first.data.every((v, i) => Math.abs(v - reference[i]!) <= 1)).toBe(true);
      expect(await counterValue(metrics, { track: 'main_video', from: 'rgba', by: 'native' })).toBe(1);
    },
  );

  it.skipIf(!built)(
    "reuses a pooled RGBA buffer's conversion when the pool hands the buffer out again; another buffer gets its own",
    async () => {
      const pooled = solidRgba(WIDTH, HEIGHT, RED);
      const first = await new EncoderInput(pooled, 't', undefined).host();
      const firstY = first.data[0];
      // The track's FramePool reissues a released buffer with new pixels.
      pooled.data.set(solidRgba(WIDTH, HEIGHT, [20, 200, 90]).data);
      const second = await new EncoderInput({ ...pooled }, 't', undefined).host();
      expect(second.data).toBe(first.data);
      expect(second.data[0]).not.toBe(firstY);
      expectColour(second, [20, 200, 90], 'reused buffer');
      const other = await new EncoderInput(solidRgba(WIDTH, HEIGHT, RED), 't', undefined).host();
      expect(other.data).not.toBe(second.data);
      expectColour(other, RED, 'another buffer');
    },
  );

  it('hands an I420 frame on as it is, and counts nothing', async () => {
    const metrics = new RuntimeMetrics({ processMetrics: false });
    const i420: VideoFrame = { width: 4, height: 2, format: 'i420', data: new Uint8Array(12) };
    expect(await new EncoderInput(i420, 't', metrics).host()).toBe(i420);
    expect(await counterValue(metrics, {})).toBe(0);
  });

  it('without the native addon hands RGBA to the encoders as before (they convert with swscale), never the JavaScript converter', async () => {
    addon.off = true;
    const metrics = new RuntimeMetrics({ processMetrics: false });
    const rgba = solidRgba(WIDTH, HEIGHT, RED);
    expect(await new EncoderInput(rgba, 't', metrics).host()).toBe(rgba);
    expect(await counterValue(metrics, {})).toBe(0);
  });

  it("with the benches' switch off hands RGBA to the encoders", async () => {
    setConvertRgbaOnce(false);
    const rgba = solidRgba(WIDTH, HEIGHT, RED);
    expect(await new EncoderInput(rgba, 't', undefined).host()).toBe(rgba);
  });
});

describe('OutputVideoTrack: RGBA frames converted once, however many read them (issue 26 part 3)', () => {
  /**
   * Emits FRAMES red RGBA frames into a track viewed by `codecs` (one sink each), with or without a
   * frame tap, and returns what was counted and what each viewer decodes.
   */
  async function fanOut(codecs: readonly VideoCodec[], tap: boolean, frame = solidRgba(WIDTH, HEIGHT, RED)) {
    const metrics = new RuntimeMetrics({ processMetrics: false });
    const track = new OutputVideoTrack(
      { name: 'main_video', kind: 'video', direction: 'recvonly', width: WIDTH, height: HEIGHT },
      30,
      createLogger({}, 'error'),
      metrics,
    );
    const sent = codecs.map(() => [] as SentFrame[]);
    for (const [i, codec] of codecs.entries()) {
      const sink = recordingSink(i + 1, codec, sent[i]!);
      track.addSink(sink, { paused: false });
      track.sinkReady(sink);
    }
    // Each viewer's picture opens on a black keyframe; let it leave first, so that no model frame
    // is held back for a viewer still waiting for its keyframe.
    for (let i = 0; i < 500 && sent.some((s) => s.length === 0); i++) await new Promise((resolve) => setTimeout(resolve, 10));
    const tapped: VideoFrame[] = [];
    if (tap) track.setFrameTap((f) => tapped.push({ ...f, data: new Uint8Array(f.data) }));
    for (let i = 0; i < FRAMES; i++) await track.emit(frame);
    // emit() resolves once a frame is queued: let the last ones out before closing (which drops them).
    for (let i = 0; i < 200 && (await encodes(metrics, codecs[0]!)) < FRAMES; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    await track.close();
    const dropped = await metrics.framesDropped
      .get()
      .then((m) => m.values.filter((v) => v.value > 0).map((v) => `${v.labels['reason']}: ${v.value}`));
    return {
      converted: await counterValue(metrics, { track: 'main_video', from: 'rgba', by: 'native' }),
      encoded: await Promise.all(codecs.map((codec) => encodes(metrics, codec))),
      dropped,
      tapped,
      pictures: await Promise.all(codecs.map((codec, i) => lastPicture(codec, sent[i]!))),
    };
  }

  for (const [consumers, codecs, tap] of [
    [1, ['h264'], false],
    [2, ['h264', 'vp8'], false],
    [3, ['h264', 'vp8'], true],
  ] as const) {
    it.skipIf(!built)(
      `${consumers} consumer${consumers > 1 ? 's' : ''} (${codecs.join(' + ')}${tap ? ' + the frame tap' : ''}): one conversion per frame sent, and every viewer decodes the colour emitted`,
      async () => {
        const result = await fanOut(codecs, tap);
        expect(result.dropped).toEqual([]);
        expect(result.converted).toBe(FRAMES);
        // Every stream encoded every frame, from the one conversion.
        expect(result.encoded).toEqual(codecs.map(() => FRAMES));
        if (tap) {
          expect(result.tapped.length).toBe(FRAMES);
          for (const f of result.tapped) {
            expect(f.format).toBe('i420');
            expectColour(f, RED, 'tapped frame');
          }
        }
        for (const [i, picture] of result.pictures.entries()) {
          expect(picture, `${codecs[i]} viewer decoded nothing`).toBeDefined();
          expect([picture!.width, picture!.height]).toEqual([WIDTH, HEIGHT]);
          expectColour(picture!, RED, `${codecs[i]} viewer`);
        }
      },
      30_000,
    );
  }

  it.skipIf(!built)(
    'an RGBA frame of another size than the track is converted once at its size and scaled by each encoder',
    async () => {
      const result = await fanOut(['h264', 'vp8'], false, solidRgba(WIDTH * 2, HEIGHT * 2, RED));
      expect(result.converted).toBe(FRAMES);
      for (const [i, picture] of result.pictures.entries()) {
        expect([picture!.width, picture!.height]).toEqual([WIDTH, HEIGHT]);
        expectColour(picture!, RED, `viewer ${i}`);
      }
    },
    30_000,
  );

  it('without the native addon: RGBA goes to each encoder (swscale), nothing is counted, the picture is the same', async () => {
    addon.off = true;
    const result = await fanOut(['h264', 'vp8'], true);
    expect(result.converted).toBe(0);
    expect(result.encoded).toEqual([FRAMES, FRAMES]);
    expect(result.tapped.every((f) => f.format === 'rgba')).toBe(true);
    for (const [i, picture] of result.pictures.entries()) expectColour(picture!, RED, `viewer ${i}`);
  }, 30_000);
});
