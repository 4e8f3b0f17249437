/**
 * Rate control that holds its target (issue 25 part 3): the bitrate each encoder backend delivers,
 * per 2 s window of media time, against the target it was given.
 *
 *   node --conditions=source --import tsx bench/rate-control.ts [--backends libx264,libx264-high,libx265,libvpx]
 *        [--pictures grain,pattern] [--size 1280x720] [--fps 30] [--seconds 20] [--step-seconds 8]
 *        [--settings after|before] [--no-step] [--json out.json]
 *
 * The frames: bench/support/pictures.ts's `grain` (the `pattern` overlays on fresh luma noise every
 * frame: no encoder can predict it, so the rate control has to hold the budget itself) and `pattern`
 * (easy content: the encoders undershoot by design, and must not pad), drawn frame by frame. Each
 * frame carries its media time (i / fps) and the encoders budget by frame timestamps, not by the
 * wall clock, so the run goes as fast as the CPU allows and load cannot change the bytes.
 *
 * Steady run: `--seconds` of frames at the runtime's default track bitrate for the size (2,500
 * kbit/s at 1280x720: video-encoder-factory.ts's defaultBitrateKbps). Step run (grain only): the
 * same, with the target changed 2,500 → 1,000 → 2,500 kbit/s every `--step-seconds` through the
 * runtime's live path (`StreamVideoEncoder.setBitrate`, as network adaptation calls it).
 *
 * Reported: over every 2 s window (sliding by one frame) of delivered bytes, the ratio to the
 * target: min / max, and the share of windows within ±15 % (the goal: all of them on grain). For
 * the step, the frames from each change until every later window (wholly after the change, before
 * the next one) is within ±15 % of the new target, and the size of the frame after the change
 * (VP8 reopens its encoder on a large change: that frame is a keyframe).
 *
 * `--settings before`: the encoder options as they were before issue 25 part 3 (libvpx: qmax 56,
 * no frame dropping, a 1 s buffer starting at 500 ms, keyframes up to 900 % of a frame; x264 and
 * x265's options did not change, and are set to what they were all the same) and the old
 * `setBitrate` (context fields only: never reached a running libvpx or libx265, and gave x264 its
 * full VBV buffer at once after a decrease), re-created here on an FFmpeg context opened the
 * runtime's way, so before and after run in one checkout.
 *
 * NVENC is not measured: neither the addon's own NVENC backend nor FFmpeg's h264_nvenc /
 * hevc_nvenc opens without an NVIDIA GPU and driver. On a GPU host `--backends h264_nvenc`
 * runs FFmpeg's wrapper through the same loop.
 */

import { parseArgs } from 'node:util';
import { AV_PICTURE_TYPE_NONE, AV_PIX_FMT_YUV420P, AVERROR_EAGAIN } from 'node-av/constants';
import { CodecContext, FFmpegError, Frame, Packet } from 'node-av/lib';
import { ENCODER_BACKEND_CANDIDATES, type EncoderBackend } from '../runtime/media/encoder-backends.ts';
import { createFfmpegEncoderContext, quietFfmpegInfoLogs, type EncoderSettings } from '../runtime/media/ffmpeg-encoder-options.ts';
import { openStreamEncoder } from '../runtime/media/video-encoder-factory.ts';
import type { H264Profile } from '../runtime/media/video-encoder.ts';
import { loadavg } from './support/measure.ts';
import { PictureDrawer, type Picture } from './support/pictures.ts';
import { finishReport, runBench, runInfo } from './support/report.ts';

const { values: args } = parseArgs({
  options: {
    backends: { type: 'string', default: 'libx264,libx264-high,libx265,libvpx' },
    pictures: { type: 'string', default: 'grain,pattern' },
    size: { type: 'string', default: '1280x720' },
    fps: { type: 'string', default: '30' },
    seconds: { type: 'string', default: '20' },
    'step-seconds': { type: 'string', default: '8' },
    settings: { type: 'string', default: 'after' },
    'no-step': { type: 'boolean', default: false },
    json: { type: 'string' },
  },
});
const [WIDTH, HEIGHT] = args.size.split('x').map(Number) as [number, number];
const FPS = Number(args.fps);
const SECONDS = Number(args.seconds);
const STEP_SECONDS = Number(args['step-seconds']);
const SETTINGS = args.settings;
if (SETTINGS !== 'after' && SETTINGS !== 'before') throw new Error('--settings takes after or before');
const PICTURES = args.pictures.split(',').map((p) => p.trim()) as Picture[];
const WINDOW_S = 2;
const TOLERANCE = 0.15;

