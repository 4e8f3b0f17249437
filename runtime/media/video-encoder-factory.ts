/**
 * Opens a video encoder: validates the settings, takes the backend the registry selected for the
 * codec (unless one is given) and opens the implementation that backend names — Arclight's NVENC
 * binding (nvenc-video-encoder.ts) or an FFmpeg encoder (ffmpeg-video-encoder.ts). The only file
 * that knows the concrete encoder classes; everything else holds a `VideoEncoder`, or a
 * `StreamVideoEncoder` when it asks what the encoder can do.
 *
 * `VideoEncoder` is both an interface and this factory's `create`, one public name
 * (`VideoEncoder.create(...)` gives a `VideoEncoder`). TypeScript merges a value with an interface
 * only when both are declared in one module, so the interface is declared again here, extending
 * the one in video-encoder.ts and adding nothing.
 */
import { processEncoderBackends, type EncoderBackendRegistry } from './encoder-backends.ts';
import { quietFfmpegInfoLogs } from './ffmpeg-encoder-options.ts';
import { FfmpegVideoEncoder } from './ffmpeg-video-encoder.ts';
import { NvencVideoEncoder } from './nvenc-video-encoder.ts';
import {
  SYNC_ENCODE_MAX_MS,
  type CheckedEncoderOptions,
  type StreamVideoEncoder,
  type VideoEncoder as VideoEncoderInterface,
  type VideoEncoderOptions,
} from './video-encoder.ts';

const REFERENCE_PIXELS = 1280 * 720;
const REFERENCE_BITRATE_KBPS = 2500;

/** The public name's type half: video-encoder.ts's interface, unchanged (see the file comment). */
export interface VideoEncoder extends VideoEncoderInterface {}

export const VideoEncoder = {
  /** Validates `options`, picks the backend (unless given) and opens it. */
  async create(options: VideoEncoderOptions): Promise<VideoEncoder> {
    return openStreamEncoder(options);
  },
};

/**
 * `VideoEncoder.create` for the runtime's own streams: the encoder with what it can do beyond the
 * interface (GPU frames, live bitrate changes). Without `options.backend`, `backends` selects one.
 */
export async function openStreamEncoder(
  options: VideoEncoderOptions,
  backends: EncoderBackendRegistry = processEncoderBackends,
): Promise<StreamVideoEncoder> {
  const { codec, width, height, fps } = options;
  if (codec !== 'h264' && codec !== 'h265' && codec !== 'vp8') {
    throw new RangeError(`unsupported video codec ${String(codec)}`);
  }
  if (!Number.isInteger(width) || !Number.isInteger(height) || width <= 0 || height <= 0) {
    throw new RangeError(`invalid encoder size ${width}x${height}`);
  }
  if (codec !== 'vp8' && (width % 2 !== 0 || height % 2 !== 0)) {
    throw new RangeError(`${codec} (4:2:0) needs an even width and height, got ${width}x${height}`);
  }
  if (!(fps > 0 && fps <= 240)) throw new RangeError(`invalid fps ${fps}`);
  const bitrateKbps = options.bitrateKbps ?? defaultBitrateKbps(width, height);
  if (!(bitrateKbps > 0)) throw new RangeError(`invalid bitrate ${bitrateKbps} kbps`);
  if (options.profile !== undefined && codec !== 'h264') {
    throw new RangeError(`profile is an H.264 option, not one for ${codec}`);
  }
  const h264Profile = options.profile ?? 'constrained-baseline';
  if (h264Profile !== 'constrained-baseline' && h264Profile !== 'high') {
    throw new RangeError(`unsupported H.264 profile ${String(h264Profile)}`);
  }

  quietFfmpegInfoLogs();
  const backend = options.backend ?? (await backends.select(codec));
  if (backend.codec !== codec) throw new RangeError(`the ${backend.name} backend encodes ${backend.codec}, not ${codec}`);
  const checked: CheckedEncoderOptions = {
    codec,
    width,
    height,
    fps,
    bitrateKbps,
    backend,
    h264Profile,
    syncBelowMs: options.syncBelowMs ?? SYNC_ENCODE_MAX_MS,
  };
  if (backend.implementation === 'native-nvenc') return NvencVideoEncoder.open(checked);
  return FfmpegVideoEncoder.open(checked);
}

/** A track's rate when it configures none: scaled from a reference by its pixels, within 150–20,000 kbit/s. */
export function defaultBitrateKbps(width: number, height: number): number {
  const scaled = (REFERENCE_BITRATE_KBPS * width * height) / REFERENCE_PIXELS;
  return Math.round(Math.min(20_000, Math.max(150, scaled)));
}

/**
 * How the runtime's streams and black keyframes open their encoders: `openStreamEncoder` behind a
 * property, so that a benchmark can wrap it in its process (bench/glass-latency.ts times every
 * encode, as it wraps `VideoEncoder.create` for encoders opened by the public API).
 */
export const streamEncoders = { open: openStreamEncoder };
