/**
 * Rate control that holds its target (issue 25 part 3): on noise — fresh every frame, so no
 * encoder can predict it and the rate control alone decides what is spent — every software
 * backend delivers within ±15 % of its target over every 2 s window, and a `setBitrate` reaches
 * the running encoder for every codec (libvpx and libx265 by reopening it).
 *
 * The encoders budget by frame timestamps (pts is a frame counter), not by the wall clock, and
 * these encoders are deterministic, so the bytes do not depend on how loaded the machine is.
 * bench/rate-control.ts measures the same at 720p.
 */
import { describe, expect, it } from 'vitest';
import { ENCODER_BACKEND_CANDIDATES } from './encoder-backends.ts';
import { FfmpegVideoEncoder, REOPEN_HOLD_S, REOPEN_MIN_INTERVAL_S } from './ffmpeg-video-encoder.ts';
import { openStreamEncoder } from './video-encoder-factory.ts';
import type { EncoderBackend, H264Profile, StreamVideoEncoder } from './video-encoder.ts';
import { seededRandom as random } from '../../test/support/network-lab/clock.ts';

const WIDTH = 640;
const HEIGHT = 360;
const FPS = 30;
const WINDOW = 2 * FPS;
const TOLERANCE = 0.15;

function backend(name: string): EncoderBackend {
  const found = Object.values(ENCODER_BACKEND_CANDIDATES)
    .flat()
    .find((c) => c.backend.name === name);
  if (!found) throw new Error(`no ${name} candidate`);
  return found.backend;
}

/** How much noise: ± around mid-grey in luma and in chroma. */
interface Noise {
  readonly luma: number;
  readonly chroma: number;
}
/** About what bench/support/pictures.ts's `grain` (128 ± 24 luma, colour bars) costs. */
const GRAIN: Noise = { luma: 24, chroma: 16 };
/**
 * Heavier: at 150 kbit/s more than any quantizer gets a frame of it down to (a 640x360 frame
 * at libvpx's old max quantizer, 56, cost ~1.9x the budget), so only frame dropping holds it.
 */
const HEAVY: Noise = { luma: 32, chroma: 8 };

/**
 * I420 frames of fresh noise in every plane: rows copied from a pool at random offsets, so
 * consecutive frames share nothing.
 */
class NoiseFrames {
  readonly #luma = new Uint8Array(1 << 20);
  readonly #chroma = new Uint8Array(1 << 18);
  readonly #frame = new Uint8Array((WIDTH * HEIGHT * 3) / 2);
  readonly #rand = random(0x5eed);

