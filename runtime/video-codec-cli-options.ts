/**
 * `arclight serve --codecs h265,h264,vp8`: which video codecs the runtime answers an offer with,
 * in order of preference → `RuntimeOptions.videoCodecs`. Without the flag the runtime offers
 * H.265 only when a hardware HEVC encoder exists (server.ts); with it, an operator can serve
 * software x265 to clients that offer H.265 (spec: "H.264 and H.265 streaming above 720p"). The
 * container sets it from ARCLIGHT_CODECS (deploy/runtime/entrypoint.sh).
 */

import type { VideoCodec } from './media/video-encoder.ts';

const KNOWN: readonly VideoCodec[] = ['h265', 'h264', 'vp8'];

/** The codecs in preference order, undefined for the default, or the message to print (exit 2). */
export function videoCodecsFromFlag(value: string | undefined): readonly VideoCodec[] | undefined | { error: string } {
  if (value === undefined) return undefined;
  const names = value.split(',').map((name) => name.trim().toLowerCase());
  const wrong = names.filter((name) => !(KNOWN as readonly string[]).includes(name));
  if (value.trim() === '' || wrong.length > 0) {
    return { error: `--codecs takes a comma-separated list of ${KNOWN.join(', ')} in order of preference; got "${value}"` };
  }
  if (new Set(names).size !== names.length) return { error: `--codecs names a codec twice: "${value}"` };
  return names as VideoCodec[];
}

/**
 * `--video-min-kbps N --video-max-kbps N`: the bounds network adaptation keeps each video
 * stream's encoder within → `RuntimeOptions.video`; undefined without either flag, or the message
 * to print (exit 2). Their range and order are checked by startRuntime (runtime-options.ts).
 */
export function videoBitrateFromFlags(
  min: string | undefined,
  max: string | undefined,
): { minBitrateKbps?: number; maxBitrateKbps?: number } | undefined | { error: string } {
  if (min === undefined && max === undefined) return undefined;
  const bounds: { minBitrateKbps?: number; maxBitrateKbps?: number } = {};
  for (const [flag, value, key] of [
    ['--video-min-kbps', min, 'minBitrateKbps'],
    ['--video-max-kbps', max, 'maxBitrateKbps'],
  ] as const) {
    if (value === undefined) continue;
    if (!/^\d{1,6}$/.test(value) || Number(value) === 0) return { error: `${flag} must be a whole number of kbit/s; got "${value}"` };
    bounds[key] = Number(value);
  }
  return bounds;
}
