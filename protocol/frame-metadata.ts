/**
 * Per-frame metadata on the wire. A model attaches a mapping (sent as JSON) or bytes (sent
 * unchanged, base64-wrapped so they fit the JSON envelope) to an output frame; the runtime sends
 * it as a runtime-scope `frame_metadata` message keyed by the RTP timestamp the client sees on
 * that frame (browsers expose it as `requestVideoFrameCallback` metadata `rtpTimestamp`).
 *
 * The other way, a client annotates the frames of an input video track it publishes with
 * `input_frame_metadata` messages keyed by the RTP timestamp its encoder stamped on each frame,
 * carrying the same encoding plus the frame's capture time.
 */

import type { JsonValue } from './json-schema.ts';

/** Bytes inside JSON: `{"$bytes": "<base64>"}`. */
export interface WireBytes {
  readonly $bytes: string;
}

export type WireFrameMetadata = { readonly [key: string]: JsonValue } | WireBytes;

export interface FrameMetadataData {
  readonly track: string;
  /** The frame's RTP timestamp as the client receives it. */
  readonly rtp_timestamp: number;
  readonly metadata: WireFrameMetadata;
}

/** One input frame's annotation, client → runtime (see `InputFrameMetadataMessage`). */
export interface InputFrameAnnotation {
  /** The frame's RTP timestamp as the client's encoder stamped it. */
  readonly rtp_timestamp: number;
  /**
   * When the client captured the frame, Unix epoch ms on the runtime's clock (the client converts
   * with the clock offset it measured by pinging the runtime).
   */
  readonly capture_time?: number;
  readonly metadata?: WireFrameMetadata;
}

export interface InputFrameMetadataData {
  readonly track: string;
  readonly frames: readonly InputFrameAnnotation[];
}

export function encodeFrameMetadata(metadata: Record<string, unknown> | Uint8Array): WireFrameMetadata {
  if (metadata instanceof Uint8Array) {
    return { $bytes: bytesToBase64(metadata) };
  }
  return metadata as { [key: string]: JsonValue };
}

export function decodeFrameMetadata(wire: WireFrameMetadata): Record<string, JsonValue> | Uint8Array {
  const bytes = (wire as Partial<WireBytes>).$bytes;
  if (typeof bytes === 'string' && Object.keys(wire).length === 1) return base64ToBytes(bytes);
  return wire as Record<string, JsonValue>;
}

/** btoa/atob work in browsers and Node alike; this module must not depend on Buffer. */
function bytesToBase64(bytes: Uint8Array): string {
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

function base64ToBytes(text: string): Uint8Array {
  const binary = atob(text);
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  return out;
}
