/**
 * The `stylise` example's inference speed on onnxruntime-node (issue 6: ONNX example fps at 256²
 * and 512² on CPU). Per processing size, back to back each round over the same 640x480 I420
 * webcam picture:
 *
 * - **frame → tensor**: the centred square scaled to size², RGB float32 CHW (frame-tensor.ts), on
 *   this thread;
 * - **ort.run, this thread**: `session.run()` alone on a ready tensor — what a model would block
 *   its event loop for if it ran the session itself (onnxruntime-node's run() is a synchronous
 *   native call behind a setImmediate);
 * - **tensor → I420**: `convertToYuv` of the output (native addon when built);
 * - **frame → picture**: what the example does per frame — copy the frame to the worker, frame →
 *   tensor and ort.run there, tensor → I420 here — one frame in flight; its fps is the example's
 *   ceiling. From its frames also: **frame → tensor, worker** and **ort.run, worker** (as the
 *   worker times them) and **main thread** (copying the frame, posting it, tensor → I420: what the
 *   runtime's event loop gives up per frame).
 *
 *   node --conditions=source --import tsx bench/onnx-stylise.ts [--frames 30] [--rounds 3] [--sizes 256,512] [--providers cpu] [--json out.json]
 *
 * Figures are the median ms/frame over rounds (min–max); fps = 1000 / ms.
 */

import { parseArgs } from 'node:util';
import { InferenceSession, Tensor } from 'onnxruntime-node';
import { convertToYuv, yuvByteLength } from '../runtime/media/colour-convert.ts';
import { nativeAddonStatus } from '../runtime/native/native-addon.ts';
import { frameToTensor } from '../models/examples/stylise/frame-tensor.ts';
import { StyliseEngine } from '../models/examples/stylise/stylise-engine.ts';
import { buildStyliseNetwork, STYLISE_IO } from '../models/examples/stylise/stylise-network.ts';
import { loadavg, median, systemCpu } from './support/measure.ts';
import { finishReport, runBench, runInfo } from './support/report.ts';

const { values: args } = parseArgs({
  options: {
    frames: { type: 'string', default: '30' },
    rounds: { type: 'string', default: '3' },
    sizes: { type: 'string', default: '256,512' },
    providers: { type: 'string', default: 'cpu' },
    json: { type: 'string' },
  },
});
const FRAMES = Number(args.frames);
const ROUNDS = Number(args.rounds);
const SIZES = args.sizes.split(',').map(Number);
const CAMERA = { width: 640, height: 480 };

/** A webcam-like I420 picture: gradients and texture, so the network has edges to draw. */
function cameraFrame(): Uint8Array {
  const { width, height } = CAMERA;
  const data = new Uint8Array(yuvByteLength(width, height));
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) data[y * width + x] = 16 + ((x + y) % 220) * (((x >> 5) ^ (y >> 5)) & 1 ? 1 : 0.6);
  }
  const cw = width / 2;
  for (let i = 0; i < cw * (height / 2); i++) {
    data[width * height + i] = 128 + 60 * Math.sin(i / 97);
    data[width * height + cw * (height / 2) + i] = 128 + 60 * Math.cos(i / 131);
  }
  return data;
}

/** ms per call of `run` over FRAMES calls, after one warm call. */
async function time(run: () => unknown): Promise<number> {
  await run();
  const started = performance.now();
  for (let i = 0; i < FRAMES; i++) await run();
  return (performance.now() - started) / FRAMES;
}

