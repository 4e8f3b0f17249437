/**
 * EncoderBackendRegistry.demote on this machine's real candidates, in a process of its own (vitest runs
 * each file in one), since the demotion is process-wide.
 */
import { existsSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { RuntimeMetrics } from '../metrics.ts';
import { listEncoderBackends, processEncoderBackends } from './encoder-backends.ts';

/** No NVIDIA driver device node: the selection here is the software encoders. */
const noNvidiaDevice = !existsSync('/dev/nvidiactl');

describe.runIf(noNvidiaDevice)('EncoderBackendRegistry.demote', () => {
  afterEach(() => processEncoderBackends.forgetDemotions());

  it('passes a demoted backend over from then on, and the listing says why', async () => {
    expect((await processEncoderBackends.select('h264')).name).toBe('libx264');
    expect(processEncoderBackends.demote('h264', 'h264_nvenc', '3 encode failures within 30 s')).toBe(true);
    // Not twice.
    expect(processEncoderBackends.demote('h264', 'h264_nvenc', 'again')).toBe(false);
    const h264 = (await listEncoderBackends()).find((l) => l.codec === 'h264')!;
    expect(h264.backend?.name).toBe('libx264');
    expect(h264.candidates.find((c) => c.name === 'h264_nvenc')?.status).toBe(
      'unavailable: demoted after failing in use (3 encode failures within 30 s)',
    );
  });

  it('never demotes the last candidate left, nor a backend the codec does not have', async () => {
    expect(processEncoderBackends.demote('vp8', 'libvpx', 'x')).toBe(false);
    expect(processEncoderBackends.demote('h264', 'libvpx', 'x')).toBe(false);
    expect(processEncoderBackends.demote('h264', 'arclight_nvenc_h264', 'x')).toBe(true);
    expect(processEncoderBackends.demote('h264', 'h264_nvenc', 'x')).toBe(true);
    expect(processEncoderBackends.demote('h264', 'libx264', 'x')).toBe(false);
    expect((await processEncoderBackends.select('h264')).name).toBe('libx264');
  });

  it('/metrics reports the selection as it is at each scrape, not what start-up set', async () => {
    await listEncoderBackends();
    const metrics = new RuntimeMetrics({ processMetrics: false });
    // What start-up would have set had NVENC been selected then (it was demoted since).
    metrics.encoderBackend.set({ codec: 'h264', backend: 'arclight_nvenc_h264', hardware: 'true' }, 1);
    expect(processEncoderBackends.demote('h264', 'arclight_nvenc_h264', 'failed to open: gone')).toBe(true);
    await processEncoderBackends.select('h264');
    expect(processEncoderBackends.current().map((c) => [c.codec, c.backend.name])).toEqual([
      ['h264', 'libx264'],
      ['h265', 'libx265'],
      ['vp8', 'libvpx'],
    ]);
    const text = await metrics.text();
    expect(text).toContain('arclight_encoder_backend{codec="h264",backend="libx264",hardware="false"} 1');
    expect(text).toContain('arclight_encoder_backend{codec="vp8",backend="libvpx",hardware="false"} 1');
    expect(text).not.toContain('arclight_nvenc_h264');
  });
});
