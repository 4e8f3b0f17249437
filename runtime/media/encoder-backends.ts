/**
 * Which implementation encodes each video codec, decided once per process.
 *
 * Every codec has a list of candidate backends in order of preference (hardware first). The first
 * time a codec is asked for, each candidate is probed in turn by actually opening it the way
 * `VideoEncoder` would and encoding one small frame; the first that works is selected and cached for
 * the life of the process, and why each earlier one was passed over is kept for the start-up log and
 * /metrics. Probing rather than trusting the FFmpeg build matters: node-av's build lists h264_nvenc
 * and hevc_nvenc on every machine, GPU or not, and they only fail when opened.
 *
 * Probing briefly replaces FFmpeg's process-wide log callback (to catch why a probe failed) and then
 * restores FFmpeg's default one, which writes to stderr. Whoever installs a custom FFmpeg log callback
 * should run the selection first, e.g. `listEncoderBackends()` for the start-up log.
 *
 * This module also holds the FFmpeg side of each backend (the options every encoder is opened with),
 * so that a probe and a real `VideoEncoder` cannot drift apart: an option this FFmpeg build rejects
 * fails the probe and the next candidate is used, instead of failing every stream later.
 */
import os from 'node:os';
import { Codec, CodecContext, FFmpegError, Frame, Log, Packet, Rational } from 'node-av/lib';
import {
  AV_LOG_INFO,
  AV_LOG_WARNING,
  AV_PIX_FMT_YUV420P,
  AVCOL_RANGE_MPEG,
  AVCOL_SPC_SMPTE170M,
  AVERROR_EAGAIN,
  AVERROR_EOF,
  FF_ENCODER_H264_NVENC,
  FF_ENCODER_HEVC_NVENC,
  FF_ENCODER_LIBVPX_VP8,
  FF_ENCODER_LIBX264,
  FF_ENCODER_LIBX265,
  FF_THREAD_SLICE,
  type FFEncoderCodec,
} from 'node-av/constants';
import { nativeAddon, nativeAddonStatus } from '../native/native-addon.ts';
import type { H264Profile, VideoCodec } from './video-encoder.ts';

/**
 * How `VideoEncoder` drives a backend. `'ffmpeg'`: a node-av `CodecContext` for the FFmpeg encoder
 * called `name`, configured by `createFfmpegEncoderContext`. `'native-nvenc'`: Arclight's own NVENC
 * binding in the native addon (`NvencVideoEncoder`).
 */
export type EncoderImplementation = 'ffmpeg' | 'native-nvenc';

/** The implementation that encodes one codec: what /metrics and the start-up log report. */
export interface EncoderBackend {
  /** The encoder's name, e.g. `libx264` or `h264_nvenc` (for FFmpeg backends, FFmpeg's encoder name). */
  readonly name: string;
  readonly codec: VideoCodec;
  /** Encodes on dedicated hardware (GPU) rather than on the CPU. */
  readonly hardware: boolean;
  readonly implementation: EncoderImplementation;
}

export type BackendAvailability = { readonly available: true } | { readonly available: false; readonly reason: string };

/** One entry of a codec's preference list. */
export interface EncoderBackendCandidate {
  readonly backend: EncoderBackend;
  /**
   * Whether the backend can encode on this machine, found by trying. Called at most once per process
   * per codec (the selection is cached), and only if every candidate before it was unavailable.
   * Should not throw; a throw counts as unavailable with its message as the reason.
   */
  available(): Promise<BackendAvailability>;
}

/** What happened to one candidate during selection. */
export interface EncoderCandidateOutcome {
  readonly name: string;
  readonly hardware: boolean;
  /** `'selected'`, `'unavailable: <reason>'`, or `'not probed'` (an earlier candidate was selected). */
  readonly status: string;
}

export interface EncoderBackendSelection {
  readonly codec: VideoCodec;
  readonly backend: EncoderBackend;
  /** Every candidate, in preference order, with what happened to it. */
  readonly candidates: readonly EncoderCandidateOutcome[];
}

/** A codec in a listing: its selection, or `backend: null` when no candidate works. */
export interface EncoderBackendListing {
  readonly codec: VideoCodec;
  readonly backend: EncoderBackend | null;
  readonly candidates: readonly EncoderCandidateOutcome[];
}

/** No candidate could encode the codec; `candidates` says why for each. */
export class NoEncoderBackendError extends Error {
  override readonly name = 'NoEncoderBackendError';
  readonly codec: VideoCodec;
  readonly candidates: readonly EncoderCandidateOutcome[];

