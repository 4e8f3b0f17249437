/**
 * How each FFmpeg encoder is opened: the options libx264, libx265, libvpx and FFmpeg's NVENC
 * wrappers get for interactive streaming. Both the backend probe (encoder-probes.ts) and a real
 * `FfmpegVideoEncoder` open their encoders through `openFfmpegEncoder`, so the two cannot drift
 * apart: an option this FFmpeg build rejects fails the probe and the next candidate is used,
 * instead of failing every stream later.
 */
import os from 'node:os';
import { Codec, CodecContext, FFmpegError, Log, Rational } from 'node-av/lib';
import {
  AV_LOG_INFO,
  AV_LOG_WARNING,
  AV_PIX_FMT_YUV420P,
  AVCOL_RANGE_MPEG,
  AVCOL_SPC_SMPTE170M,
  FF_ENCODER_H264_NVENC,
  FF_ENCODER_HEVC_NVENC,
  FF_ENCODER_LIBVPX_VP8,
  FF_ENCODER_LIBX264,
  FF_ENCODER_LIBX265,
  FF_THREAD_SLICE,
  type FFEncoderCodec,
} from 'node-av/constants';
import type { EncoderBackend, H264Profile, VideoCodec } from './video-encoder.ts';

/** What an encoder is opened for (validated by `VideoEncoder.create`). */
export interface EncoderSettings {
  readonly width: number;
  readonly height: number;
  readonly fps: number;
  readonly bitrateKbps: number;
  /** H.264 only. */
  readonly h264Profile: H264Profile;
}

/** Long GOP: keyframes are requested on demand, so periodic ones only cost bandwidth. */
const KEYFRAME_INTERVAL_S = 10;

/**
 * A context for the FFmpeg encoder `backend.name`, configured for `settings` but not opened.
 * Throws (after freeing it) if this FFmpeg build lacks the encoder or rejects one of its options.
 */
export function createFfmpegEncoderContext(backend: EncoderBackend, settings: EncoderSettings): { context: CodecContext; encoder: Codec } {
  const encoder = Codec.findEncoderByName(backend.name as FFEncoderCodec);
  if (!encoder) throw new Error(`this FFmpeg build has no ${backend.name} encoder`);
  const { width, height, fps } = settings;
  const context = new CodecContext();
  context.allocContext3(encoder);
  try {
    const bitsPerSecond = BigInt(Math.round(settings.bitrateKbps * 1000));
    const rate = frameRate(fps);
    context.width = width;
    context.height = height;
    context.pixelFormat = AV_PIX_FMT_YUV420P;
    // The pts is a frame counter, so the time base is one frame; rate control then budgets
    // bitrate/fps per frame regardless of jitter in when frames actually arrive.
    context.timeBase = new Rational(rate.den, rate.num);
    context.framerate = new Rational(rate.num, rate.den);
    // Always explicit: unset, libx264 falls back to CRF (no rate cap at all) and libvpx to
    // 256 kbps (node-av's high-level Encoder would pick 1 Mbps).
    context.bitRate = bitsPerSecond;
    context.gopSize = Math.max(1, Math.round(fps * KEYFRAME_INTERVAL_S));
    context.maxBFrames = 0;
    // frame-convert.ts and swscale both produce BT.601 limited range; say so in the bitstream.
    context.colorRange = AVCOL_RANGE_MPEG;
    context.colorSpace = AVCOL_SPC_SMPTE170M;
    const cores = os.availableParallelism();
    switch (backend.name) {
      case FF_ENCODER_LIBX264:
        configureX264(context, settings, bitsPerSecond, cores);
        break;
      case FF_ENCODER_LIBX265:
        configureX265(context, settings, bitsPerSecond, cores);
        break;
      case FF_ENCODER_LIBVPX_VP8:
        configureLibvpx(context, settings, bitsPerSecond, cores);
        break;
      case FF_ENCODER_H264_NVENC:
      case FF_ENCODER_HEVC_NVENC:
        configureNvenc(context, backend.codec, settings, bitsPerSecond);
        break;
      default:
        throw new Error(`no configuration for the ${backend.name} encoder`);
    }
    return { context, encoder };
  } catch (error) {
    context.freeContext();
    throw error;
  }
}

