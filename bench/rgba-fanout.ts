/**
 * RGBA frames fanned out to 1, 2 and 3 consumers (issue 26 part 3): runtime CPU per frame when a
 * model emits 720p RGBA into an output track viewed by an H.264 viewer (1), an H.264 and a VP8
 * viewer (2), and both plus the session recorder reading the track's frame tap (3) — with each
 * encoder converting the RGBA with swscale itself (`before`, the path without the native addon,
 * forced by `setConvertRgbaOnce(false)`) and with the frame converted once by the native converter
 * before the fan-out (`after`, the default), A/B in the same process and run.
 *
 *   node --conditions=source --import tsx bench/rgba-fanout.ts [--rounds 5] [--frames 90] [--warmup 15] [--consumers 1,2,3] [--picture pattern|grain] [--json out.json]
 *
 * Per round, consumer count and mode: a fresh `OutputVideoTrack` (1280×720, 30 fps, the real
 * encoders, recording sinks that drop the packets, a real `TrackRecorder` into memory for the
 * third), `--warmup` frames to open the encoders and settle, then `--frames` frames emitted
 * (`block`: the track paces them at 30 fps) from a ring of 30 pre-drawn RGBA pictures. CPU is
 * `process.cpuUsage()` (every thread: the encoders' node-av thread pool included) from after the
 * warm-up to the last measured frame encoded for every viewer (and, with the recorder, its
 * close: its own encode runs behind), ÷ frames; beside it the main thread's utilisation over the
 * same window. The two modes' order alternates every round. Figures: median over rounds (min–max).
 */

import { performance as perf } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { createLogger } from '../server-kit/log.ts';
import { RuntimeMetrics } from '../runtime/metrics.ts';
import { setConvertRgbaOnce } from '../runtime/media/encoder-input.ts';
import { convertVideoFrame } from '../runtime/media/frame-convert.ts';
import type { VideoFrame } from '../runtime/media/frames.ts';
import { OutputVideoTrack, type VideoSink } from '../runtime/media/output-video-track.ts';
import type { VideoCodec } from '../runtime/media/video-encoder.ts';
import { nativeAddonStatus } from '../runtime/native/native-addon.ts';
import type { RecordingStorage } from '../runtime/recording/recording-storage.ts';
import { TrackRecorder } from '../runtime/recording/track-recorder.ts';
import { loadavg, median, sleep } from './support/measure.ts';
import { PictureDrawer, type Picture } from './support/pictures.ts';
import { finishReport, runBench, runInfo } from './support/report.ts';

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    frames: { type: 'string', default: '90' },
    warmup: { type: 'string', default: '15' },
    consumers: { type: 'string', default: '1,2,3' },
    picture: { type: 'string', default: 'pattern' },
    json: { type: 'string' },
  },
});
const ROUNDS = Number(args.rounds);
const FRAMES = Number(args.frames);
const WARMUP = Number(args.warmup);
const CONSUMERS = args.consumers.split(',').map(Number);
const PICTURE = args.picture as Picture;
const WIDTH = 1280;
const HEIGHT = 720;
const FPS = 30;
const RING = 30;
const MODES = ['before', 'after'] as const;
type Mode = (typeof MODES)[number];

/** The viewers' codecs for N consumers; the third consumer is the recorder. */
const VIEWERS: Record<number, VideoCodec[]> = { 1: ['h264'], 2: ['h264', 'vp8'], 3: ['h264', 'vp8'] };

interface Run {
  cpuMsPerFrame: number;
  /** Main-thread utilisation over the measured window, 0–1. */
  mainThread: number;
  converted: number;
  framesMeasured: number;
}

class MemoryStorage implements RecordingStorage {
  bytes = 0;
  write(_key: string, data: Buffer): Promise<void> {
    this.bytes += data.length;
    return Promise.resolve();
  }
  read(key: string): Promise<Buffer> {
    return Promise.reject(new Error(`no ${key}`));
  }
  removePrefix(): Promise<void> {
    return Promise.resolve();
  }
}

function sink(connectionId: number, codec: VideoCodec): VideoSink {
  return { connectionId, codec, sendFrame: (_payloads, rtpTimestamp) => rtpTimestamp };
}

async function counted(metrics: RuntimeMetrics, codec: string): Promise<number> {
  const m = await metrics.encodeDuration.get();
  return m.values.find((v) => v.metricName === 'arclight_encode_duration_seconds_count' && v.labels['codec'] === codec)?.value ?? 0;
}

async function converted(metrics: RuntimeMetrics): Promise<number> {
  const m = await metrics.framesConverted.get();
  return m.values.reduce((sum, v) => sum + v.value, 0);
}

/** Waits until every viewer's stream has encoded `frames` frames (30 s at most). */
async function encodedAll(metrics: RuntimeMetrics, codecs: readonly VideoCodec[], frames: number): Promise<void> {
  for (let i = 0; i < 3000; i++) {
    const counts = await Promise.all(codecs.map((c) => counted(metrics, c)));
    if (counts.every((n) => n >= frames)) return;
    await sleep(10);
  }
  throw new Error(`the encoders did not reach ${frames} frames`);
}

