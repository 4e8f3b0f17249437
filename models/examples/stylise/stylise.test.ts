/**
 * The stylise example's parts, real onnxruntime-node throughout: the generated network (loads,
 * keeps any size, strength 0 is the identity, 1 a visible style, the same bytes every build),
 * the worker-thread engine and its provider fallback, and webcam frame → tensor.
 */

import { createHash } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { InferenceSession, Tensor } from 'onnxruntime-node';
import type { VideoFrame } from 'arclight/runtime';
import { rgbToYuv } from '../shared/i420-canvas.ts';
import { frameToTensor } from './frame-tensor.ts';
import { chooseProviders, StyliseEngine } from './stylise-engine.ts';
import { buildStyliseNetwork, STYLISE_IO } from './stylise-network.ts';

/** A picture with structure: horizontal and vertical ramps in R and G, a blue square, some texture. */
function testImage(width: number, height: number): Float32Array {
  const plane = width * height;
  const image = new Float32Array(3 * plane);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const o = y * width + x;
      const inSquare = x > width / 4 && x < (3 * width) / 4 && y > height / 4 && y < (3 * height) / 4;
      image[o] = x / (width - 1);
      image[plane + o] = y / (height - 1);
      image[2 * plane + o] = inSquare ? 0.9 : 0.1 + 0.05 * (((x * 7 + y * 13) % 5) / 5);
    }
  }
  return image;
}

async function stylise(session: InferenceSession, image: Float32Array, width: number, height: number, strength: number): Promise<Tensor> {
  const results = await session.run({
    [STYLISE_IO.image]: new Tensor('float32', image, [1, 3, height, width]),
    [STYLISE_IO.strength]: new Tensor('float32', Float32Array.of(strength), [1]),
  });
  return results[STYLISE_IO.output]!;
}

function maxAbsDifference(a: Float32Array, b: Float32Array): number {
  let max = 0;
  for (let i = 0; i < a.length; i++) max = Math.max(max, Math.abs(a[i]! - b[i]!));
  return max;
}

function meanAbsDifference(a: Float32Array, b: Float32Array): number {
  let sum = 0;
  for (let i = 0; i < a.length; i++) sum += Math.abs(a[i]! - b[i]!);
  return sum / a.length;
}

describe('the generated stylise network', () => {
  it('loads in onnxruntime-node with image [1,3,H,W] and strength [1] in, stylised [1,3,H,W] out', async () => {
    const session = await InferenceSession.create(buildStyliseNetwork(), { executionProviders: ['cpu'] });
    expect(session.inputNames).toEqual(['image', 'strength']);
    expect(session.outputNames).toEqual(['stylised']);
    expect(session.inputMetadata).toEqual([
      { name: 'image', isTensor: true, type: 'float32', shape: [1, 3, 'H', 'W'] },
      { name: 'strength', isTensor: true, type: 'float32', shape: [1] },
    ]);
    expect(session.outputMetadata).toEqual([{ name: 'stylised', isTensor: true, type: 'float32', shape: [1, 3, 'H', 'W'] }]);
    await session.release();
  });

  it('keeps an odd size, is the identity at strength 0 and a visible style at 1, in 0–1', async () => {
    const session = await InferenceSession.create(buildStyliseNetwork(), { executionProviders: ['cpu'] });
    const [width, height] = [37, 23];
    const image = testImage(width, height);
    const identity = await stylise(session, image, width, height, 0);
    expect(identity.dims).toEqual([1, 3, height, width]);
    expect(maxAbsDifference(identity.data as Float32Array, image)).toBeLessThanOrEqual(1e-6);

    const styled = (await stylise(session, image, width, height, 1)).data as Float32Array;
    expect(meanAbsDifference(styled, image)).toBeGreaterThan(0.05);
    expect(Math.min(...styled)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...styled)).toBeLessThanOrEqual(1);
    // Posterised (ink lines included: they are drawn before it): every value is one of the 5
    // levels (k + 0.5) / 5, or 1 where the top level is clipped.
    const levels = new Set(Array.from(styled, (v) => v.toFixed(4)));
    expect([...levels].every((v) => ['0.1000', '0.3000', '0.5000', '0.7000', '0.9000', '1.0000'].includes(v))).toBe(true);
    expect(levels.size).toBeGreaterThanOrEqual(4);

    // Halfway is halfway: strength blends linearly.
    const half = (await stylise(session, image, width, height, 0.5)).data as Float32Array;
    for (let i = 0; i < image.length; i += 97) expect(half[i]).toBeCloseTo((image[i]! + styled[i]!) / 2, 5);
    await session.release();
  });

  it('is the same bytes on every build', () => {
    const first = buildStyliseNetwork();
    expect(buildStyliseNetwork()).toEqual(first);
    // Pinned: a change to the weights or the graph is a deliberate one (update this and the docs).
    expect(createHash('sha256').update(first).digest('hex')).toBe('11b262f9168b087ef8ff7d61f7c55e141ed6cde900810c6d11e20326b4ad30bc');
  });
});