  constructor(codec: VideoCodec, candidates: readonly EncoderCandidateOutcome[]) {
    const tried = candidates.map((o) => `${o.name} ${o.status}`).join('; ');
    super(`no usable ${codec} encoder: ${tried || 'no candidates'}`);
    this.codec = codec;
    this.candidates = candidates;
  }
}

export const VIDEO_CODECS: readonly VideoCodec[] = ['h264', 'h265', 'vp8'];

function ffmpegBackend(codec: VideoCodec, name: string, hardware: boolean): EncoderBackendCandidate {
  const backend: EncoderBackend = Object.freeze({ name, codec, hardware, implementation: 'ffmpeg' });
  return { backend, available: () => probeFfmpegBackend(backend) };
}

/** Arclight's NVENC binding: available when the addon is built with NVENC and a session opens. */
function nativeNvencBackend(codec: 'h264' | 'h265'): EncoderBackendCandidate {
  const name = codec === 'h264' ? 'arclight_nvenc_h264' : 'arclight_nvenc_hevc';
  const backend: EncoderBackend = Object.freeze({ name, codec, hardware: true, implementation: 'native-nvenc' });
  return { backend, available: () => probeNativeNvenc(backend) };
}

/**
 * Preference order per codec: Arclight's NVENC binding, then NVENC through FFmpeg, then the
 * software encoder.
 */
export const ENCODER_BACKEND_CANDIDATES: Readonly<Record<VideoCodec, readonly EncoderBackendCandidate[]>> = {
  h264: [nativeNvencBackend('h264'), ffmpegBackend('h264', FF_ENCODER_H264_NVENC, true), ffmpegBackend('h264', FF_ENCODER_LIBX264, false)],
  h265: [nativeNvencBackend('h265'), ffmpegBackend('h265', FF_ENCODER_HEVC_NVENC, true), ffmpegBackend('h265', FF_ENCODER_LIBX265, false)],
  vp8: [ffmpegBackend('vp8', FF_ENCODER_LIBVPX_VP8, false)],
};

const selections = new Map<VideoCodec, Promise<EncoderBackendSelection>>();
/** The settled selections, for a synchronous read (/metrics); absent while one is being probed. */
const settled = new Map<VideoCodec, EncoderBackend>();
/**
 * Backends demoted in this process after they failed in use (`demoteEncoderBackend`), per codec:
 * backend name → why. A demoted backend is never selected again by this process.
 */
const demotions = new Map<VideoCodec, Map<string, string>>();

/** The backend that encodes `codec` in this process; probed on first use, then cached. */
export async function selectEncoderBackend(codec: VideoCodec): Promise<EncoderBackend> {
  return (await encoderBackendSelection(codec)).backend;
}

/**
 * `selectEncoderBackend` with the outcome of every candidate. Rejects with a `NoEncoderBackendError`
 * if no candidate works.
 */
export function encoderBackendSelection(codec: VideoCodec): Promise<EncoderBackendSelection> {
  if (!Object.hasOwn(ENCODER_BACKEND_CANDIDATES, codec)) {
    return Promise.reject(new RangeError(`unsupported video codec ${String(codec)}`));
  }
  const candidates = withDemotions(codec, ENCODER_BACKEND_CANDIDATES[codec]);
  let selection = selections.get(codec);
  if (!selection) {
    const choosing = chooseEncoderBackend(codec, candidates);
    selection = choosing;
    selections.set(codec, choosing);
    choosing.then(
      (chosen) => {
        if (selections.get(codec) === choosing) settled.set(codec, chosen.backend);
      },
      // A failure is not cached: nothing worked, so the next caller may as well try again.
      () => {
        if (selections.get(codec) === choosing) selections.delete(codec);
      },
    );
  }
  return selection;
}

/** A demoted candidate stays in the list (the listing says why it is passed over) but is never available. */
function withDemotions(codec: VideoCodec, candidates: readonly EncoderBackendCandidate[]): readonly EncoderBackendCandidate[] {
  const demoted = demotions.get(codec);
  if (!demoted) return candidates;
  return candidates.map((candidate) => {
    const reason = demoted.get(candidate.backend.name);
    if (reason === undefined) return candidate;
    return { backend: candidate.backend, available: () => Promise.resolve({ available: false, reason: `demoted after failing in use (${reason})` }) };
  });
}

/**
 * Stops using `backendName` for `codec` in this whole process, because it kept failing in use
 * (an NVENC session losing its GPU, say): the selection moves on to the next candidate in
 * `ENCODER_BACKEND_CANDIDATES` (e.g. arclight_nvenc_h264 → h264_nvenc → libx264), which is probed
 * at once so /metrics and `listEncoderBackends()` show it; encoders already open are left to
 * their owners. Returns whether it demoted: not when the backend is unknown, already demoted, or
 * has no candidate after it left — with nothing to fall back to, restarting it is all there is to do.
 */