  constructor({ luma, chroma }: Noise) {
    const r = random(42);
    for (let i = 0; i < this.#luma.length; i++) this.#luma[i] = 128 - luma + Math.floor(r() * (2 * luma + 1));
    for (let i = 0; i < this.#chroma.length; i++) this.#chroma[i] = 128 - chroma + Math.floor(r() * (2 * chroma + 1));
  }

  next(): Uint8Array {
    const rows = (pool: Uint8Array, offset: number, width: number, height: number): void => {
      for (let row = 0; row < height; row++) {
        const at = Math.floor(this.#rand() * (pool.length - width));
        this.#frame.set(pool.subarray(at, at + width), offset + row * width);
      }
    };
    rows(this.#luma, 0, WIDTH, HEIGHT);
    rows(this.#chroma, WIDTH * HEIGHT, WIDTH / 2, HEIGHT);
    return this.#frame;
  }
}

async function open(name: string, kbps: number, profile?: H264Profile): Promise<StreamVideoEncoder> {
  const b = backend(name);
  return openStreamEncoder({
    codec: b.codec,
    width: WIDTH,
    height: HEIGHT,
    fps: FPS,
    bitrateKbps: kbps,
    backend: b,
    ...(profile ? { profile } : {}),
  });
}

/** Feeds an encoder fresh noise, frame i at i / FPS s; notes which frames came out keyframes. */
class NoiseFeed {
  readonly keyframes: number[] = [];
  readonly #encoder: StreamVideoEncoder;
  readonly #noise: NoiseFrames;
  #next = 0;

  constructor(encoder: StreamVideoEncoder, level: Noise) {
    this.#encoder = encoder;
    this.#noise = new NoiseFrames(level);
  }

  /** Encodes the next frame; its bytes. */
  async encodeOne(): Promise<number> {
    const i = this.#next++;
    const out = await this.#encoder.encode({
      width: WIDTH,
      height: HEIGHT,
      format: 'i420',
      data: this.#noise.next(),
      timestampUs: Math.round((i * 1e6) / FPS),
    });
    if (out.some((unit) => unit.keyframe)) this.keyframes.push(i);
    return out.reduce((n, unit) => n + unit.data.byteLength, 0);
  }

  /** Encodes frames until frame `end` (exclusive) is next. */
  async encodeUntil(end: number): Promise<void> {
    while (this.#next < end) await this.encodeOne();
  }
}

/** Encodes `frames` noise frames; `before(i)` runs ahead of frame i. Bytes per frame. */
async function encodeNoise(
  encoder: StreamVideoEncoder,
  noiseLevel: Noise,
  frames: number,
  before?: (i: number) => void,
): Promise<number[]> {
  const feed = new NoiseFeed(encoder, noiseLevel);
  const bytes: number[] = [];
  for (let i = 0; i < frames; i++) {
    before?.(i);
    bytes.push(await feed.encodeOne());
  }
  return bytes;
}

/** Delivered / target over every 2 s window (sliding by a frame) that starts in [from, to). */
function windowRatios(bytes: readonly number[], kbps: number, from = 0, to = bytes.length): number[] {
  const ratios: number[] = [];
  for (let start = from; start + WINDOW <= to; start++) {
    let sum = 0;
    for (let i = start; i < start + WINDOW; i++) sum += bytes[i]!;
    ratios.push((sum * 8) / 2 / 1000 / kbps);
  }
  return ratios;
}

function expectWithin(ratios: readonly number[], label: string): void {
  const min = Math.min(...ratios);
  const max = Math.max(...ratios);
  expect({ label, min, max, ok: min >= 1 - TOLERANCE && max <= 1 + TOLERANCE }).toMatchObject({ label, ok: true });
}

describe('rate control on noise: every 2 s window within ±15 % of the target (640x360, 6 s)', () => {
  for (const [name, kbps, noise, profile] of [
    ['libx264', 600, GRAIN, 'constrained-baseline'],
    ['libx264', 600, GRAIN, 'high'],
    ['libx265', 600, GRAIN, undefined],
    // Old settings: the start ran at 72 % of the target (the buffer started below its optimal level).
    ['libvpx', 600, GRAIN, undefined],
    // Old settings (qmax 56, no frame dropping): 1.9x the target.
    ['libvpx', 150, HEAVY, undefined],
  ] as const) {
    it(
      `${name}${profile ? ` (${profile})` : ''} at ${kbps} kbit/s${noise === HEAVY ? ', heavy noise' : ''}`,
      { timeout: 60_000 },
      async () => {
        const encoder = await open(name, kbps, profile);
        try {
          const bytes = await encodeNoise(encoder, noise, 6 * FPS);
          expectWithin(windowRatios(bytes, kbps), `${name} ${kbps}`);
        } finally {
          encoder.close();
        }
      },
    );
  }
});

describe('setBitrate reaches the running encoder for every codec', () => {
  for (const [name, from, to] of [
    ['libvpx', 600, 250],
    ['libvpx', 250, 600],
    ['libx265', 600, 250],
    ['libx264', 600, 250],
  ] as const) {
    it(
      `${name}: ${from} → ${to} kbit/s after 2 s; the 2 s windows from the change on are within ±15 % of ${to}`,
      { timeout: 60_000 },
      async () => {
        const encoder = await open(name, from);
        const step = 2 * FPS;
        try {
          expect(encoder.adjustsBitrateLive).not.toBe(false);
          const bytes = await encodeNoise(encoder, GRAIN, 6 * FPS, (i) => {
            if (i === step) encoder.setBitrate(to);
          });
          expect(encoder.bitrateKbps).toBe(to);
          expectWithin(windowRatios(bytes, to, step), `${name} ${from} → ${to}`);
        } finally {
          encoder.close();
        }
      },
    );
  }

  it('libvpx: a change under 15 % waits for a requested keyframe, or at most REOPEN_HOLD_S', { timeout: 60_000 }, async () => {
    const encoder = await open('libvpx', 600);
    try {
      expect(encoder).toBeInstanceOf(FfmpegVideoEncoder);
      const vp8 = encoder as FfmpegVideoEncoder;
      const feed = new NoiseFeed(vp8, GRAIN);
      await feed.encodeUntil(10);
      vp8.setBitrate(560); // −7 %: held
      await feed.encodeUntil(20);
      expect(vp8.reopens).toBe(0);
      expect(feed.keyframes).toEqual([0]);
      vp8.requestKeyframe(); // a keyframe is coming anyway: the held change rides on it
      await feed.encodeOne();
      expect(vp8.reopens).toBe(1);
      expect(feed.keyframes).toEqual([0, 20]);
      vp8.setBitrate(600); // +7 %, and no keyframe asked for: applied after REOPEN_HOLD_S
      const hold = REOPEN_HOLD_S * FPS;
      await feed.encodeUntil(21 + hold);
      expect(vp8.reopens).toBe(1);
      await feed.encodeOne();
      expect(vp8.reopens).toBe(2);
      expect(feed.keyframes).toEqual([0, 20, 21 + hold]);
    } finally {
      encoder.close();
    }
  });

  it(
    'libvpx: reopens at most once per REOPEN_MIN_INTERVAL_S; a change that comes sooner waits and takes the latest target',
    { timeout: 60_000 },
    async () => {
      const vp8 = (await open('libvpx', 600)) as FfmpegVideoEncoder;
      try {
        const feed = new NoiseFeed(vp8, GRAIN);
        const keyframes = feed.keyframes;
        const encodeUntil = (end: number): Promise<void> => feed.encodeUntil(end);
        const interval = REOPEN_MIN_INTERVAL_S * FPS;
        await encodeUntil(interval + 10);
        vp8.setBitrate(400); // −33 %, the last open a second back: at once
        await encodeUntil(interval + 15);
        expect(keyframes).toEqual([0, interval + 10]);
        vp8.setBitrate(250); // too soon after that reopen: waits
        await encodeUntil(interval + 20);
        vp8.setBitrate(200);
        await encodeUntil(2 * interval + 10);
        expect(vp8.reopens).toBe(1);
        await encodeUntil(2 * interval + 11);
        expect(vp8.reopens).toBe(2);
        expect(keyframes).toEqual([0, interval + 10, 2 * interval + 10]);
        expect(vp8.bitrateKbps).toBe(200);
      } finally {
        vp8.close();
      }
    },
  );
});
