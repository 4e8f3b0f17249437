import { describe, expect, it } from 'vitest';
import { OPUS_FRAME_SAMPLES, OpusDecoder, OpusEncoder } from './opus.ts';

function sineFrames(channels: 1 | 2, frames: number, hz = 440, amplitude = 12_000): Int16Array[] {
  const out: Int16Array[] = [];
  let n = 0;
  for (let f = 0; f < frames; f++) {
    const samples = new Int16Array(OPUS_FRAME_SAMPLES * channels);
    for (let i = 0; i < OPUS_FRAME_SAMPLES; i++, n++) {
      const value = Math.round(amplitude * Math.sin((2 * Math.PI * hz * n) / 48_000));
      for (let c = 0; c < channels; c++) samples[i * channels + c] = value;
    }
    out.push(samples);
  }
  return out;
}

function rms(chunks: Int16Array[]): number {
  let sum = 0;
  let count = 0;
  for (const chunk of chunks) {
    for (const v of chunk) sum += v * v;
    count += chunk.length;
  }
  return Math.sqrt(sum / count);
}

describe('Opus', () => {
  it.each([1, 2] as const)('%d channel(s): 440 Hz sine round-trips with its energy, one packet per 20 ms frame', async (channels) => {
    const encoder = await OpusEncoder.create({ sampleRate: 48_000, channels });
    const decoder = await OpusDecoder.create({ sampleRate: 48_000, channels });
    try {
      const input = sineFrames(channels, 50);
      const output: Int16Array[] = [];
      const reused = new Int16Array(OPUS_FRAME_SAMPLES * channels);
      for (const frame of input) {
        reused.set(frame); // the same caller buffer every time
        const packets = await encoder.encode(reused);
        expect(packets).toHaveLength(1);
        const decoded = await decoder.decode(packets[0]!);
        expect(decoded.sampleRate).toBe(48_000);
        expect(decoded.channels).toBe(channels);
        expect(decoded.samples).toHaveLength(OPUS_FRAME_SAMPLES * channels);
        output.push(decoded.samples);
      }
      // Skip the first frames: codec start-up and lookahead.
      const ratio = rms(output.slice(5)) / rms(input.slice(5));
      expect(ratio).toBeGreaterThan(0.7);
      expect(ratio).toBeLessThan(1.3);
    } finally {
      encoder.close();
      decoder.close();
    }
  });

  it('rejects frames that are not exactly 20 ms', async () => {
    const encoder = await OpusEncoder.create({ sampleRate: 48_000, channels: 2 });
    try {
      await expect(encoder.encode(new Int16Array(960))).rejects.toThrow(RangeError);
      expect(await encoder.encode(new Int16Array(1920))).toHaveLength(1);
    } finally {
      encoder.close();
    }
  });

  it('rejects unsupported formats', async () => {
    // @ts-expect-error only 48 kHz is accepted
    await expect(OpusEncoder.create({ sampleRate: 44_100, channels: 1 })).rejects.toThrow(RangeError);
    // @ts-expect-error only mono and stereo
    await expect(OpusDecoder.create({ sampleRate: 48_000, channels: 3 })).rejects.toThrow(RangeError);
  });

  it('decoder rejects an empty packet and both sides reject after close', async () => {
    const encoder = await OpusEncoder.create({ sampleRate: 48_000, channels: 1 });
    const decoder = await OpusDecoder.create({ sampleRate: 48_000, channels: 1 });
    await expect(decoder.decode(Buffer.alloc(0))).rejects.toThrow(/empty/);
    encoder.close();
    encoder.close();
    decoder.close();
    decoder.close();
    await expect(encoder.encode(new Int16Array(960))).rejects.toThrow(/closed/);
    await expect(decoder.decode(Buffer.from([0xf8, 0xff, 0xfe]))).rejects.toThrow(/closed/);
  });
});
