/**
 * What shorter recording segments cost (issue 21 part 8). A clip starts at a segment boundary, so
 * its excess over the asked length is under one segment; each segment starts with a keyframe the
 * recorder forces. At a fixed bitrate a keyframe more often costs picture quality (bits spent on
 * intra frames), encode CPU and, where rate control overshoots, bytes. This encodes the same
 * frames as the recorder does (H.264 High, the live 720p bitrate, keyframes every S seconds) for
 * S = 1, 2 and 4 and reports, per setting: encode CPU ms/frame, the bitrate produced, the share
 * of bytes in keyframes, and PSNR (luma) of the decoded frames against the source.
 *
 *   node --conditions=source --import tsx bench/clip-segments.ts [--rounds 3] [--frames 360] [--json out.json]
 *
 * `pattern`: the runtime benchmarks' moving picture (PSNR is meaningful); `grain`: fresh noise
 * that spends the whole bitrate (bytes and CPU only: noise has no PSNR worth comparing).
 */

import { parseArgs } from 'node:util';
import { VideoDecoder } from '../runtime/media/video-decoder.ts';
import { VideoEncoder } from '../runtime/media/video-encoder-factory.ts';
import { loadavg, summarise, type Summary } from './support/measure.ts';
import { PictureDrawer, type Picture } from './support/pictures.ts';
import { finishReport, runBench, runInfo } from './support/report.ts';

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    frames: { type: 'string', default: '360' },
    segments: { type: 'string', default: '1,2,4' },
    json: { type: 'string' },
  },
});
const ROUNDS = Number(args.rounds);
const FRAMES = Number(args.frames);
const SEGMENTS = args.segments.split(',').map(Number);
const WIDTH = 1280;
const HEIGHT = 720;
const FPS = 30;
/** The runtime's default live bitrate at 720p, which the recording takes by default. */
const BITRATE_KBPS = 2500;

interface Run {
  cpuMsPerFrame: number;
  kbps: number;
  keyframeShare: number;
  psnr: number | null;
}

function psnrY(source: Uint8Array, decoded: Uint8Array): number {
  let sum = 0;
  const n = WIDTH * HEIGHT;
  for (let i = 0; i < n; i++) {
    const d = source[i]! - decoded[i]!;
    sum += d * d;
  }
  const mse = sum / n;
  return mse === 0 ? 99 : 10 * Math.log10((255 * 255) / mse);
}

async function encodeOnce(frames: readonly Uint8Array[], segmentSeconds: number, measureQuality: boolean): Promise<Run> {
  const encoder = await VideoEncoder.create({
    codec: 'h264',
    width: WIDTH,
    height: HEIGHT,
    fps: FPS,
    profile: 'high',
    bitrateKbps: BITRATE_KBPS,
    syncBelowMs: 1_000,
  });
  const decoder = measureQuality ? await VideoDecoder.create('h264') : undefined;
  const interval = segmentSeconds * FPS;
  let bytes = 0;
  let keyBytes = 0;
  let cpuMicros = 0;
  const psnrs: number[] = [];
  try {
    for (let i = 0; i < frames.length; i++) {
      if (i % interval === 0) encoder.requestKeyframe();
      const before = process.cpuUsage();
      const units = await encoder.encode({ width: WIDTH, height: HEIGHT, format: 'i420', data: frames[i]! });
      const used = process.cpuUsage(before);
      cpuMicros += used.user + used.system;
      for (const unit of units) {
        bytes += unit.data.length;
        if (unit.keyframe) keyBytes += unit.data.length;
        if (decoder) for (const frame of await decoder.decode(unit.data)) psnrs.push(psnrY(frames[i]!, frame.data));
      }
    }
  } finally {
    encoder.close();
    decoder?.close();
  }
  return {
    cpuMsPerFrame: cpuMicros / 1000 / frames.length,
    kbps: (bytes * 8) / 1000 / (frames.length / FPS),
    keyframeShare: keyBytes / bytes,
    psnr: psnrs.length ? psnrs.reduce((a, b) => a + b, 0) / psnrs.length : null,
  };
}

async function main(): Promise<void> {
  const info = runInfo();
  process.stdout.write(
    `clip-segments: ${ROUNDS} rounds × {pattern, grain} 720p30 × segments {${SEGMENTS.join(', ')}} s, ${FRAMES} frames, ${BITRATE_KBPS} kbps H.264 High\n${JSON.stringify(info)}\n`,
  );
  const results: Record<
    string,
    Record<string, { cpuMsPerFrame: Summary; kbps: Summary; keyframeShare: Summary; psnr: Summary | null }>
  > = {};
  for (const picture of ['pattern', 'grain'] as Picture[]) {
    const drawer = new PictureDrawer(WIDTH, HEIGHT, picture);
    const frames = Array.from({ length: FRAMES }, (_, i) => drawer.draw(i).slice());
    const runs = new Map<number, Run[]>();
    for (let round = 0; round < ROUNDS; round++) {
      // Interleaved, so drift in the machine's load spreads over every setting alike.
      for (const seconds of SEGMENTS) {
        const run = await encodeOnce(frames, seconds, picture === 'pattern');
        runs.set(seconds, [...(runs.get(seconds) ?? []), run]);
        process.stdout.write(
          `round ${round + 1} ${picture.padEnd(7)} segment ${seconds} s: CPU ${run.cpuMsPerFrame.toFixed(2)} ms/frame, ${run.kbps.toFixed(0)} kbit/s, ` +
            `keyframes ${(run.keyframeShare * 100).toFixed(1)} % of bytes${run.psnr === null ? '' : `, PSNR(Y) ${run.psnr.toFixed(2)} dB`}\n`,
        );
      }
    }
    results[picture] = {};
    for (const [seconds, list] of runs) {
      results[picture]![`${seconds}s`] = {
        cpuMsPerFrame: summarise(list.map((r) => r.cpuMsPerFrame)),
        kbps: summarise(list.map((r) => r.kbps)),
        keyframeShare: summarise(list.map((r) => r.keyframeShare)),
        psnr: list[0]!.psnr === null ? null : summarise(list.map((r) => r.psnr!)),
      };
    }
  }
  process.stdout.write(`${JSON.stringify(results, null, 1)}\n`);
  finishReport(info, loadavg(), args.json, { results });
}

await runBench('clip-segments', main);
