/**
 * TEST-ONLY fault injection for the FFmpeg video encoders: makes the next encodes fail as if the
 * encoder had broken mid-stream, so tests can drive the runtime's restart and fallback paths
 * (output-video-track.ts) without a real broken encoder. Production code never arms it; while it
 * is unarmed the check the encoders make is one counter comparison.
 *
 * In-process on purpose: a test that starts the runtime with `startRuntime` arms it directly,
 * with no runtime option or environment variable a deployment could set by mistake. The fake
 * NVENC driver has its own knob (ARCLIGHT_FAKE_NVENC_FAIL_AFTER_FRAMES, test/support/fake-nvenc-driver.ts).
 */
import type { VideoCodec } from '../media/video-encoder.ts';

/** The error an injected fault throws, so a test can tell it from a real failure. */
export class InjectedEncodeFault extends Error {
  override readonly name = 'InjectedEncodeFault';
}

interface ArmedFaults {
  remaining: number;
  readonly codec: VideoCodec | undefined;
}

let armed: ArmedFaults | undefined;

/**
 * TEST ONLY. The next `count` FFmpeg video encodes (of `codec`, or of any codec) throw an
 * `InjectedEncodeFault`; `Infinity` makes every one fail until `clearVideoEncodeFaults()`.
 * Replaces whatever was armed before. Any FfmpegVideoEncoder counts, a track's black-frame
 * encoder for a joining viewer included: arm it once the viewers a test needs are streaming.
 */
export function failNextVideoEncodes(count: number, options: { codec?: VideoCodec } = {}): void {
  if (!(count >= 0)) throw new RangeError(`invalid fault count ${count}`);
  armed = count === 0 ? undefined : { remaining: count, codec: options.codec };
}

/** TEST ONLY. Disarms `failNextVideoEncodes`. */
export function clearVideoEncodeFaults(): void {
  armed = undefined;
}

/** TEST ONLY. How many armed faults have not fired yet (0 when disarmed). */
export function pendingVideoEncodeFaults(): number {
  return armed?.remaining ?? 0;
}

/** Called by an encoder before each encode: throws when a fault is armed for its codec. */
export function throwIfVideoEncodeFault(codec: VideoCodec): void {
  if (!armed || (armed.codec !== undefined && armed.codec !== codec)) return;
  armed.remaining--;
  if (armed.remaining <= 0) armed = undefined;
  throw new InjectedEncodeFault(`injected ${codec} encode failure (test fault)`);
}
