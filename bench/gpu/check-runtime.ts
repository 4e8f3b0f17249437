/**
 * The runtime of the GPU check's end-to-end part (bench/gpu/check.ts, part "stream"), as a child
 * process so that its CPU time is its own: a model that keeps a ring of pictures in CUDA memory
 * and emits them as CudaVideoFrames at 30 fps (what a model whose kernels write device memory
 * does), served on 127.0.0.1 with H.264 only. The runtime picks its encoder itself: on a GPU
 * without NVENC it must fall back to libx264 and download each frame to the host.
 *
 *   node --conditions=source --import tsx bench/gpu/check-runtime.ts --size 720p [--layout nv12] [--slots 30] [--host 127.0.0.1]
 *
 * Prints `check-runtime: serving <url>` once it listens; stops on SIGTERM. The driver is whatever
 * the environment says (ARCLIGHT_LIBCUDA for the fake one, ARCLIGHT_NATIVE_ADDON for a fresh build).
 */
import { parseArgs } from 'node:util';
import { defineModel, startRuntime } from '../../runtime/index.ts';
import { nativeAddon, nativeAddonStatus } from '../../runtime/native/native-addon.ts';
import { RESOLUTIONS, parseResolutions } from '../support/pictures.ts';
import { uploadDeviceRing, type RingLayout } from './check/device-ring.ts';

const { values: args } = parseArgs({
  options: {
    size: { type: 'string', default: '720p' },
    layout: { type: 'string', default: 'nv12' },
    slots: { type: 'string', default: '30' },
    host: { type: 'string', default: '127.0.0.1' },
  },
});
const [size] = parseResolutions(args.size);
const { width, height } = RESOLUTIONS[size!];
const layout = args.layout as RingLayout;
if (layout !== 'nv12' && layout !== 'rgba') throw new Error(`--layout must be nv12 or rgba, got ${layout}`);

const addon = nativeAddon();
if (!addon) throw new Error(`check-runtime: the native addon is not loaded: ${nativeAddonStatus().reason ?? 'unknown reason'}`);
// Uploaded once, before anyone connects: the frames are ready in device memory, as a model's are.
const ring = uploadDeviceRing(addon, { width, height, layout, slots: Number(args.slots) });

const model = defineModel({
  name: 'gpu-check',
  version: '1.0.0',
  description: 'Pictures kept in CUDA memory, emitted as CudaVideoFrames (bench/gpu/check.ts).',
  fps: 30,
  latencyMode: 'realtime',
  tracks: [{ name: 'main_video', kind: 'video', direction: 'recvonly', width, height }],
  async run(session) {
    for await (const tick of session.ticks()) await session.emit('main_video', ring.frame(tick));
  },
});

const runtime = await startRuntime({
  model: model as never,
  port: 0,
  host: args.host,
  ice: { hostAddresses: [args.host] },
  playground: false,
  videoCodecs: ['h264'],
});
process.stdout.write(`check-runtime: serving ${runtime.url}\n`);

let stopping = false;
const stop = async (): Promise<void> => {
  if (stopping) return;
  stopping = true;
  await runtime.close().catch(() => {});
  ring.free();
  // wrtc / node-av threads can hold a normal exit.
  process.exit(0);
};
process.on('SIGTERM', () => void stop());
process.on('SIGINT', () => void stop());