/** `createFfmpegEncoderContext`, then opened. */
export async function openFfmpegEncoder(backend: EncoderBackend, settings: EncoderSettings): Promise<CodecContext> {
  const { context, encoder } = createFfmpegEncoderContext(backend, settings);
  try {
    FFmpegError.throwIfError(await context.open2(encoder, null), `open ${backend.name}`);
    return context;
  } catch (error) {
    context.freeContext();
    throw error;
  }
}

function setOptions(context: CodecContext, options: Record<string, string | number>): void {
  for (const [name, value] of Object.entries(options)) {
    // A misspelt option is silently ignored by FFmpeg; fail loudly instead.
    FFmpegError.throwIfError(context.setOption(name, value), `set encoder option ${name}=${value}`);
  }
}

/**
 * x264: sliced threads split each frame across cores without frame threading's one-frame-per-
 * thread delay, and they wait on condition variables; more than four buys little at these sizes.
 */
function configureX264(context: CodecContext, settings: EncoderSettings, bitsPerSecond: bigint, cores: number): void {
  context.threadCount = Math.max(1, Math.min(4, cores));
  context.threadType = FF_THREAD_SLICE;
  // VBV capped at the target: near-CBR so the network sees a steady rate; a half-second buffer
  // leaves room for an on-demand IDR without letting bursts build latency.
  context.rcMaxRate = bitsPerSecond;
  context.rcBufferSize = Number(bitsPerSecond / 2n);
  context.level = h264Level(settings.width, settings.height, settings.fps);
  const x264Params = ['repeat-headers=1', 'annexb=1', 'scenecut=0', 'sliced-threads=1', 'sync-lookahead=0', 'rc-lookahead=0'];
  if (settings.h264Profile === 'high') {
    // x264 signals the lowest profile its features need, and ultrafast turns off everything High
    // adds, so it would still write Baseline. CABAC and the 8x8 transform are most of High's gain
    // and make the SPS say High (profile_idc 100); B-frames stay off (latency).
    x264Params.push('cabac=1', '8x8dct=1');
  }
  setOptions(context, {
    preset: 'ultrafast',
    tune: 'zerolatency',
    // baseline: x264 signals profile_idc 66 + constraint_set1 (42c0xx): Constrained Baseline, which
    // every browser's WebRTC stack decodes (same profile as the SDP's 42e01f).
    profile: settings.h264Profile === 'high' ? 'high' : 'baseline',
    // Makes a frame sent with pictType I an IDR, not a mere I-frame a joiner cannot start on.
    'forced-idr': 1,
    // repeat-headers puts SPS/PPS before every IDR; annexb gives start codes, as RTP packetisers want.
    'x264-params': x264Params.join(':'),
  });
}

/**
 * x265: zerolatency already means no B-frames, no lookahead and one frame thread; FFmpeg copies the
 * context's thread count into x265's frame threads, so it must stay 1 (each extra frame thread delays
 * output by a frame). Parallelism comes from wavefront rows on a pool of `pools` threads instead.
 */
function configureX265(context: CodecContext, settings: EncoderSettings, bitsPerSecond: bigint, cores: number): void {
  context.threadCount = 1;
  context.rcMaxRate = bitsPerSecond;
  context.rcBufferSize = Number(bitsPerSecond / 2n);
  const x265Params = [
    // VPS/SPS/PPS before every IRAP, start codes, and IRAPs only when asked for (or every GOP).
    'repeat-headers=1',
    'annexb=1',
    'scenecut=0',
    'open-gop=0',
    'frame-threads=1',
    `pools=${Math.max(1, Math.min(8, cores))}`,
    // No per-stream version-string SEI or per-picture hash SEI: bytes nobody on a call reads.
    'info=0',
    'hash=0',
    // Otherwise it warns (on stderr, past FFmpeg's log level) that it disables them below 720p.
    'lookahead-slices=0',
    'log-level=warning',
  ];
  setOptions(context, {
    preset: 'ultrafast',
    tune: 'zerolatency',
    profile: 'main',
    'forced-idr': 1,
    'x265-params': x265Params.join(':'),
  });
}

/**
 * libvpx VP8: its row threads spin-wait on each other, which on a busy 2-core box turned 5 ms
 * encodes into 170 ms stalls; so WebRTC's rule: a second thread only above 640x480 with 3+ cores.
 */
