/**
 * Colour conversion at 1080p: model output (RGB, uint8 HWC and float32 CHW) → I420, per frame —
 * the native addon (1 and 2 threads, when built), the JavaScript fallback, FFmpeg's swscale
 * (node-av, RGB24 → YUV420P, uint8 HWC only: it has no float/planar-RGB-tensor input), and a
 * memcpy of the same source bytes as the floor (issue 6 goal: native ≤ 3× memcpy).
 *
 *   node --conditions=source --import tsx bench/colour-convert.ts [--frames 60] [--rounds 3] [--json out.json]
 *
 * Each round times every variant back to back over the same frames; figures are the median
 * ms/frame over rounds (min–max).
 */

import { parseArgs } from 'node:util';
import { Frame, SoftwareScaleContext } from 'node-av/lib';
import { AV_PIX_FMT_RGB24, AV_PIX_FMT_YUV420P, SWS_BILINEAR } from 'node-av/constants';
import { convertToYuv } from '../runtime/media/colour-convert.ts';
import { nativeAddonStatus } from '../runtime/native/native-addon.ts';
import { loadavg, median } from './support/measure.ts';
import { finishReport, runBench, runInfo } from './support/report.ts';

const { values: args } = parseArgs({
  options: { frames: { type: 'string', default: '60' }, rounds: { type: 'string', default: '3' }, json: { type: 'string' } },
});
const FRAMES = Number(args.frames);
const ROUNDS = Number(args.rounds);
const W = 1920;
const H = 1080;

function time(run: () => void): number {
  run(); // warm
  const started = performance.now();
  for (let i = 0; i < FRAMES; i++) run();
  return (performance.now() - started) / FRAMES;
}

await runBench('colour-convert', async () => {
  const info = runInfo();
  const status = nativeAddonStatus();
  process.stdout.write(
    `colour-convert 1920x1080 → I420, ${FRAMES} frames × ${ROUNDS} rounds; native addon: ${status.loaded ? `loaded (${status.version})` : status.reason}\n`,
  );
  const rgb = Uint8Array.from({ length: W * H * 3 }, (_, i) => (i * 7919) % 256);
  const tensor = Float32Array.from({ length: W * H * 3 }, (_, i) => ((i * 7919) % 256) / 255);
  const out = new Uint8Array(W * H * 1.5);
  const copyTarget = new Uint8Array(rgb.length);
  const floatCopyTarget = new Float32Array(tensor.length);
  const sws = new SoftwareScaleContext();
  sws.getContext(W, H, AV_PIX_FMT_RGB24, W, H, AV_PIX_FMT_YUV420P, SWS_BILINEAR);
  const src = Frame.fromVideoBuffer(Buffer.from(rgb.buffer), {
    width: W,
    height: H,
    format: AV_PIX_FMT_RGB24,
    timeBase: { num: 1, den: 30 },
  } as never);
  const dst = new Frame();
  dst.alloc();
  dst.format = AV_PIX_FMT_YUV420P;
  dst.width = W;
  dst.height = H;
  dst.allocBuffer();

  const variants: Record<string, () => void> = {
    'memcpy (uint8 source bytes)': () => copyTarget.set(rgb),
    'memcpy (float32 source bytes)': () => floatCopyTarget.set(tensor),
    'swscale RGB24 → YUV420P (node-av)': () => void sws.scaleFrameSync(dst, src),
    'JS: uint8 HWC': () => void convertToYuv(rgb, { width: W, height: H, format: 'rgb', implementation: 'js', into: out }),
    'JS: float32 CHW': () =>
      void convertToYuv(tensor, { width: W, height: H, format: 'rgb', layout: 'chw', implementation: 'js', into: out }),
    ...(status.loaded
      ? {
          'native: uint8 HWC, 1 thread': () =>
            void convertToYuv(rgb, { width: W, height: H, format: 'rgb', implementation: 'native', into: out, threads: 1 }),
          'native: uint8 HWC, 2 threads': () =>
            void convertToYuv(rgb, { width: W, height: H, format: 'rgb', implementation: 'native', into: out, threads: 2 }),
          'native: float32 CHW, 1 thread': () =>
            void convertToYuv(tensor, {
              width: W,
              height: H,
              format: 'rgb',
              layout: 'chw',
              implementation: 'native',
              into: out,
              threads: 1,
            }),
          'native: float32 CHW, 2 threads': () =>
            void convertToYuv(tensor, {
              width: W,
              height: H,
              format: 'rgb',
              layout: 'chw',
              implementation: 'native',
              into: out,
              threads: 2,
            }),
        }
      : {}),
  };
  const results: Record<string, number[]> = {};
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, run] of Object.entries(variants)) (results[name] ??= []).push(time(run));
  }
  const memcpy8 = median(results['memcpy (uint8 source bytes)']!);
  const memcpy32 = median(results['memcpy (float32 source bytes)']!);
  process.stdout.write('\nms/frame, median over rounds (min–max), and × the memcpy of the same source bytes:\n');
  for (const [name, values] of Object.entries(results)) {
    const base = name.includes('float32') ? memcpy32 : memcpy8;
    process.stdout.write(
      `  ${name.padEnd(36)} ${median(values).toFixed(3).padStart(8)} (${Math.min(...values).toFixed(3)}–${Math.max(...values).toFixed(3)})  ${(median(values) / base).toFixed(1)}×\n`,
    );
  }
  src.free();
  dst.free();
  sws.freeContext();
  finishReport(info, loadavg(), args.json, { results, native: status });
});