describe('the stylise engine (worker thread)', () => {
  const engines: StyliseEngine[] = [];
  afterAll(async () => {
    for (const engine of engines) await engine.close();
  });

  /** An I420 frame with structure: a luma ramp and two chroma waves. */
  function cameraFrame(width: number, height: number): VideoFrame {
    const chroma = Math.ceil(width / 2) * Math.ceil(height / 2);
    const data = new Uint8Array(width * height + 2 * chroma);
    for (let i = 0; i < width * height; i++) data[i] = 16 + ((i % width) * 219) / width;
    for (let i = 0; i < chroma; i++) {
      data[width * height + i] = 128 + 50 * Math.sin(i / 7);
      data[width * height + chroma + i] = 128 + 50 * Math.cos(i / 11);
    }
    return { width, height, format: 'i420', data };
  }

  it('gives what a session on this thread gives for the same frame, frame after frame', async () => {
    const engine = await StyliseEngine.start(buildStyliseNetwork(), { providers: ['cpu'] });
    engines.push(engine);
    expect(engine.provider).toBe('cpu');
    const session = await InferenceSession.create(buildStyliseNetwork(), { executionProviders: ['cpu'] });
    // Odd frame sizes; a size change reallocates the buffer that travels to the worker and back.
    for (const [width, height, size] of [
      [65, 49, 32],
      [65, 49, 32],
      [99, 71, 40],
    ] as const) {
      const frame = cameraFrame(width, height);
      const before = frame.data.slice();
      const result = await engine.stylise(frame, size, 1);
      const expected = (await stylise(session, frameToTensor(frame, size), size, size, 1)).data as Float32Array;
      expect(result.output.length).toBe(3 * size * size);
      expect(maxAbsDifference(result.output, expected)).toBeLessThanOrEqual(1e-6);
      expect(frame.data).toEqual(before); // the caller's frame is copied, never moved
      expect(result.runMs).toBeGreaterThan(0);
    }
    await session.release();
  });

  it('rejects a broken frame and goes on serving', async () => {
    const engine = await StyliseEngine.start(buildStyliseNetwork(), { providers: ['cpu'] });
    engines.push(engine);
    const broken: VideoFrame = { width: 64, height: 64, format: 'i420', data: new Uint8Array(100) };
    await expect(engine.stylise(broken, 16, 1)).rejects.toThrow(/inference failed: frameToTensor: 64x64 i420 needs 6144 bytes/);
    expect(engine.dead).toBe(false);
    const frame = cameraFrame(20, 20);
    const identity = await engine.stylise(frame, 16, 0);
    expect(maxAbsDifference(identity.output, frameToTensor(frame, 16))).toBeLessThanOrEqual(1e-6);
  });

  it('falls back to the CPU when the CUDA provider cannot load, and says why', async () => {
    // This machine has no CUDA provider libraries (package.json's allowScripts skips their download).
    const engine = await StyliseEngine.start(buildStyliseNetwork(), { providers: ['cuda', 'cpu'] });
    engines.push(engine);
    expect(engine.provider).toBe('cpu');
    expect(engine.failures).toEqual([{ provider: 'cuda', message: expect.stringMatching(/cuda|shared/i) }]);
  });

  it('fails to start, naming each provider, when none loads (an explicit list is tried as given)', async () => {
    await expect(StyliseEngine.start(buildStyliseNetwork(), { providers: ['no-such-provider'] })).rejects.toThrow(
      /no execution provider could load the network \(tried no-such-provider\): no-such-provider: not a backend/,
    );
  });

  it('chooses providers: the environment first, CUDA when listed and installed, the CPU last', () => {
    expect(chooseProviders(undefined, ['cpu', 'cuda'], false)).toEqual(['cpu']);
    expect(chooseProviders(undefined, ['cpu', 'cuda'], true)).toEqual(['cuda', 'cpu']);
    expect(chooseProviders(undefined, ['cpu'], true)).toEqual(['cpu']);
    expect(chooseProviders('CUDA', ['cpu'], false)).toEqual(['cuda', 'cpu']);
    expect(chooseProviders(' cpu , cuda ', ['cpu', 'cuda'], true)).toEqual(['cpu', 'cuda']);
    expect(chooseProviders('', ['cpu', 'cuda'], false)).toEqual(['cpu']);
  });
});

describe('webcam frame → tensor', () => {
  it('turns a solid I420 colour into that RGB (BT.601 limited), at an odd input size', () => {
    const [width, height] = [321, 241];
    const [r, g, b] = [40, 80, 200];
    const { y, u, v } = rgbToYuv(r, g, b);
    const chroma = Math.ceil(width / 2) * Math.ceil(height / 2);
    const data = new Uint8Array(width * height + 2 * chroma);
    data.fill(y, 0, width * height);
    data.fill(u, width * height, width * height + chroma);
    data.fill(v, width * height + chroma);
    const tensor = frameToTensor({ width, height, format: 'i420', data }, 256);
    expect(tensor.length).toBe(3 * 256 * 256);
    for (const i of [0, 1000, 256 * 256 - 1]) {
      expect(tensor[i]! * 255).toBeCloseTo(r, -0.5); // within ±1.6
      expect(tensor[256 * 256 + i]! * 255).toBeCloseTo(g, -0.5);
      expect(tensor[2 * 256 * 256 + i]! * 255).toBeCloseTo(b, -0.5);
    }
  });

  it('takes the centred square and scales it: left and right of a landscape frame are cut', () => {
    // 8x4 RGBA: columns 0–1 red, 2–5 green, 6–7 blue → the centred 4x4 square is all green.
    const data = new Uint8Array(8 * 4 * 4);
    for (let i = 0; i < 8 * 4; i++) {
      const x = i % 8;
      data.set(x < 2 ? [255, 0, 0, 255] : x < 6 ? [0, 255, 0, 255] : [0, 0, 255, 255], i * 4);
    }
    const tensor = frameToTensor({ width: 8, height: 4, format: 'rgba', data }, 8);
    const plane = 64;
    for (let i = 0; i < plane; i++) {
      expect(tensor[i]).toBe(0);
      expect(tensor[plane + i]).toBe(1);
      expect(tensor[2 * plane + i]).toBe(0);
    }
    expect(() => frameToTensor({ width: 8, height: 4, format: 'rgba', data }, 8, new Float32Array(3))).toThrow(RangeError);
  });
});