/** The runtime's default for the size (video-encoder-factory.ts). */
const DEFAULT_KBPS = Math.round(Math.min(20_000, Math.max(150, (2500 * WIDTH * HEIGHT) / (1280 * 720))));

interface Variant {
  label: string;
  backend: EncoderBackend;
  profile: H264Profile;
}

const ALL_BACKENDS = Object.values(ENCODER_BACKEND_CANDIDATES)
  .flat()
  .map((c) => c.backend);
const VARIANTS: Variant[] = args.backends.split(',').map((label) => {
  const high = label.trim().endsWith('-high');
  const name = label.trim().replace(/-high$/, '');
  const backend = ALL_BACKENDS.find((b) => b.name === name && b.implementation === 'ffmpeg');
  if (!backend) throw new Error(`unknown FFmpeg backend "${name}"`);
  return { label: label.trim(), backend, profile: high ? 'high' : 'constrained-baseline' };
});

/** One encoder as the bench drives it: a frame in, bytes out; live target changes. */
interface Driver {
  encode(data: Uint8Array, index: number): Promise<{ bytes: number; keyframe: boolean }>;
  setBitrate(kbps: number): void;
  close(): void;
}

async function openAfter(variant: Variant, kbps: number): Promise<Driver> {
  const encoder = await openStreamEncoder({
    codec: variant.backend.codec,
    width: WIDTH,
    height: HEIGHT,
    fps: FPS,
    bitrateKbps: kbps,
    backend: variant.backend,
    ...(variant.backend.codec === 'h264' ? { profile: variant.profile } : {}),
  });
  return {
    async encode(data, index) {
      const out = await encoder.encode({
        width: WIDTH,
        height: HEIGHT,
        format: 'i420',
        data,
        timestampUs: Math.round((index * 1e6) / FPS),
      });
      return { bytes: out.reduce((n, u) => n + u.data.byteLength, 0), keyframe: out.some((u) => u.keyframe) };
    },
    setBitrate: (value) => encoder.setBitrate(value),
    close: () => encoder.close(),
  };
}

/**
 * The settings as they were before issue 25 part 3, on top of the runtime's context: every option
 * ffmpeg-encoder-options.ts changed, set back to its old value.
 */
function applyBeforeSettings(context: CodecContext, backend: EncoderBackend, settings: EncoderSettings, bitsPerSecond: bigint): void {
  const set = (name: string, value: string | number): void => FFmpegError.throwIfError(context.setOption(name, value), `set ${name}`);
  switch (backend.name) {
    case 'libvpx':
      context.rcMinRate = bitsPerSecond;
      context.rcMaxRate = bitsPerSecond;
      context.rcBufferSize = Number(bitsPerSecond);
      context.qMin = 2;
      context.qMax = 56;
      set('rc_init_occupancy', Number(bitsPerSecond / 2n));
      set('drop-threshold', 0);
      set('undershoot-pct', 100);
      set('overshoot-pct', 15);
      set('max-intra-rate', Math.max(300, Math.round((600 * 0.5 * settings.fps) / 10)));
      break;
    case 'libx264': {
      context.rcMaxRate = bitsPerSecond;
      context.rcBufferSize = Number(bitsPerSecond / 2n);
      const params = ['repeat-headers=1', 'annexb=1', 'scenecut=0', 'sliced-threads=1', 'sync-lookahead=0', 'rc-lookahead=0'];
      if (settings.h264Profile === 'high') params.push('cabac=1', '8x8dct=1');
      set('x264-params', params.join(':'));
      break;
    }
    case 'libx265': {
      context.rcMaxRate = bitsPerSecond;
      context.rcBufferSize = Number(bitsPerSecond / 2n);
      const params = [
        'repeat-headers=1',
        'annexb=1',
        'scenecut=0',
        'open-gop=0',
        'frame-threads=1',
        `pools=${context.getOption('x265-params')?.match(/pools=(\d+)/)?.[1] ?? 1}`,
        'info=0',
        'hash=0',
        'lookahead-slices=0',
        'log-level=warning',
      ];
      set('x265-params', params.join(':'));
      break;
    }
    default:
      break;
  }
}

