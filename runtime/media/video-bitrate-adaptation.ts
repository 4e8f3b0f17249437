/**
 * Network adaptation of a stream's bitrate: it follows the slowest receiver — the lowest REMB
 * among the stream's viewers, with 10% headroom — within [500 kbps, 10 Mbps] and never above the
 * rate the track asks for (adaptation only ever lowers it). Once a second at most, and changes
 * under 5% are ignored, so the encoder is not reconfigured every second. An encoder that cannot
 * change its rate while running (`adjustsBitrateLive === false`: FFmpeg's libvpx wrapper, so VP8)
 * keeps its start-up rate; H.264 (libx264, NVENC) and H.265 adapt.
 */
import type { StreamVideoEncoder } from './video-encoder.ts';
import type { VideoSink } from './video-sinks.ts';

/** Network adaptation bounds (issue default: 500 kbps – 10 Mbps) and cadence. */
export const ADAPTATION = { minKbps: 500, maxKbps: 10_000, intervalMs: 1_000, headroom: 0.9 } as const;

/** A stream's encoder and the adaptation state that rides with it. */
export interface AdaptedStream {
  readonly encoder: StreamVideoEncoder;
  /** The rate the track asks for; adaptation only ever lowers it (to what receivers can take). */
  readonly configuredKbps: number;
  /** When the stream's rate was last considered (performance.now()). */
  adaptedAt: number;
}

/**
 * Sets the stream's encoder to what its viewers can take, if it is time to look and the change
 * is worth making; returns the new target (kbps), or undefined if the rate stays.
 */
export function adaptStreamBitrate(stream: AdaptedStream, sinks: readonly { readonly sink: VideoSink }[], now: number): number | undefined {
  if (stream.encoder.adjustsBitrateLive === false || now - stream.adaptedAt < ADAPTATION.intervalMs) return undefined;
  stream.adaptedAt = now;
  let estimate = Infinity;
  for (const { sink } of sinks) {
    const kbps = sink.estimatedBitrateKbps?.();
    if (kbps !== undefined && kbps > 0) estimate = Math.min(estimate, kbps * ADAPTATION.headroom);
  }
  const ceiling = Math.min(stream.configuredKbps, ADAPTATION.maxKbps);
  const target = Math.max(ADAPTATION.minKbps, Math.min(ceiling, estimate));
  // Hysteresis: ignore changes under 5% so the encoder is not reconfigured every second.
  if (Math.abs(target - stream.encoder.bitrateKbps) / stream.encoder.bitrateKbps < 0.05) return undefined;
  stream.encoder.setBitrate(target);
  return target;
}
