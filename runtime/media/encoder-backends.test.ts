import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  ENCODER_BACKEND_CANDIDATES,
  NoEncoderBackendError,
  chooseEncoderBackend,
  describeEncoderBackendSelection,
  listEncoderBackends,
  processEncoderBackends,
  type EncoderBackend,
  type EncoderBackendCandidate,
} from './encoder-backends.ts';
import { createFfmpegEncoderContext } from './ffmpeg-encoder-options.ts';
import { VideoEncoder } from './video-encoder-factory.ts';
import type { VideoCodec } from './video-encoder.ts';
import { nativeAddon, nativeAddonStatus } from '../native/native-addon.ts';

/** No NVIDIA driver device node: NVENC cannot open, whatever the FFmpeg build lists. */
const noNvidiaDevice = !existsSync('/dev/nvidiactl');

/**
 * Why Arclight's own NVENC binding is passed over on a machine with no NVIDIA device, as a rule over
 * the three states a machine can be in (CI runs this file in each: .ci/run): no addon (its status
 * says why), an addon built without the NVENC headers ("compiled out"), or one built with them
 * that finds no driver library.
 */
function nativeNvencReasonHere(): RegExp {
  const status = nativeAddonStatus();
  if (!status.loaded) return new RegExp(`^unavailable: native addon ${escape(status.reason ?? 'not loaded')}$`);
  if (!nativeAddon()!.features().nvenc)
    return /^unavailable: compiled out: the NVENC headers \(Debian libffmpeg-nvenc-dev, \/usr\/include\/ffnvcodec\) were not found/;
  return /^unavailable: (libcuda\.so\.1|libnvidia-encode\.so\.1) could not be loaded/;
}

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function fake(
  name: string,
  codec: VideoCodec,
  hardware: boolean,
  available: () => Promise<{ available: true } | { available: false; reason: string }>,
): EncoderBackendCandidate & { probes: number } {
  const backend: EncoderBackend = { name, codec, hardware, implementation: 'ffmpeg' };
  const candidate = {
    backend,
    probes: 0,
    available: async () => {
      candidate.probes++;
      return available();
    },
  };
  return candidate;
}