export function demoteEncoderBackend(codec: VideoCodec, backendName: string, reason: string): boolean {
  if (!Object.hasOwn(ENCODER_BACKEND_CANDIDATES, codec)) return false;
  const candidates = ENCODER_BACKEND_CANDIDATES[codec];
  const demoted = demotions.get(codec) ?? new Map<string, string>();
  const index = candidates.findIndex((c) => c.backend.name === backendName);
  if (index < 0 || demoted.has(backendName)) return false;
  // Only a later candidate can take over: the earlier ones were unavailable when this one was selected.
  if (!candidates.slice(index + 1).some((c) => !demoted.has(c.backend.name))) return false;
  demoted.set(backendName, reason);
  demotions.set(codec, demoted);
  selections.delete(codec);
  settled.delete(codec);
  // Probed now rather than at the next encoder open, so the listing and /metrics follow at once.
  encoderBackendSelection(codec).catch(() => {});
  return true;
}

/** The backend selected for each codec whose selection has settled: what `arclight_encoder_backend` reports. */
export function currentEncoderBackends(): { codec: VideoCodec; backend: EncoderBackend }[] {
  return VIDEO_CODECS.flatMap((codec) => {
    const backend = settled.get(codec);
    return backend ? [{ codec, backend }] : [];
  });
}

/** TEST ONLY. Forgets every demotion and cached selection, so the next use probes afresh. */
export function forgetEncoderBackendDemotions(): void {
  demotions.clear();
  selections.clear();
  settled.clear();
}

/**
 * The selection for every codec, for /metrics and the start-up log; probes those not yet selected.
 * Does not reject for a codec nothing can encode: that one is listed with `backend: null`.
 */
export async function listEncoderBackends(): Promise<EncoderBackendListing[]> {
  const out: EncoderBackendListing[] = [];
  // One codec after another: probes are serialised anyway, and the order stays stable.
  for (const codec of VIDEO_CODECS) {
    try {
      out.push(await encoderBackendSelection(codec));
    } catch (error) {
      if (!(error instanceof NoEncoderBackendError)) throw error;
      out.push({ codec, backend: null, candidates: error.candidates });
    }
  }
  return out;
}

/** One line per codec, e.g. `h264: libx264 (software; h264_nvenc unavailable: ...)`. */
export function describeEncoderBackendSelection(selection: EncoderBackendListing): string {
  const { backend, candidates } = selection;
  const passedOver = candidates.filter((c) => c.status.startsWith('unavailable')).map((c) => `${c.name} ${c.status}`);
  if (!backend) return `${selection.codec}: none (${passedOver.join('; ') || 'no candidates'})`;
  const kind = backend.hardware ? 'hardware' : 'software';
  return `${selection.codec}: ${backend.name} (${[kind, ...passedOver].join('; ')})`;
}

/**
 * Probes `candidates` in order and picks the first available one, uncached. Exported for tests and
 * for a later backend that wants to re-check; the runtime uses `selectEncoderBackend`.
 */
export async function chooseEncoderBackend(
  codec: VideoCodec,
  candidates: readonly EncoderBackendCandidate[],
): Promise<EncoderBackendSelection> {
  const outcomes: EncoderCandidateOutcome[] = candidates.map(({ backend }) => ({
    name: backend.name,
    hardware: backend.hardware,
    status: 'not probed',
  }));
  for (const [index, candidate] of candidates.entries()) {
    let result: BackendAvailability;
    try {
      result = await candidate.available();
    } catch (error) {
      result = { available: false, reason: error instanceof Error ? error.message : String(error) };
    }
    if (result.available) {
      outcomes[index] = { ...outcomes[index]!, status: 'selected' };
      return { codec, backend: candidate.backend, candidates: outcomes };
    }
    outcomes[index] = { ...outcomes[index]!, status: `unavailable: ${result.reason}` };
  }
  throw new NoEncoderBackendError(codec, outcomes);
}

