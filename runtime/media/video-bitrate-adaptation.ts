/**
 * Network adaptation of a stream's bitrate: it follows the slowest receiver — the lowest estimate
 * among the stream's viewers, with 10% headroom — within [500 kbps, 10 Mbps] (or the stream's
 * own bounds) and never above the rate the track asks for (adaptation only ever lowers it below
 * that, and gives it back as the estimate recovers).
 *
 * A viewer's estimate is the runtime's own congestion controller's target when its peer sends
 * transport-wide feedback (transport-cc: runtime/transport/send/congestion-controller.ts), else
 * the receiver's REMB (see `MediaTransceiver.estimatedBitrateKbps`).
 *
 * A decrease applies at once (at most every 200 ms: the encoder is reconfigured, not rebuilt), so
 * a capacity drop is followed within a feedback interval or two; an increase at most once a
 * second. Changes under 5% are ignored, so the encoder is not reconfigured for noise. libx264
 * and NVENC take a change in place; libvpx and libx265 by reopening, a keyframe each, which
 * ffmpeg-video-encoder.ts spaces at least a second apart. An encoder that cannot change its rate
 * while running (`adjustsBitrateLive === false`) keeps its start-up rate.
 *
 * Below the floor the encoder cannot follow: the track's send budget (send-budget.ts, filled at
 * the same estimate) then holds frames back before the encoder.
 */
import type { StreamVideoEncoder } from './video-encoder.ts';
import type { VideoSink } from './video-sinks.ts';

/** Network adaptation bounds (issue default: 500 kbps – 10 Mbps) and cadence. */
export const ADAPTATION = {
  minKbps: 500,
  maxKbps: 10_000,
  /** Increases at most this often, ms. */
  intervalMs: 1_000,
  /** Decreases at most this often, ms. */
  decreaseIntervalMs: 200,
  headroom: 0.9,
} as const;

/** Operator bounds of the adapted rate, kbit/s (RuntimeOptions `video`). */
export interface BitrateBounds {
  readonly minKbps: number;
  readonly maxKbps: number;
}

/** A stream's encoder and the adaptation state that rides with it. */
export interface AdaptedStream {
  readonly encoder: StreamVideoEncoder;
  /** The rate the track asks for; adaptation lowers it (to what receivers can take), never raises it above. */
  readonly configuredKbps: number;
  /** Bounds of the adapted rate; default ADAPTATION's. */
  readonly bounds?: BitrateBounds;
  /** When the stream's rate was last raised or considered for a raise (performance.now()). */
  adaptedAt: number;
  /** When the stream's rate was last lowered (performance.now()). */
  decreasedAt?: number;
}

/**
 * The lowest bandwidth estimate among a stream's viewers, kbps; undefined when none reported one.
 * What the encoder targets (with headroom, below) and what the send budget fills at (send-budget.ts).
 */
export function lowestEstimateKbps(sinks: readonly { readonly sink: VideoSink }[]): number | undefined {
  let lowest: number | undefined;
  for (const { sink } of sinks) {
    const kbps = sink.estimatedBitrateKbps?.();
    if (kbps !== undefined && kbps > 0 && (lowest === undefined || kbps < lowest)) lowest = kbps;
  }
  return lowest;
}

/**
 * Sets the stream's encoder to what its viewers can take, if the change is worth making and it
 * is time for it (decreases every 200 ms at most, increases every second); returns the new
 * target (kbps), or undefined if the rate stays.
 */
export function adaptStreamBitrate(stream: AdaptedStream, sinks: readonly { readonly sink: VideoSink }[], now: number): number | undefined {
  if (stream.encoder.adjustsBitrateLive === false) return undefined;
  const decreaseDue = now - (stream.decreasedAt ?? -Infinity) >= ADAPTATION.decreaseIntervalMs;
  const increaseDue = now - Math.max(stream.adaptedAt, stream.decreasedAt ?? -Infinity) >= ADAPTATION.intervalMs;
  if (!decreaseDue && !increaseDue) return undefined;
  const bounds = stream.bounds ?? ADAPTATION;
  const lowest = lowestEstimateKbps(sinks);
  const estimate = lowest === undefined ? Infinity : lowest * ADAPTATION.headroom;
  const ceiling = Math.min(stream.configuredKbps, bounds.maxKbps);
  const floor = Math.min(bounds.minKbps, ceiling);
  const target = Math.max(floor, Math.min(ceiling, estimate));
  const current = stream.encoder.bitrateKbps;
  // Hysteresis: ignore changes under 5% so the encoder is not reconfigured for noise.
  if (Math.abs(target - current) / current < 0.05) {
    if (increaseDue) stream.adaptedAt = now;
    return undefined;
  }
  if (target < current) {
    if (!decreaseDue) return undefined;
    stream.decreasedAt = now;
  } else {
    if (!increaseDue) return undefined;
    stream.adaptedAt = now;
  }
  stream.encoder.setBitrate(target);
  return target;
}
