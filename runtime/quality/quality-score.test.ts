import { describe, expect, it } from 'vitest';
import { qualityFactors, qualityScore, ramp } from './quality-score.ts';

const clean = { loss: 0, jitterMs: 2, rttMs: 1, fps: 30, targetFps: 30, freezes: 0 };

describe('ramp', () => {
  it('is 0 on the good side, 1 beyond bad, linear between, in either direction', () => {
    expect(ramp(0, 10, 20)).toBe(0);
    expect(ramp(10, 10, 20)).toBe(0);
    expect(ramp(15, 10, 20)).toBe(0.5);
    expect(ramp(25, 10, 20)).toBe(1);
    expect(ramp(1, 0.9, 0.2)).toBe(0);
    expect(ramp(0.55, 0.9, 0.2)).toBeCloseTo(0.5);
    expect(ramp(0, 0.9, 0.2)).toBe(1);
    expect(ramp(Infinity, 10, 20)).toBe(1);
    expect(ramp(Number.NaN, 10, 20)).toBe(0);
  });
});

describe('qualityScore', () => {
  it('scores a clean link 10, and nothing measured yet 10', () => {
    expect(qualityScore(clean)).toBe(10);
    expect(qualityScore({})).toBe(10);
  });

  it('matches the worked examples in the formula comment', () => {
    expect(qualityScore({ ...clean, loss: 0.05 })).toBe(7.2);
    expect(qualityScore({ ...clean, loss: 0.1 })).toBe(4);
    expect(qualityScore({ ...clean, loss: 0.02, rttMs: 200 })).toBe(8.8);
    expect(qualityScore({ ...clean, fps: 15 })).toBe(4.3);
  });

  it('drops monotonically as each impairment grows', () => {
    const series = (key: keyof typeof clean, values: number[]) => values.map((v) => qualityScore({ ...clean, [key]: v }));
    const nonIncreasing = (xs: number[]) => xs.every((x, i) => i === 0 || x <= xs[i - 1]!);
    for (const [key, values] of [
      ['loss', [0, 0.005, 0.01, 0.03, 0.05, 0.1, 0.5]],
      ['jitterMs', [0, 20, 50, 100, 150, 1000]],
      ['rttMs', [0, 150, 300, 600, 2000]],
      ['freezes', [0, 1, 2, 5]],
    ] as const) {
      const scores = series(key, [...values]);
      expect(nonIncreasing(scores), `${key}: ${scores.join(' ')}`).toBe(true);
      expect(scores[0]).toBe(10);
      expect(scores.at(-1)!).toBeLessThan(10);
    }
    const byFps = [30, 27, 20, 10, 6, 0].map((fps) => qualityScore({ ...clean, fps }));
    expect(nonIncreasing(byFps)).toBe(true);
    expect(byFps[0]).toBe(10);
    expect(byFps.at(-1)).toBe(0);
  });

  it('brings the score to 0 when no frames reach the client, whatever else is fine', () => {
    expect(qualityScore({ ...clean, fps: 0 })).toBe(0);
    expect(qualityScore({ ...clean, fps: 5 })).toBe(0);
  });

  it('does not blame the network for a model that emits slowly or not at all', () => {
    // fps is compared with what the model could have had sent (targetFps), not the declared rate.
    expect(qualityScore({ ...clean, fps: 10, targetFps: 10 })).toBe(10);
    expect(qualityScore({ ...clean, fps: 0, targetFps: 0 })).toBe(10);
    expect(qualityScore({ ...clean, fps: undefined, targetFps: undefined })).toBe(10);
  });

  it('bounds each factor and the score', () => {
    const worst = { loss: 1, jitterMs: 10_000, rttMs: 10_000, fps: 0, targetFps: 30, freezes: 100 };
    expect(qualityScore(worst)).toBe(0);
    const f = qualityFactors({ loss: 1, jitterMs: 10_000, rttMs: 10_000, freezes: 100 });
    expect(f).toEqual({ loss: 0.4, jitter: 0.7, rtt: 0.7, fps: 1, freeze: 0.5 });
    expect(qualityScore({ loss: 1, jitterMs: 10_000, rttMs: 10_000, freezes: 100 })).toBe(1);
    expect(qualityScore({ ...clean, loss: -1, freezes: -3 })).toBe(10);
  });

  it('compounds impairments (product of factors) and rounds to one decimal', () => {
    const score = qualityScore({ ...clean, loss: 0.05, freezes: 1 });
    expect(score).toBe(Math.round(0.7158 * 0.75 * 100) / 10);
    expect(Number.isInteger(score * 10)).toBe(true);
  });
});