function configureLibvpx(context: CodecContext, settings: EncoderSettings, bitsPerSecond: bigint, cores: number): void {
  const pixels = settings.width * settings.height;
  context.threadCount = pixels > 1280 * 960 && cores >= 6 ? 3 : pixels > 640 * 480 && cores >= 3 ? 2 : 1;
  context.threadType = FF_THREAD_SLICE;
  // min == max == target selects libvpx's CBR mode, the one WebRTC uses.
  context.rcMinRate = bitsPerSecond;
  context.rcMaxRate = bitsPerSecond;
  context.rcBufferSize = Number(bitsPerSecond); // 1000 ms, as WebRTC
  context.qMin = 2;
  context.qMax = 56;
  setOptions(context, {
    rc_init_occupancy: Number(bitsPerSecond / 2n), // 500 ms
    deadline: 'realtime',
    // Fastest realtime speed step; quality at these bitrates is still fine for live video.
    'cpu-used': 12,
    // Any lag would hold frames back and break one-in-one-out.
    'lag-in-frames': 0,
    'auto-alt-ref': 0,
    'error-resilient': 'default',
    'noise-sensitivity': 0,
    'static-thresh': 1,
    'undershoot-pct': 100,
    'overshoot-pct': 15,
    // Caps keyframe size relative to an average frame (WebRTC's formula), so an on-demand
    // keyframe does not stall the pacer.
    'max-intra-rate': Math.max(300, Math.round((600 * 0.5 * settings.fps) / 10)),
  });
}

/**
 * NVENC (h264_nvenc, hevc_nvenc): fastest preset, ultra-low-latency tuning, CBR, no reordering and
 * no output delay, so one frame in gives its packet out. Without AV_CODEC_FLAG_GLOBAL_HEADER, FFmpeg
 * has NVENC repeat SPS/PPS (and VPS) before every IDR. NVENC's H.264 "baseline" is Baseline proper,
 * without the constraint_set1 flag x264 sets; decoders treat the two alike.
 */
function configureNvenc(context: CodecContext, codec: VideoCodec, settings: EncoderSettings, bitsPerSecond: bigint): void {
  context.rcMaxRate = bitsPerSecond;
  context.rcBufferSize = Number(bitsPerSecond / 2n);
  setOptions(context, {
    preset: 'p1',
    tune: 'ull',
    rc: 'cbr',
    zerolatency: 1,
    delay: 0,
    'rc-lookahead': 0,
    'no-scenecut': 1,
    'forced-idr': 1,
    profile: codec === 'h265' ? 'main' : settings.h264Profile === 'high' ? 'high' : 'baseline',
  });
}

/** Smallest H.264 level (at least 3.1, what browsers' SDP offers) that fits the frame size and rate. */
function h264Level(width: number, height: number, fps: number): number {
  const macroblocks = Math.ceil(width / 16) * Math.ceil(height / 16);
  const perSecond = macroblocks * fps;
  const levels: ReadonlyArray<readonly [level: number, maxFrameMbs: number, maxMbsPerSecond: number]> = [
    [31, 3600, 108_000],
    [32, 5120, 216_000],
    [40, 8192, 245_760],
    [42, 8704, 522_240],
    [50, 22_080, 589_824],
    [51, 36_864, 983_040],
    [52, 36_864, 2_073_600],
  ];
  for (const [level, maxFrameMbs, maxMbsPerSecond] of levels) {
    if (macroblocks <= maxFrameMbs && perSecond <= maxMbsPerSecond) return level;
  }
  return 52;
}

/** fps as a rational; NTSC-style rates (29.97) keep three decimals. */
function frameRate(fps: number): { num: number; den: number } {
  return Number.isInteger(fps) ? { num: fps, den: 1 } : { num: Math.round(fps * 1000), den: 1000 };
}

/** Process-wide like FFmpeg's log level itself, which it guards: lowered once per process. */
let ffmpegLogsQuieted = false;

/**
 * FFmpeg logs globally and at INFO prints a banner per encoder open plus a stats block per
 * close. Lower it to WARNING once, unless someone already chose a quieter level.
 */
export function quietFfmpegInfoLogs(): void {
  if (ffmpegLogsQuieted) return;
  ffmpegLogsQuieted = true;
  if (Log.getLevel() >= AV_LOG_INFO) Log.setLevel(AV_LOG_WARNING);
}