/** The old encoder on a bare context, with the old `setBitrate` (libvpx: not applied). */
async function openBefore(variant: Variant, kbps: number): Promise<Driver> {
  quietFfmpegInfoLogs();
  const settings: EncoderSettings = { width: WIDTH, height: HEIGHT, fps: FPS, bitrateKbps: kbps, h264Profile: variant.profile };
  const { context, encoder } = createFfmpegEncoderContext(variant.backend, settings);
  applyBeforeSettings(context, variant.backend, settings, BigInt(kbps * 1000));
  FFmpegError.throwIfError(await context.open2(encoder, null), `open ${variant.backend.name}`);
  const frame = new Frame();
  frame.alloc();
  frame.format = AV_PIX_FMT_YUV420P;
  frame.width = WIDTH;
  frame.height = HEIGHT;
  FFmpegError.throwIfError(frame.allocBuffer(), 'allocate frame');
  const packet = new Packet();
  packet.alloc();
  let current = kbps;
  return {
    async encode(data, index) {
      FFmpegError.throwIfError(frame.makeWritable(), 'make writable');
      const planes = frame.data!;
      const strides = frame.linesize;
      const copy = (plane: number, offset: number, rowBytes: number, rows: number): void => {
        for (let row = 0; row < rows; row++)
          planes[plane]!.set(data.subarray(offset + row * rowBytes, offset + (row + 1) * rowBytes), row * strides[plane]!);
      };
      const cw = WIDTH / 2;
      const ch = HEIGHT / 2;
      copy(0, 0, WIDTH, HEIGHT);
      copy(1, WIDTH * HEIGHT, cw, ch);
      copy(2, WIDTH * HEIGHT + cw * ch, cw, ch);
      frame.pts = BigInt(index);
      frame.pictType = AV_PICTURE_TYPE_NONE;
      FFmpegError.throwIfError(await context.sendFrame(frame), 'sendFrame');
      let bytes = 0;
      let keyframe = false;
      for (;;) {
        const received = await context.receivePacket(packet);
        if (received === AVERROR_EAGAIN || received < 0) break;
        bytes += packet.size;
        keyframe ||= packet.isKeyframe;
        packet.unref();
      }
      return { bytes, keyframe };
    },
    // FfmpegVideoEncoder.setBitrate as it was: the context's rates, which libvpx never reads again.
    setBitrate(value) {
      const ratio = value / current;
      const bps = BigInt(Math.round(value * 1000));
      context.bitRate = bps;
      context.rcMaxRate = bps;
      context.rcBufferSize = Math.round(context.rcBufferSize * ratio);
      current = value;
    },
    close() {
      context.freeContext();
      frame.free();
      packet.free();
    },
  };
}

interface Segment {
  fromFrame: number;
  kbps: number;
}

interface RunResult {
  variant: string;
  picture: Picture;
  run: 'steady' | 'step';
  frames: number;
  /** kbit/s over the whole run. */
  meanKbps: number;
  /** Per 2 s window wholly inside one segment (sliding by a frame): delivered / target. */
  windows: { count: number; min: number; max: number; within: number };
  /** Non-overlapping 2 s windows from the start: delivered kbit/s / target kbit/s. */
  blocks: { kbps: number; target: number }[];
  steps: { fromFrame: number; kbps: number; settleFrames: number | null; firstFrameBytes: number; firstFrameKeyframe: boolean }[];
  keyframes: number;
  /** Frames that gave no packet (libvpx's frame dropping). */
  dropped: number;
  encodeMs: number;
}

async function run(
  variant: Variant,
  picture: Picture,
  segments: Segment[],
  totalFrames: number,
  kind: 'steady' | 'step',
): Promise<RunResult> {
  const drawer = new PictureDrawer(WIDTH, HEIGHT, picture);
  const driver = await (SETTINGS === 'after' ? openAfter : openBefore)(variant, segments[0]!.kbps);
  const bytes: number[] = [];
  const keyframes: boolean[] = [];
  let encodeMs = 0;
  try {
    let segment = 0;
    for (let i = 0; i < totalFrames; i++) {
      if (segment + 1 < segments.length && segments[segment + 1]!.fromFrame === i) {
        segment++;
        driver.setBitrate(segments[segment]!.kbps);
      }
      const data = drawer.draw(i);
      const started = performance.now();
      const out = await driver.encode(data, i);
      encodeMs += performance.now() - started;
      bytes.push(out.bytes);
      keyframes.push(out.keyframe);
    }
  } finally {
    driver.close();
  }
  const windowFrames = Math.round(WINDOW_S * FPS);
  const prefix = [0];
  for (const b of bytes) prefix.push(prefix[prefix.length - 1]! + b);
  const windowKbps = (start: number): number => ((prefix[start + windowFrames]! - prefix[start]!) * 8) / WINDOW_S / 1000;
  const ratios: number[] = [];
  const steps: RunResult['steps'] = [];
  segments.forEach((seg, s) => {
    const end = s + 1 < segments.length ? segments[s + 1]!.fromFrame : totalFrames;
    const inSegment: number[] = [];
    for (let start = seg.fromFrame; start + windowFrames <= end; start++) inSegment.push(windowKbps(start) / seg.kbps);
    ratios.push(...inSegment);
    if (s > 0) {
      // The first start from which every later window of the segment is within the tolerance.
      let settle: number | null = null;
      for (let k = inSegment.length - 1; k >= 0; k--) {
        if (Math.abs(inSegment[k]! - 1) > TOLERANCE) break;
        settle = k;
      }
      steps.push({
        fromFrame: seg.fromFrame,
        kbps: seg.kbps,
        settleFrames: settle,
        firstFrameBytes: bytes[seg.fromFrame]!,
        firstFrameKeyframe: keyframes[seg.fromFrame]!,
      });
    }
  });
  const blocks: RunResult['blocks'] = [];
  for (let start = 0; start + windowFrames <= totalFrames; start += windowFrames) {
    const target = [...segments].reverse().find((seg) => seg.fromFrame <= start)!.kbps;
    blocks.push({ kbps: windowKbps(start), target });
  }
  return {
    variant: variant.label,
    picture,
    run: kind,
    frames: totalFrames,
    meanKbps: (prefix[totalFrames]! * 8) / (totalFrames / FPS) / 1000,
    windows: {
      count: ratios.length,
      min: Math.min(...ratios),
      max: Math.max(...ratios),
      within: ratios.filter((r) => Math.abs(r - 1) <= TOLERANCE).length / ratios.length,
    },
    blocks,
    steps,
    keyframes: keyframes.filter(Boolean).length,
    dropped: bytes.filter((b) => b === 0).length,
    encodeMs: encodeMs / totalFrames,
  };
}

