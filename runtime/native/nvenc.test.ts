/**
 * The NVENC binding on this machine, which has no NVIDIA driver: the probe and every way in say
 * why NVENC is unavailable, bad arguments are TypeErrors/RangeErrors thrown before any driver call,
 * and the option names the C++ side reads are exactly NvencEncoderOptions' keys.
 * (The encode paths themselves run against a fake driver in nvenc-fake-driver.test.ts.)
 */
import { describe, expect, it } from 'vitest';
import { nativeAddon, nativeAddonStatus, NATIVE_ADDON_EXPORTS, type NativeAddon, type NvencEncoderOptions } from './native-addon.ts';

const status = nativeAddonStatus();
// CI builds the addon with the NVENC headers installed: there it must be loaded and compiled in.
const compiledIn = status.loaded && nativeAddon()!.features().nvenc;
const haveDriver = process.env['ARCLIGHT_LIBCUDA'] !== undefined;

describe('NVENC binding without a GPU', () => {
  it('is built and compiled in on CI', () => {
    // The default build (build/Release): .ci/run also runs this file against an addon built with
    // ARCLIGHT_NVENC=OFF (ARCLIGHT_NATIVE_ADDON) and with none (ARCLIGHT_NATIVE=off).
    const defaultBuild = process.env['ARCLIGHT_NATIVE_ADDON'] === undefined && process.env['ARCLIGHT_NATIVE'] !== 'off';
    if (process.env['CI'] && defaultBuild) {
      expect(status, status.reason).toMatchObject({ loaded: true });
      expect(nativeAddon()!.features().nvenc).toBe(true);
    }
  });

  it('exports exactly what NativeAddon declares', () => {
    if (!status.loaded) return;
    const addon = nativeAddon()! as unknown as Record<string, unknown>;
    expect(Object.keys(addon).sort()).toEqual([...NATIVE_ADDON_EXPORTS].sort());
    for (const name of NATIVE_ADDON_EXPORTS) expect(typeof addon[name], name).toBe('function');
  });

  it.runIf(status.loaded && !compiledIn)('probes as unavailable, saying it was compiled out and which package adds it', async () => {
    const probe = await nativeAddon()!.nvencProbe();
    expect(probe).toMatchObject({ available: false, compiledIn: false, codecs: [] });
    expect(probe.reason).toMatch(/^compiled out: the NVENC headers \(Debian libffmpeg-nvenc-dev, \/usr\/include\/ffnvcodec\) were not found/);
    await expect(nativeAddon()!.openNvencEncoder({ codec: 'h264', width: 64, height: 48, fps: 30, bitrateKbps: 500, input: 'i420' })).rejects.toThrow(/compiled out/);
    await expect(nativeAddon()!.cudaDeviceInfo()).rejects.toThrow(/^CUDA support is compiled out: the NVENC headers/);
  });

  it.runIf(compiledIn && !haveDriver)('probes as unavailable, saying which driver library is missing', async () => {
    const probe = await nativeAddon()!.nvencProbe();
    expect(probe).toMatchObject({ available: false, compiledIn: true, codecs: [] });
    expect(probe.reason).toMatch(/^libcuda\.so\.1 could not be loaded \(no NVIDIA driver on this machine\?\): /);
    // The same reason when asked for another device, and the probe is repeatable.
    expect((await nativeAddon()!.nvencProbe(3)).reason).toBe(probe.reason);
  });

  it.runIf(compiledIn && !haveDriver)('refuses to open an encoder or allocate CUDA memory, with the same reason', async () => {
    const addon = nativeAddon()!;
    await expect(addon.openNvencEncoder({ codec: 'h264', width: 64, height: 48, fps: 30, bitrateKbps: 500, input: 'i420' })).rejects.toThrow(
      /^libcuda\.so\.1 could not be loaded/,
    );
    expect(() => new addon.CudaBuffer(1024)).toThrow(/^CUDA is unavailable: libcuda\.so\.1 could not be loaded/);
    await expect(addon.cudaDeviceInfo()).rejects.toThrow(/^libcuda\.so\.1 could not be loaded \(no NVIDIA driver on this machine\?\): /);
  });

  it.runIf(compiledIn)('reads exactly the option names NvencEncoderOptions declares (checked against the C++ parser)', async () => {
    const addon = nativeAddon()!;
    // Every key, so a key the C++ side does not know is a TypeError here.
    const every: Required<NvencEncoderOptions> = {
      codec: 'h264',
      width: 64,
      height: 48,
      fps: 30,
      bitrateKbps: 500,
      input: 'nv12',
      rateControl: 'vbr',
      preset: 4,
      tuning: 'low-latency',
      vbvMs: 250,
      profile: 'high',
      intraRefresh: { period: 60, frames: 10 },
      device: 0,
    };
    // Parsing passes (no synchronous throw); opening fails later for want of a driver, or works with one.
    const opened = addon.openNvencEncoder(every);
    await opened.then((encoder) => encoder.close(), () => undefined);
    expect(() => addon.openNvencEncoder({ ...every, bitrate: 500 } as NvencEncoderOptions)).toThrow(new TypeError("openNvencEncoder: unknown option 'bitrate'"));
  });

  it.runIf(compiledIn)('throws TypeError/RangeError for bad options before touching a driver', () => {
    const addon: NativeAddon = nativeAddon()!;
    const base: NvencEncoderOptions = { codec: 'h264', width: 64, height: 48, fps: 30, bitrateKbps: 500, input: 'i420' };
    const cases: [unknown, ErrorConstructor, RegExp][] = [
      [undefined, TypeError, /options must be an object/],
      [{ ...base, codec: 'vp9' }, TypeError, /codec must be 'h264' or 'h265'/],
      [{ ...base, width: 63 }, RangeError, /even/],
      [{ ...base, width: 8 }, RangeError, /width must be from 16 to 8192/],
      [{ ...base, height: 1.5 }, TypeError, /height must be an integer/],
      [{ ...base, fps: 0 }, RangeError, /fps must be from 1 to 240/],
      [{ ...base, bitrateKbps: '500' }, TypeError, /bitrateKbps must be a number/],
      [{ ...base, input: 'yuv444' }, TypeError, /input must be 'nv12', 'i420', 'bgra' or 'rgba'/],
      [{ ...base, preset: 8 }, RangeError, /preset must be from 1 to 7/],
      [{ ...base, tuning: 'fast' }, TypeError, /tuning must be/],
      [{ ...base, codec: 'h265', profile: 'high' }, TypeError, /profile is an H\.264 option/],
      [{ ...base, intraRefresh: { period: 10, frames: 10 } }, RangeError, /intraRefresh\.frames must be from 1 to 9/],
      [{ ...base, intraRefresh: true }, TypeError, /intraRefresh must be false or/],
      [{ ...base, device: -1 }, RangeError, /device must be from 0 to 63/],
    ];
    for (const [options, type, message] of cases) {
      let thrown: unknown;
      try {
        void addon.openNvencEncoder(options as NvencEncoderOptions);
      } catch (error) {
        thrown = error;
      }
      expect(thrown, JSON.stringify(options)).toBeInstanceOf(type);
      expect((thrown as Error).message).toMatch(message);
    }
    expect(() => addon.nvencProbe(1.5)).toThrow(TypeError);
    expect(() => new addon.CudaBuffer(-1)).toThrow(RangeError);
    expect(() => addon.cudaDeviceInfo(64)).toThrow(RangeError);
    expect(() => addon.cudaDeviceInfo('0' as unknown as number)).toThrow(TypeError);
  });
});
