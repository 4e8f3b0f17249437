/** resolveRuntimeSettings: the defaults, and the recording options refused before anything starts. */

import { describe, expect, it } from 'vitest';
import { MAX_MESSAGE_BYTES } from '../protocol/messages.ts';
import type { ModelDefinition } from './model/definition.ts';
import { resolveRuntimeSettings } from './runtime-options.ts';

const model: ModelDefinition<unknown> = {
  name: 'm',
  fps: 10,
  tracks: [
    { name: 'main_video', kind: 'video', direction: 'recvonly', width: 64, height: 64 },
    { name: 'camera', kind: 'video', direction: 'sendonly' },
  ],
  async run() {},
};

describe('resolveRuntimeSettings', () => {
  it('fills in every default', () => {
    expect(resolveRuntimeSettings({ model: model as ModelDefinition<never> }, { model, hardwareH265: false })).toEqual({
      port: 8080,
      listenHost: '127.0.0.1',
      corsOrigins: '*',
      playground: true,
      dev: false,
      iceServers: [],
      videoCodecs: ['h264', 'vp8'],
      reconnectGraceMs: 60_000,
      maxMessageBytes: MAX_MESSAGE_BYTES,
      latencyMode: 'smooth',
    });
  });

  it("puts H.265 first with a hardware encoder, takes the model's latency mode, and converts seconds", () => {
    const settings = resolveRuntimeSettings(
      { model: model as ModelDefinition<never>, maxSessionSeconds: 90, reconnectGraceSeconds: 5 },
      { model: { ...model, latencyMode: 'realtime' }, hardwareH265: true },
    );
    expect(settings).toMatchObject({
      videoCodecs: ['h265', 'h264', 'vp8'],
      latencyMode: 'realtime',
      maxDurationMs: 90_000,
      reconnectGraceMs: 5_000,
    });
  });

  it('refuses a recording track the model does not output, and a clip cap shorter than a segment', () => {
    expect(() =>
      resolveRuntimeSettings({ model: model as ModelDefinition<never>, recording: { track: 'camera' } }, { model, hardwareH265: false }),
    ).toThrow('recording.track "camera" is not an output video track of model "m" (its output video tracks: main_video)');
    expect(() =>
      resolveRuntimeSettings(
        { model: model as ModelDefinition<never>, recording: { maxClipSeconds: 2, segmentSeconds: 4 } },
        { model, hardwareH265: false },
      ),
    ).toThrow('recording.maxClipSeconds (2) must be at least the segment length (4 s)');
  });

  it('fills in the adaptation bounds an operator sets, and refuses a bad pair', () => {
    const resolve = (video: { minBitrateKbps?: number; maxBitrateKbps?: number }) =>
      resolveRuntimeSettings({ model: model as ModelDefinition<never>, video }, { model, hardwareH265: false });
    expect(resolve({ minBitrateKbps: 800 }).videoBitrate).toEqual({ minKbps: 800, maxKbps: 10_000 });
    expect(resolve({ maxBitrateKbps: 3_000 }).videoBitrate).toEqual({ minKbps: 500, maxKbps: 3_000 });
    expect(resolve({}).videoBitrate).toBeUndefined();
    expect(() => resolve({ minBitrateKbps: 4_000, maxBitrateKbps: 3_000 })).toThrow(
      'video.minBitrateKbps (4000) must not be above video.maxBitrateKbps (3000)',
    );
    expect(() => resolve({ minBitrateKbps: 10 })).toThrow('video.minBitrateKbps must be from 50 to 100,000 kbit/s; got 10');
    expect(() => resolve({ maxBitrateKbps: Number.NaN })).toThrow('video.maxBitrateKbps must be from 50 to 100,000 kbit/s');
  });
});
