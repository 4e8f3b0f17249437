/**
 * Whether a backend can encode on this machine, found by trying: each probe opens the encoder the
 * way a real stream would (ffmpeg-encoder-options.ts, or the addon's NVENC binding as
 * `NvencVideoEncoder` opens it) and encodes one small black frame. Probing rather than trusting
 * the FFmpeg build matters: node-av's build lists h264_nvenc and hevc_nvenc on every machine, GPU
 * or not, and they only fail when opened.
 *
 * Probing briefly replaces FFmpeg's process-wide log callback (to catch why a probe failed) and then
 * restores FFmpeg's default one, which writes to stderr. Whoever installs a custom FFmpeg log callback
 * should run the selection first, e.g. `listEncoderBackends()` for the start-up log.
 */
import { FFmpegError, Frame, Log, Packet } from 'node-av/lib';
import { AV_LOG_WARNING, AV_PIX_FMT_YUV420P, AVERROR_EAGAIN, AVERROR_EOF } from 'node-av/constants';
import { nativeAddon, nativeAddonStatus } from '../native/native-addon.ts';
import { openFfmpegEncoder, quietFfmpegInfoLogs, type EncoderSettings } from './ffmpeg-encoder-options.ts';
import type { EncoderBackend } from './video-encoder.ts';

export type BackendAvailability = { readonly available: true } | { readonly available: false; readonly reason: string };

/** Small, but above NVENC's minimum frame size (145x49 for H.264). */
const PROBE_SETTINGS: EncoderSettings = { width: 320, height: 240, fps: 30, bitrateKbps: 300, h264Profile: 'constrained-baseline' };
/** FFmpeg hands log lines to JavaScript asynchronously; how long to wait for a probe's to arrive. */
const LOG_SETTLE_MS = 25;
const MAX_REASON_LOG_LINES = 4;

/**
 * Probes run one at a time: each swaps FFmpeg's (process-wide) log callback while it runs. Module
 * state on purpose: what it guards is one per process, however many backend registries there are.
 */
let probeQueue: Promise<unknown> = Promise.resolve();

export function probeFfmpegBackend(backend: EncoderBackend): Promise<BackendAvailability> {
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
export async function probeNativeNvenc(backend: EncoderBackend): Promise<BackendAvailability> {
  const addon = nativeAddon();
  if (!addon) return { available: false, reason: `native addon ${nativeAddonStatus().reason ?? 'not loaded'}` };
  const probe = await addon.nvencProbe();
  if (!probe.available) return { available: false, reason: probe.reason ?? 'unknown reason' };
  if (!probe.codecs.includes(backend.codec === 'h264' ? 'h264' : 'h265')) {
    return { available: false, reason: `${probe.deviceName ?? 'this GPU'} does not encode ${backend.codec} on NVENC` };
  }
  const { width, height } = PROBE_SETTINGS;
  const encoder = await addon.openNvencEncoder({
    codec: backend.codec === 'h264' ? 'h264' : 'h265',
    width,
    height,
    fps: 30,
    bitrateKbps: 300,
    input: 'i420',
  });
  try {
    const black = new Uint8Array(width * height * 1.5);
    black.fill(16, 0, width * height).fill(128, width * height);
    const picture = await encoder.encode(black, true, 0);
    if (!picture.keyframe || picture.data.length === 0)
      return { available: false, reason: 'the first frame did not come out as a keyframe' };
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
