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

/** `openFfmpegEncoder` on the calling thread (a rate change reopening an encoder mid-stream). */
export function openFfmpegEncoderSync(backend: EncoderBackend, settings: EncoderSettings): CodecContext {
  const { context, encoder } = createFfmpegEncoderContext(backend, settings);
  try {
    FFmpegError.throwIfError(context.open2Sync(encoder, null), `open ${backend.name}`);
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
  // Rate control (issue 25 part 3): one-pass ABR with a VBV whose max rate is the target. The VBV
  // is what holds the rate: x264 may not spend above maxrate for longer than the buffer absorbs,
  // and its ABR spends the whole budget on hard content (noise: every 2 s window within ±8 % of
  // the target at 720p, bench/rate-control.ts). Easy content stays below the target — no
  // `nal-hrd=cbr`, whose filler data would pad a static picture up to the full rate. The
  // half-second buffer is the most one frame can take beyond its share: room for an on-demand
  // IDR (and the largest 2 s swing a keyframe causes: ≤ 0.5 s of budget, then paid back) without
  // letting bursts build latency. x264 applies changes of these (setBitrate) to the running
  // encoder (FFmpeg's libx264 wrapper calls x264_encoder_reconfig when they change).
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
  // As x264: ABR with a VBV at the target and a half-second buffer, which holds noise within
  // ±11 % over every 2 s window at 720p. FFmpeg's libx265 wrapper never reconfigures a running
  // encoder, so FfmpegVideoEncoder.setBitrate reopens it for a change worth a keyframe.
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

/** libvpx's rate-control buffer, ms (see configureLibvpx). */
const VPX_BUFFER_MS = 600n;

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
  // The buffer model is what bounds the rate over a window: the encoder steers its buffer level
  // towards the "optimal" level (FFmpeg fixes it at 5/6 of the buffer: 500 ms here), so how far
  // the sent bits can run ahead of or behind the target is about how far the level swings: where
  // it starts, where frame dropping starts, what a keyframe takes. 600 ms, not WebRTC's 1,000: the
  // longer the buffer, the further the level swings while frames are being dropped (720p noise at
  // 1 Mbit/s: 2 s windows at 0.84–1.14 of the target with 900 ms, 0.90–1.10 with 600 ms).
  context.rcBufferSize = Number((bitsPerSecond * VPX_BUFFER_MS) / 1000n);
  // Full range of quantizers. At 56 (WebRTC's cap) a frame of noise at 720p cannot get below
  // ~1.9 Mbit/s, so below that the stream ran over its target (1.9 Mbit/s for a 1 Mbit/s
  // target); at 63 it needs ~1.3 Mbit/s, and frame dropping covers the rest. Easy content never
  // gets near either: rate control picks the quantizer, and 63 is only reached when the budget
  // cannot be met otherwise.
  context.qMin = 2;
  context.qMax = 63;
  setOptions(context, {
    // Start at the optimal level (500 ms): starting below it (500 of 833 ms before) made the
    // encoder underspend for its first seconds to fill the buffer (2 s windows at 75 % of the
    // target).
    rc_init_occupancy: Number((bitsPerSecond * VPX_BUFFER_MS * 5n) / 6n / 1000n),
    deadline: 'realtime',
    // Fastest realtime speed step; quality at these bitrates is still fine for live video.
    'cpu-used': 12,
    // Any lag would hold frames back and break one-in-one-out.
    'lag-in-frames': 0,
    'auto-alt-ref': 0,
    'error-resilient': 'default',
    'noise-sensitivity': 0,
    'static-thresh': 1,
    // How hard the encoder may lower (undershoot) or raise (overshoot) a frame's target to steer
    // its buffer back to the optimal level: WebRTC's values.
    'undershoot-pct': 100,
    'overshoot-pct': 15,
    // Frame dropping (rc_dropframe_thresh, % of the optimal level): when a frame at the highest
    // quantizer still costs more than the budget (noise at a low rate), libvpx skips frames once
    // the level falls under the threshold (it starts at 2/3 of it: 333 ms here, 167 ms below the
    // optimal level; more of them further down), so the rate holds and the frame rate gives (720p
    // noise at 1 Mbit/s: ~22 % of frames dropped). A dropped frame gives no packet (encode()
    // returns []), keyframes are never dropped, and on content the budget covers the level stays
    // near the optimal one and nothing is dropped (none at 2.5 Mbit/s on the same noise).
    'drop-threshold': 100,
    // A keyframe may take up to 20 % of a second's budget (600 % of an average frame at 30 fps;
    // WebRTC's formula gave 900 %). The encoder pays a keyframe's excess back over the next
    // frames, so its size is the 2 s swing it causes: at 900 % that was 25–30 % of a window.
    'max-intra-rate': Math.max(300, Math.round(20 * settings.fps)),
  });
}

/**
 * NVENC (h264_nvenc, hevc_nvenc): fastest preset, ultra-low-latency tuning, CBR, no reordering and
 * no output delay, so one frame in gives its packet out. Without AV_CODEC_FLAG_GLOBAL_HEADER, FFmpeg
 * has NVENC repeat SPS/PPS (and VPS) before every IDR. NVENC's H.264 "baseline" is Baseline proper,
 * without the constraint_set1 flag x264 sets; decoders treat the two alike.
 */
function configureNvenc(context: CodecContext, codec: VideoCodec, settings: EncoderSettings, bitsPerSecond: bigint): void {
  // Rate control (issue 25 part 3; reasoned, not measured: no NVENC engine on the machine that
  // measured the others): NVENC's one-pass CBR, in its firmware, holds the average to the
  // target over its VBV buffer, here half a second as for x264, so a 2 s window can be off by at
  // most about a quarter of that. CBR without `cbr_padding`: no filler on easy content. No
  // lookahead and no multipass, which would add latency or GPU time per frame. FFmpeg's NVENC
  // wrapper applies changes of bit_rate / rc_max_rate / rc_buffer_size to a running encoder
  // (nvEncReconfigureEncoder, where the GPU reports dynamic bitrate support), so setBitrate
  // works in place, with the half-size buffer after a decrease that FfmpegVideoEncoder applies.
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