async function runOnce(ring: readonly VideoFrame[], consumers: number, mode: Mode): Promise<Run> {
  setConvertRgbaOnce(mode === 'after');
  const log = createLogger({}, 'error');
  const metrics = new RuntimeMetrics({ processMetrics: false });
  const track = new OutputVideoTrack(
    { name: 'main_video', kind: 'video', direction: 'recvonly', width: WIDTH, height: HEIGHT },
    FPS,
    log,
    metrics,
  );
  const codecs = VIEWERS[consumers]!;
  for (const [i, codec] of codecs.entries()) {
    const s = sink(i + 1, codec);
    track.addSink(s, { paused: false });
    track.sinkReady(s);
  }
  const recorder =
    consumers >= 3
      ? new TrackRecorder({
          storage: new MemoryStorage(),
          prefix: 'bench/main_video',
          width: WIDTH,
          height: HEIGHT,
          fps: FPS,
          bitrateKbps: 2500,
          log,
        })
      : undefined;
  if (recorder) track.setFrameTap((frame, wallTimeMs) => recorder.push(frame, wallTimeMs));
  let frame = 0;
  let closing: Promise<void> | undefined;
  try {
    for (; frame < WARMUP; frame++) await track.emit(ring[frame % RING]!);
    await encodedAll(metrics, codecs, WARMUP);
    const convertedBefore = await converted(metrics);
    const cpuBefore = process.cpuUsage();
    const eluBefore = perf.eventLoopUtilization();
    for (; frame < WARMUP + FRAMES; frame++) await track.emit(ring[frame % RING]!);
    await encodedAll(metrics, codecs, WARMUP + FRAMES);
    closing = recorder?.close();
    await closing;
    const cpu = process.cpuUsage(cpuBefore);
    const elu = perf.eventLoopUtilization(eluBefore);
    return {
      cpuMsPerFrame: (cpu.user + cpu.system) / 1000 / FRAMES,
      mainThread: elu.utilization,
      converted: (await converted(metrics)) - convertedBefore,
      framesMeasured: FRAMES,
    };
  } finally {
    await track.close();
    await (closing ?? recorder?.close());
    setConvertRgbaOnce(true);
  }
}

function spread(values: readonly number[], digits: number): string {
  return `${median(values).toFixed(digits)} (${Math.min(...values).toFixed(digits)}–${Math.max(...values).toFixed(digits)})`;
}

await runBench('rgba-fanout', async () => {
  const info = runInfo();
  const status = nativeAddonStatus();
  if (!status.loaded) throw new Error(`the native addon is needed for the "after" path: ${status.reason ?? 'not loaded'}`);
  process.stdout.write(
    `rgba-fanout: ${WIDTH}x${HEIGHT} RGBA ${PICTURE} at ${FPS} fps, consumers {${CONSUMERS.join(', ')}}, ${ROUNDS} rounds × ${FRAMES} frames (+${WARMUP} warm-up); native addon ${status.version}\n${JSON.stringify(info)}\n`,
  );
  const drawer = new PictureDrawer(WIDTH, HEIGHT, PICTURE);
  const ring = Array.from({ length: RING }, (_, i) =>
    convertVideoFrame({ width: WIDTH, height: HEIGHT, format: 'i420', data: drawer.draw(i).slice() }, 'rgba'),
  );
  const runs = new Map<string, Run[]>();
  for (let round = 0; round < ROUNDS; round++) {
    for (const consumers of CONSUMERS) {
      // Alternated, so drift in the machine's load falls on both modes alike.
      const order = (round + consumers) % 2 === 0 ? MODES : ([...MODES].reverse() as Mode[]);
      for (const mode of order) {
        const run = await runOnce(ring, consumers, mode);
        const key = `${consumers}:${mode}`;
        runs.set(key, [...(runs.get(key) ?? []), run]);
        process.stdout.write(
          `round ${round + 1} consumers ${consumers} ${mode.padEnd(6)}: ${run.cpuMsPerFrame.toFixed(2)} ms CPU/frame, main thread ${(run.mainThread * 100).toFixed(0)} %, ${run.converted} native conversions\n`,
        );
      }
    }
  }
  const results: Record<string, unknown> = {};
  process.stdout.write(
    '\n| Consumers | before: swscale per encoder (ms CPU/frame) | after: native once | after − before | after / before | main thread before → after |\n|---|---|---|---|---|---|\n',
  );
  for (const consumers of CONSUMERS) {
    const before = runs.get(`${consumers}:before`)!;
    const after = runs.get(`${consumers}:after`)!;
    // Paired by round: each round ran both modes back to back.
    const deltas = after.map((r, i) => r.cpuMsPerFrame - before[i]!.cpuMsPerFrame);
    const ratios = after.map((r, i) => r.cpuMsPerFrame / before[i]!.cpuMsPerFrame);
    process.stdout.write(
      `| ${consumers} (${VIEWERS[consumers]!.join(' + ')}${consumers >= 3 ? ' + recorder' : ''}) | ${spread(
        before.map((r) => r.cpuMsPerFrame),
        2,
      )} | ${spread(
        after.map((r) => r.cpuMsPerFrame),
        2,
      )} | ${spread(deltas, 2)} | ${spread(ratios, 2)} | ${spread(
        before.map((r) => r.mainThread * 100),
        0,
      )} % → ${spread(
        after.map((r) => r.mainThread * 100),
        0,
      )} % |\n`,
    );
    results[`consumers${consumers}`] = { before, after, deltas, ratios };
  }
  finishReport(info, loadavg(), args.json, { results });
});