const pct = (x: number): string => `${(x * 100).toFixed(1)} %`;

function print(r: RunResult): void {
  const goal = r.picture === 'grain' ? (r.windows.within === 1 ? 'MET' : 'NOT MET') : 'n/a (easy content)';
  process.stdout.write(
    `${r.run.padEnd(6)} ${r.variant.padEnd(13)} ${r.picture.padEnd(7)} mean ${r.meanKbps.toFixed(0).padStart(5)} kbit/s; ` +
      `2 s windows ${r.windows.count}: ratio ${r.windows.min.toFixed(3)}–${r.windows.max.toFixed(3)}, within ±15 % ${pct(r.windows.within)} → ${goal}; ` +
      `keyframes ${r.keyframes}; dropped ${r.dropped}; encode ${r.encodeMs.toFixed(1)} ms/frame\n` +
      `       blocks (kbit/s / target): ${r.blocks.map((b) => `${b.kbps.toFixed(0)}/${b.target}`).join(' ')}\n`,
  );
  for (const s of r.steps) {
    process.stdout.write(
      `       step → ${s.kbps} kbit/s at frame ${s.fromFrame}: within ±15 % from ${s.settleFrames === null ? 'never' : `${s.settleFrames} frames (${((s.settleFrames / FPS) * 1000).toFixed(0)} ms)`}; ` +
        `first frame ${(s.firstFrameBytes / 1000).toFixed(1)} kB${s.firstFrameKeyframe ? ' (keyframe)' : ''}\n`,
    );
  }
}

async function main(): Promise<void> {
  const info = runInfo();
  process.stdout.write(
    `rate-control: settings ${SETTINGS}, ${WIDTH}x${HEIGHT}@${FPS}, ${SECONDS} s steady at ${DEFAULT_KBPS} kbit/s` +
      (args['no-step'] ? '' : `, step ${DEFAULT_KBPS} → ${Math.round(DEFAULT_KBPS * 0.4)} → ${DEFAULT_KBPS} every ${STEP_SECONDS} s`) +
      `; backends ${VARIANTS.map((v) => v.label).join(', ')}\n${JSON.stringify(info)}\n`,
  );
  const results: RunResult[] = [];
  for (const variant of VARIANTS) {
    for (const picture of PICTURES) {
      const r = await run(variant, picture, [{ fromFrame: 0, kbps: DEFAULT_KBPS }], Math.round(SECONDS * FPS), 'steady');
      results.push(r);
      print(r);
    }
    if (!args['no-step'] && PICTURES.includes('grain')) {
      const n = Math.round(STEP_SECONDS * FPS);
      const segments = [
        { fromFrame: 0, kbps: DEFAULT_KBPS },
        { fromFrame: n, kbps: Math.round(DEFAULT_KBPS * 0.4) },
        { fromFrame: 2 * n, kbps: DEFAULT_KBPS },
      ];
      const r = await run(variant, 'grain', segments, 3 * n, 'step');
      results.push(r);
      print(r);
    }
  }
  finishReport(info, loadavg(), args.json, {
    settings: SETTINGS,
    width: WIDTH,
    height: HEIGHT,
    fps: FPS,
    defaultKbps: DEFAULT_KBPS,
    results,
  });
}

await runBench('rate-control', main);