describe('encoder backend selection on this machine', () => {
  it("lists Arclight's NVENC binding first for H.264 and H.265, then FFmpeg's NVENC, then the software encoder; VP8 is software only", () => {
    const names = (codec: VideoCodec): [string, boolean][] =>
      ENCODER_BACKEND_CANDIDATES[codec].map((c) => [c.backend.name, c.backend.hardware]);
    expect(names('h264')).toEqual([
      ['arclight_nvenc_h264', true],
      ['h264_nvenc', true],
      ['libx264', false],
    ]);
    expect(names('h265')).toEqual([
      ['arclight_nvenc_hevc', true],
      ['hevc_nvenc', true],
      ['libx265', false],
    ]);
    expect(ENCODER_BACKEND_CANDIDATES.h264[0]!.backend.implementation).toBe('native-nvenc');
    expect(names('vp8')).toEqual([['libvpx', false]]);
  });

  it.runIf(noNvidiaDevice)('falls back to libx264/libx265/libvpx and records why NVENC was passed over', async () => {
    const selections = await listEncoderBackends();
    expect(selections.map((s) => [s.codec, s.backend?.name, s.backend?.hardware])).toEqual([
      ['h264', 'libx264', false],
      ['h265', 'libx265', false],
      ['vp8', 'libvpx', false],
    ]);
    for (const selection of selections.slice(0, 2)) {
      const [native, nvenc, software] = selection.candidates;
      expect(native!.hardware).toBe(true);
      // The addon's own probe says why, naming what this machine lacks, whichever it is.
      expect(native!.status).toMatch(nativeNvencReasonHere());
      expect(nvenc!.hardware).toBe(true);
      // e.g. "unavailable: open h264_nvenc: Operation not permitted (FFmpeg: Cannot load libcuda.so.1)"
      expect(nvenc!.status).toMatch(new RegExp(`^unavailable: open ${nvenc!.name}: \\S`));
      expect(software).toEqual({ name: selection.backend?.name, hardware: false, status: 'selected' });
      expect(describeEncoderBackendSelection(selection)).toBe(
        `${selection.codec}: ${selection.backend?.name} (software; ${native!.name} ${native!.status}; ${nvenc!.name} ${nvenc!.status})`,
      );
    }
    expect(selections[2]!.candidates).toEqual([{ name: 'libvpx', hardware: false, status: 'selected' }]);
    expect(describeEncoderBackendSelection(selections[2]!)).toBe('vp8: libvpx (software)');
  });

  it('caches the selection per codec, and VideoEncoder encodes with it', async () => {
    const first = await processEncoderBackends.selection('h265');
    expect(await processEncoderBackends.selection('h265')).toBe(first);
    expect(await processEncoderBackends.select('h265')).toBe(first.backend);
    expect(first.backend.implementation).toBe('ffmpeg');
    const encoder = await VideoEncoder.create({ codec: 'h265', width: 128, height: 96, fps: 30 });
    try {
      expect(encoder.backend).toBe(first.backend);
    } finally {
      encoder.close();
    }
  });

  it('rejects codecs it has no candidates for', async () => {
    await expect(processEncoderBackends.select('av1' as VideoCodec)).rejects.toThrow(RangeError);
    await expect(processEncoderBackends.select('toString' as VideoCodec)).rejects.toThrow(RangeError);
  });

  it("configures NVENC with options this FFmpeg build's option tables accept (no GPU needed to check)", () => {
    // Setting an option validates its name and value against the encoder's AVOption table; only
    // opening needs the driver. A typo here would otherwise only show on a GPU host, as a fallback.
    for (const [codec, name] of [
      ['h264', 'h264_nvenc'],
      ['h265', 'hevc_nvenc'],
    ] as const) {
      const nvenc = ENCODER_BACKEND_CANDIDATES[codec].find((c) => c.backend.name === name)!.backend;
      for (const h264Profile of ['constrained-baseline', 'high'] as const) {
        const { context } = createFfmpegEncoderContext(nvenc, { width: 1920, height: 1080, fps: 30, bitrateKbps: 6000, h264Profile });
        context.freeContext();
      }
    }
  });

  it('refuses a backend it has no configuration for, and an encoder this build lacks', () => {
    const settings = { width: 64, height: 64, fps: 30, bitrateKbps: 100, h264Profile: 'constrained-baseline' } as const;
    expect(() =>
      createFfmpegEncoderContext({ name: 'h264_vaapi', codec: 'h264', hardware: false, implementation: 'ffmpeg' }, settings),
    ).toThrow(/no configuration for the h264_vaapi encoder/);
    expect(() =>
      createFfmpegEncoderContext({ name: 'no_such_encoder', codec: 'h264', hardware: false, implementation: 'ffmpeg' }, settings),
    ).toThrow(/has no no_such_encoder encoder/);
  });
});

describe('chooseEncoderBackend', () => {
  it('takes the first available candidate and does not probe the rest', async () => {
    const hw = fake('hw', 'h264', true, async () => ({ available: true }));
    const sw = fake('sw', 'h264', false, async () => ({ available: true }));
    const selection = await chooseEncoderBackend('h264', [hw, sw]);
    expect(selection.backend).toBe(hw.backend);
    expect(selection.candidates).toEqual([
      { name: 'hw', hardware: true, status: 'selected' },
      { name: 'sw', hardware: false, status: 'not probed' },
    ]);
    expect([hw.probes, sw.probes]).toEqual([1, 0]);
  });

  it('records each unavailable candidate with its reason, a throwing probe included', async () => {
    const a = fake('a', 'h265', true, async () => ({ available: false, reason: 'no device' }));
    const b = fake('b', 'h265', true, async () => {
      throw new Error('driver exploded');
    });
    const c = fake('c', 'h265', false, async () => ({ available: true }));
    const selection = await chooseEncoderBackend('h265', [a, b, c]);
    expect(selection.backend.name).toBe('c');
    expect(selection.candidates.map((o) => o.status)).toEqual(['unavailable: no device', 'unavailable: driver exploded', 'selected']);
  });

  it('rejects, naming every reason, when nothing is available', async () => {
    const a = fake('a', 'vp8', false, async () => ({ available: false, reason: 'nope' }));
    const error = await chooseEncoderBackend('vp8', [a]).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NoEncoderBackendError);
    expect((error as NoEncoderBackendError).message).toBe('no usable vp8 encoder: a unavailable: nope');
    expect((error as NoEncoderBackendError).candidates).toEqual([{ name: 'a', hardware: false, status: 'unavailable: nope' }]);
    expect(describeEncoderBackendSelection({ codec: 'vp8', backend: null, candidates: (error as NoEncoderBackendError).candidates })).toBe(
      'vp8: none (a unavailable: nope)',
    );
    await expect(chooseEncoderBackend('vp8', [])).rejects.toThrow('no usable vp8 encoder: no candidates');
  });
});