// ---------------------------------------------------------------------------------------------
// FFmpeg backends: how each encoder is opened.

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
export function createFfmpegEncoderContext(
  backend: EncoderBackend,
  settings: EncoderSettings,
): { context: CodecContext; encoder: Codec } {
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

// ---------------------------------------------------------------------------------------------
// Probing

/** Small, but above NVENC's minimum frame size (145x49 for H.264). */
const PROBE_SETTINGS: EncoderSettings = { width: 320, height: 240, fps: 30, bitrateKbps: 300, h264Profile: 'constrained-baseline' };
/** FFmpeg hands log lines to JavaScript asynchronously; how long to wait for a probe's to arrive. */
const LOG_SETTLE_MS = 25;
const MAX_REASON_LOG_LINES = 4;

/** Probes run one at a time: each swaps FFmpeg's (process-wide) log callback while it runs. */
let probeQueue: Promise<unknown> = Promise.resolve();

function probeFfmpegBackend(backend: EncoderBackend): Promise<BackendAvailability> {
  const run = probeQueue.then(() => probeFfmpegBackendNow(backend));
  probeQueue = run.catch(() => undefined);
  return run;
}

/**
 * Opens the encoder exactly as `VideoEncoder` would (at a small size) and encodes one black frame.
 * The FFmpeg error code alone says little ("Operation not permitted" for a missing libcuda), so the
 * log lines FFmpeg writes meanwhile are caught and become part of the reason.
 */
async function probeFfmpegBackendNow(backend: EncoderBackend): Promise<BackendAvailability> {
  quietFfmpegInfoLogs();
  const lines: string[] = [];
  let failure: string | undefined;
  Log.setCallback(
    (_level, message) => {
      const line = message.trim();
      if (line) lines.push(line);
    },
    { maxLevel: AV_LOG_WARNING },
  );
  try {
    await encodeOneFrame(backend);
  } catch (error) {
    failure = error instanceof Error ? error.message : String(error);
  } finally {
    await new Promise((resolve) => setTimeout(resolve, LOG_SETTLE_MS));
    Log.resetCallback();
  }
  if (failure === undefined) {
    // Not ours to explain anything: hand them to stderr, where FFmpeg would have written them.
    for (const line of lines) process.stderr.write(`[ffmpeg] ${line}\n`);
    return { available: true };
  }
  const detail = [...new Set(lines)].slice(0, MAX_REASON_LOG_LINES);
  return { available: false, reason: detail.length > 0 ? `${failure} (FFmpeg: ${detail.join('; ')})` : failure };
}

/**
 * The addon's own probe (driver libraries, a session on GPU 0, the codec in its list), then one
 * black frame through an encoder opened as `NvencVideoEncoder` opens it.
 */
async function probeNativeNvenc(backend: EncoderBackend): Promise<BackendAvailability> {
  const addon = nativeAddon();
  if (!addon) return { available: false, reason: `native addon ${nativeAddonStatus().reason ?? 'not loaded'}` };
  const probe = await addon.nvencProbe();
  if (!probe.available) return { available: false, reason: probe.reason ?? 'unknown reason' };
  if (!probe.codecs.includes(backend.codec === 'h264' ? 'h264' : 'h265')) {
    return { available: false, reason: `${probe.deviceName ?? 'this GPU'} does not encode ${backend.codec} on NVENC` };
  }
  const { width, height } = PROBE_SETTINGS;
  const encoder = await addon.openNvencEncoder({ codec: backend.codec === 'h264' ? 'h264' : 'h265', width, height, fps: 30, bitrateKbps: 300, input: 'i420' });
  try {
    const black = new Uint8Array(width * height * 1.5);
    black.fill(16, 0, width * height).fill(128, width * height);
    const picture = await encoder.encode(black, true, 0);
    if (!picture.keyframe || picture.data.length === 0) return { available: false, reason: 'the first frame did not come out as a keyframe' };
  } finally {
    encoder.close();
  }
  return { available: true };
}

async function encodeOneFrame(backend: EncoderBackend): Promise<void> {
  const context = await openFfmpegEncoder(backend, PROBE_SETTINGS);
  const frame = new Frame();
  const packet = new Packet();
  try {
    frame.alloc();
    frame.format = AV_PIX_FMT_YUV420P;
    frame.width = PROBE_SETTINGS.width;
    frame.height = PROBE_SETTINGS.height;
    FFmpegError.throwIfError(frame.allocBuffer(), 'allocate probe frame');
    const planes = frame.data;
    if (!planes) throw new Error('probe frame has no buffers');
    planes[0]!.fill(16);
    planes[1]!.fill(128);
    planes[2]!.fill(128);
    frame.pts = 0n;
    packet.alloc();
    FFmpegError.throwIfError(await context.sendFrame(frame), `${backend.name} sendFrame`);
    const received = await context.receivePacket(packet);
    if (received !== AVERROR_EAGAIN && received !== AVERROR_EOF) {
      FFmpegError.throwIfError(received, `${backend.name} receivePacket`);
    }
  } finally {
    packet.free();
    frame.free();
    context.freeContext();
  }
}

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
