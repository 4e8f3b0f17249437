/**
 * NVENC on a GPU host (issue 6): 1080p60 H.264 and H.265 through Arclight's NVENC binding, from
 * host memory (I420, the runtime's path) and from CUDA device memory (NV12 and RGBA uploaded once:
 * a model's GPU output, no host copy per frame). Reports ms/frame (median, min–max over rounds,
 * wall time of the encode call including the thread-pool hop) and checks that each stream decodes
 * back to the picture with FFmpeg.
 *
 *   node --conditions=source --import tsx bench/gpu/nvenc.ts [--frames 300] [--rounds 3] [--device 0] [--json out.json]
 *
 * Where NVENC is unavailable (no driver, or a GPU without an NVENC engine such as H100/H200) it
 * prints the probe's reason and exits 0. ARCLIGHT_LIBCUDA / ARCLIGHT_LIBNVIDIA_ENCODE pointed at
 * the test suite's fake driver (test/support/fake-nvenc-driver.ts) runs the script end to end
 * without a GPU; its timings are of the fake, not of NVENC, and are labelled so.
 */
import { parseArgs } from 'node:util';
import { nativeAddon, nativeAddonStatus, type NvencCodec, type NvencEncoder } from '../../runtime/native/native-addon.ts';
import { VideoDecoder } from '../../runtime/media/video-decoder.ts';
import { loadavg, median } from '../support/measure.ts';
import { finishReport, runBench, runInfo } from '../support/report.ts';

const { values: args } = parseArgs({
  options: {
    frames: { type: 'string', default: '300' },
    rounds: { type: 'string', default: '3' },
    device: { type: 'string', default: '0' },
    json: { type: 'string' },
  },
});
const FRAMES = Number(args.frames);
const ROUNDS = Number(args.rounds);
const DEVICE = Number(args.device);
const W = 1920;
const H = 1080;
const FPS = 60;
const fake = process.env['ARCLIGHT_LIBCUDA'] !== undefined;

/** A moving gradient: enough detail that the encoder does real work. */
function i420Picture(seed: number): Uint8Array {
  const data = new Uint8Array(W * H * 1.5);
  for (let y = 0; y < H; y++) for (let x = 0; x < W; x++) data[y * W + x] = 16 + ((x + y * 2 + seed * 8) % 219);
  data.fill(128, W * H);
  return data;
}

function nv12FromI420(i420: Uint8Array, pitch: number): Uint8Array {
  const out = new Uint8Array(pitch * H * 1.5);
  for (let y = 0; y < H; y++) out.set(i420.subarray(y * W, (y + 1) * W), y * pitch);
  out.fill(128, pitch * H);
  return out;
}

async function decodes(codec: NvencCodec, packets: Buffer[]): Promise<number> {
  if (fake && codec === 'h265') return packets.length; // the fake's H.265 is a marker stream
  const decoder = await VideoDecoder.create(codec);
  let frames = 0;
  try {
    for (const packet of packets) frames += (await decoder.decode(packet)).length;
  } finally {
    decoder.close();
  }
  return frames;
}

async function timeEncodes(
  encoder: NvencEncoder,
  input: (i: number) => Uint8Array | { devicePtr: bigint; pitch: number; format: 'nv12' | 'rgba' },
): Promise<{ msPerFrame: number; packets: Buffer[] }> {
  const packets: Buffer[] = [];
  await encoder.encode(input(0), true, 0); // warm
  const started = performance.now();
  for (let i = 0; i < FRAMES; i++) packets.push((await encoder.encode(input(i), i === 0, i)).data);
  return { msPerFrame: (performance.now() - started) / FRAMES, packets };
}

await runBench('gpu-nvenc', async () => {
  const info = runInfo();
  const addon = nativeAddon();
  if (!addon) {
    process.stdout.write(`nvenc: native addon ${nativeAddonStatus().reason}\n`);
    finishReport(info, loadavg(), args.json, { available: false, reason: nativeAddonStatus().reason });
    return;
  }
  const probe = await addon.nvencProbe(DEVICE);
  process.stdout.write(`nvenc probe (device ${DEVICE}): ${JSON.stringify(probe)}${fake ? '  [FAKE DRIVER: timings are not NVENC]' : ''}\n`);
  if (!probe.available) {
    finishReport(info, loadavg(), args.json, { available: false, probe });
    return;
  }
  const pictures = [0, 1, 2, 3].map(i420Picture);
  const results: Record<string, { rounds: number[]; decodedFrames: number; bytesPerFrame: number }> = {};
  for (const codec of probe.codecs) {
    const variants: [string, () => Promise<{ msPerFrame: number; packets: Buffer[] }>][] = [
      [
        `${codec} host I420`,
        async () => {
          const encoder = await addon.openNvencEncoder({
            codec,
            width: W,
            height: H,
            fps: FPS,
            bitrateKbps: 8000,
            input: 'i420',
            device: DEVICE,
          });
          try {
            return await timeEncodes(encoder, (i) => pictures[i % pictures.length]!);
          } finally {
            encoder.close();
          }
        },
      ],
      [
        `${codec} CUDA NV12 (device pointer)`,
        async () => {
          const pitch = 2048;
          const gpu = new addon.CudaBuffer(pitch * H * 1.5, DEVICE);
          const encoder = await addon.openNvencEncoder({
            codec,
            width: W,
            height: H,
            fps: FPS,
            bitrateKbps: 8000,
            input: 'nv12',
            device: DEVICE,
          });
          try {
            gpu.upload(nv12FromI420(pictures[0]!, pitch));
            return await timeEncodes(encoder, () => ({ devicePtr: gpu.devicePtr, pitch, format: 'nv12' }));
          } finally {
            encoder.close();
            gpu.free();
          }
        },
      ],
      [
        `${codec} CUDA RGBA (device pointer)`,
        async () => {
          const gpu = new addon.CudaBuffer(W * 4 * H, DEVICE);
          const encoder = await addon.openNvencEncoder({
            codec,
            width: W,
            height: H,
            fps: FPS,
            bitrateKbps: 8000,
            input: 'rgba',
            device: DEVICE,
          });
          try {
            gpu.upload(Uint8Array.from({ length: W * 4 * H }, (_, i) => (i * 13) % 256));
            return await timeEncodes(encoder, () => ({ devicePtr: gpu.devicePtr, pitch: W * 4, format: 'rgba' }));
          } finally {
            encoder.close();
            gpu.free();
          }
        },
      ],
    ];
    for (const [name, run] of variants) {
      const rounds: number[] = [];
      let last: Buffer[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        const { msPerFrame, packets } = await run();
        rounds.push(msPerFrame);
        last = packets;
      }
      const decodedFrames = await decodes(codec, last);
      const bytesPerFrame = last.reduce((n, p) => n + p.length, 0) / last.length;
      results[name] = { rounds, decodedFrames, bytesPerFrame };
      process.stdout.write(
        `  ${name.padEnd(34)} ${median(rounds).toFixed(2).padStart(7)} ms/frame (${Math.min(...rounds).toFixed(2)}–${Math.max(...rounds).toFixed(2)})` +
          `  ${(bytesPerFrame / 1024).toFixed(1)} KiB/frame  decoded ${decodedFrames}/${last.length}\n`,
      );
      if (decodedFrames !== last.length) throw new Error(`${name}: ${last.length - decodedFrames} frames did not decode`);
    }
  }
  finishReport(info, loadavg(), args.json, { available: true, fake, probe, frames: FRAMES, results });
});