await runBench('onnx-stylise', async () => {
  const info = runInfo();
  const providers = args.providers.split(',');
  const network = buildStyliseNetwork();
  const engine = await StyliseEngine.start(network, { providers });
  const session = await InferenceSession.create(network, { executionProviders: [engine.provider] });
  const native = nativeAddonStatus();
  process.stdout.write(
    `onnx-stylise: ${CAMERA.width}x${CAMERA.height} I420 webcam picture → ${SIZES.map((s) => `${s}²`).join(', ')}, ${FRAMES} frames × ${ROUNDS} rounds; ` +
      `onnxruntime-node, provider ${engine.provider} (default intra-op threads); tensor → I420: ${native.loaded ? 'native addon' : 'JavaScript'}\n`,
  );
  const camera = { ...CAMERA, format: 'i420' as const, data: cameraFrame() };
  const cpuBefore = systemCpu();
  const results: Record<string, Record<string, number[]>> = {};
  for (let round = 0; round < ROUNDS; round++) {
    for (const size of SIZES) {
      const key = `${size}x${size}`;
      const tensor = frameToTensor(camera, size);
      const output = (await engine.stylise(camera, size, 0.8)).output;
      const picture = new Uint8Array(yuvByteLength(size, size));
      const worker = { prepareMs: [] as number[], runMs: [] as number[], mainMs: [] as number[] };
      const variants: Record<string, () => unknown> = {
        'frame → tensor': () => frameToTensor(camera, size, tensor),
        'ort.run, this thread': () =>
          session.run({
            [STYLISE_IO.image]: new Tensor('float32', tensor, [1, 3, size, size]),
            [STYLISE_IO.strength]: new Tensor('float32', Float32Array.of(0.8), [1]),
          }),
        'tensor → I420': () => convertToYuv(output, { width: size, height: size, format: 'rgb', layout: 'chw', into: picture }),
        'frame → picture': async () => {
          const t0 = performance.now();
          const pending = engine.stylise(camera, size, 0.8);
          const t1 = performance.now();
          const result = await pending;
          const t2 = performance.now();
          convertToYuv(result.output, { width: size, height: size, format: 'rgb', layout: 'chw', into: picture });
          worker.prepareMs.push(result.prepareMs);
          worker.runMs.push(result.runMs);
          worker.mainMs.push(t1 - t0 + performance.now() - t2);
        },
      };
      for (const [name, run] of Object.entries(variants)) ((results[key] ??= {})[name] ??= []).push(await time(run));
      // The pipeline's measured frames (its first call was the warm-up).
      (results[key]!['frame → tensor, worker'] ??= []).push(median(worker.prepareMs.slice(1)));
      (results[key]!['ort.run, worker'] ??= []).push(median(worker.runMs.slice(1)));
      (results[key]!['main thread'] ??= []).push(median(worker.mainMs.slice(1)));
    }
  }
  const cpuAfter = systemCpu();
  const busy = (cpuAfter.busy - cpuBefore.busy) / (cpuAfter.total - cpuBefore.total);
  const PIPELINE_PARTS = ['frame → tensor, worker', 'ort.run, worker', 'main thread'];
  const order = ['frame → tensor', 'ort.run, this thread', 'tensor → I420', 'frame → picture', ...PIPELINE_PARTS];
  for (const size of SIZES) {
    const key = `${size}x${size}`;
    process.stdout.write(`\n${key}: ms/frame, median over rounds (min–max), and fps\n`);
    for (const name of order) {
      const values = results[key]![name]!;
      const m = median(values);
      const fps = name === 'main thread' ? '' : `${(1000 / m).toFixed(1).padStart(7)} fps`;
      const label = PIPELINE_PARTS.includes(name) ? `  ${name}` : name; // parts of frame → picture
      process.stdout.write(
        `  ${label.padEnd(26)} ${m.toFixed(2).padStart(8)} (${Math.min(...values).toFixed(2)}–${Math.max(...values).toFixed(2)})  ${fps}\n`,
      );
    }
  }
  process.stdout.write(`\nmachine CPU busy during the rounds: ${(busy * 100).toFixed(0)} % of ${info.machine['nproc']} cores\n`);
  await session.release();
  await engine.close();
  finishReport(info, loadavg(), args.json, { provider: engine.provider, results, machineBusy: busy, native });
});
