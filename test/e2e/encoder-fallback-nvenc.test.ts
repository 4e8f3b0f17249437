/**
 * NVENC losing its GPU mid-stream, with the FAKE NVIDIA driver (no GPU here: test/support/
 * fake-nvenc-driver.ts, whose ARCLIGHT_FAKE_NVENC_FAIL_AFTER_FRAMES makes every encode fail with
 * NV_ENC_ERR_DEVICE_NOT_EXIST after N pictures): the runtime restarts the encoder, finds the
 * backend keeps failing, demotes it for the whole process and falls back to the next candidate
 * that works (libx264 here); the viewer keeps decoding the picture, and /metrics and the encoder
 * listing say what happened.
 */
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listEncoderBackends, nativeAddon, startRuntime, type Runtime } from '../../runtime/index.ts';
import { nativeAddonStatus } from '../../runtime/native/native-addon.ts';
import { rgbToYuv } from '../../models/examples/shared/i420-canvas.ts';
import solidColourModel from '../fixtures/solid-colour-model.ts';
import { openEncoderFailureViewer, type EncoderFailureViewer } from '../support/encoder-failure-viewer.ts';
import { installFakeNvencDriver, readFakeNvencLog } from '../support/fake-nvenc-driver.ts';
import { near, waitUntil } from '../support/video-probe.ts';

const LOOPBACK = '127.0.0.1';
const LOG = join(tmpdir(), `arclight-encoder-fallback-${process.pid}.jsonl`);
const RED = rgbToYuv(0xe0, 0x10, 0x10);
const BLUE = rgbToYuv(0x10, 0x20, 0xe0);
const compiledIn = nativeAddonStatus().loaded && nativeAddon()!.features().nvenc;

describe.runIf(compiledIn)('NVENC failing mid-stream falls back to libx264 (fake NVENC driver: no GPU here)', () => {
  let runtime: Runtime;
  let viewer: EncoderFailureViewer | undefined;

  beforeAll(async () => {
    await installFakeNvencDriver(LOG);
    runtime = await startRuntime({
      model: solidColourModel as never,
      port: 0,
      host: LOOPBACK,
      ice: { hostAddresses: [LOOPBACK] },
      playground: false,
    });
  }, 120_000);

  afterAll(async () => {
    delete process.env['ARCLIGHT_FAKE_NVENC_FAIL_AFTER_FRAMES'];
    await viewer?.close();
    await runtime?.close();
    rmSync(LOG, { force: true });
  });

  it('fake NVENC driver loses the device: the runtime demotes arclight_nvenc_h264, the viewer keeps decoding from libx264, and /metrics shows the failures and the new backend', async () => {
    const encodes = async (): Promise<number> => (await readFakeNvencLog(LOG)).filter((e) => e.event === 'encode').length;
    const startup = (await listEncoderBackends()).find((l) => l.codec === 'h264')!;
    expect(startup.backend?.name).toBe('arclight_nvenc_h264');

    viewer = await openEncoderFailureViewer(runtime.url);
    const v = viewer;
    await waitUntil(
      () => v.decoded.length >= 10 && near(v.decoded.at(-1)!.centre, RED, 3),
      15_000,
      '10 decoded frames of the red picture from NVENC',
    );
    expect(await encodes()).toBeGreaterThanOrEqual(10);

    // The GPU goes away five pictures from now.
    process.env['ARCLIGHT_FAKE_NVENC_FAIL_AFTER_FRAMES'] = String((await encodes()) + 5);
    const metrics = async (): Promise<string> => (await fetch(`${runtime.url}/metrics`)).text();
    await waitUntil(async () => (await metrics()).includes('action="fallback"'), 10_000, 'the fallback');
    const decodedAtFallback = v.decoded.length;
    await v.command('set_color', { r: 0x10, g: 0x20, b: 0xe0 });
    await waitUntil(
      () => v.decoded.length >= decodedAtFallback + 10 && near(v.decoded.at(-1)!.centre, BLUE, 3),
      15_000,
      '10 more decoded frames, of the blue picture, from the fallback encoder',
    );

    const text = await metrics();
    // Two restarts of the NVENC encoder, then the third failure within 30 s demotes the backend.
    expect(text).toMatch(
      /arclight_video_encoder_failures_total\{track="main_video",codec="h264",backend="arclight_nvenc_h264",action="restart"\} 2\b/,
    );
    expect(text).toMatch(
      /arclight_video_encoder_failures_total\{track="main_video",codec="h264",backend="arclight_nvenc_h264",action="fallback"\} 1\b/,
    );
    expect(text).toContain('arclight_encoder_backend{codec="h264",backend="libx264",hardware="false"} 1');
    expect(text).not.toContain('arclight_encoder_backend{codec="h264",backend="arclight_nvenc_h264"');

    const listing = (await listEncoderBackends()).find((l) => l.codec === 'h264')!;
    expect(listing.backend?.name).toBe('libx264');
    expect(listing.candidates[0]).toMatchObject({
      name: 'arclight_nvenc_h264',
      status: expect.stringMatching(
        /^unavailable: demoted after failing in use \(3 encode failures within 30 s, the last: .*NV_ENC_ERR_DEVICE_NOT_EXIST/,
      ),
    });
    // Every NVENC session opened (probes, black frame, the three encoders) was destroyed: the
    // failed encoders were freed, not dropped.
    const log = await readFakeNvencLog(LOG);
    expect(log.filter((e) => e.event === 'destroy').length).toBe(log.filter((e) => e.event === 'open').length);
  }, 40_000);
});
