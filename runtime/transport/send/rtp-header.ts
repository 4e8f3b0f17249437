/**
 * The RTP header pieces the send path writes and reads (RFC 3550, RFC 8285 one-byte extensions):
 * the playout-delay payload per latency mode, the NTP time of sender reports, the extension block
 * a stream's packets carry (mid, playout-delay, the transport-wide sequence number's slot), and
 * reading a packet's header length and an extension element back (to resend it on RTX).
 * Pure functions of bytes, kept apart from the sender's per-stream state.
 */
import type { LatencyMode } from '../../../protocol/messages.ts';
import { RTP_HEADER_LENGTH } from '../rtp/packet-size.ts';

/**
 * playout-delay payload (http://www.webrtc.org/experiments/rtp-hdrext/playout-delay): 12-bit
 * min and max delay in 10 ms units. realtime: 0/0, render at once. smooth: 0/200 ms, the
 * receiver's jitter buffer adapts within that bound — and on a lossy long path a minimum that
 * covers a repair (`smoothPlayoutDelay`).
 */
export const PLAYOUT_DELAY_PAYLOAD: Record<LatencyMode, Buffer> = {
  realtime: Buffer.from([0, 0, 0]),
  smooth: playoutDelayPayload(0, 200),
};

/**
 * The lowest of the RTTs noted over the last `windowMs` (15 s; 1 s buckets): the path's own RTT,
 * without the queue a congested bottleneck adds (which the congestion controller drains; waiting
 * for it in the receiver's buffer would only add latency).
 */
export class BaseRtt {
  readonly #windowMs: number;
  readonly #buckets: Array<{ at: number; minMs: number }> = [];

  constructor(windowMs = 15_000) {
    this.#windowMs = windowMs;
  }

  /** Notes an RTT at `nowMs` (undefined: none known yet); returns the base RTT, ms, or undefined. */
  note(nowMs: number, rttMs: number | undefined): number | undefined {
    const buckets = this.#buckets;
    while (buckets.length > 0 && buckets[0]!.at <= nowMs - this.#windowMs) buckets.shift();
    if (rttMs !== undefined && rttMs > 0) {
      const at = Math.floor(nowMs / 1000) * 1000;
      const last = buckets.at(-1);
      if (last?.at === at) last.minMs = Math.min(last.minMs, rttMs);
      else buckets.push({ at, minMs: rttMs });
    }
    let base: number | undefined;
    for (const bucket of buckets) base = base === undefined ? bucket.minMs : Math.min(base, bucket.minMs);
    return base;
  }
}

/**
 * The smooth mode's playout delay for a stream whose receiver reports loss, on a path whose base
 * RTT (`BaseRtt`: without a bottleneck's queue) is `rttMs`:
 * a lost packet is repaired one RTT (and a little) after it was due, and a receiver whose jitter
 * buffer is shorter than that renders the frame late — a freeze for every loss. libwebrtc's
 * receiver does not add the RTT to its buffer by itself (its target stayed ~12 ms at 200 ms RTT,
 * docs/performance.md), so the sender asks for a minimum of 1.25 × RTT + 20 ms (at most 400),
 * once the RTT is past 100 ms: below that a repair lands within 150 ms, not counted a freeze, and
 * the latency is worth more. Undefined: the plain smooth bounds.
 */
export function smoothPlayoutDelay(rttMs: number | undefined): { readonly minMs: number; readonly maxMs: number } | undefined {
  if (rttMs === undefined || !(rttMs > SMOOTH_REPAIR_RTT_MS)) return undefined;
  const minMs = Math.min(SMOOTH_MAX_MIN_DELAY_MS, Math.round((1.25 * rttMs + 20) / 10) * 10);
  return { minMs, maxMs: Math.max(200, minMs + 100) };
}

/** Past this RTT (ms), a lossy path's smooth stream asks for a minimum playout delay. */
export const SMOOTH_REPAIR_RTT_MS = 100;
const SMOOTH_MAX_MIN_DELAY_MS = 400;

export function playoutDelayPayload(minMs: number, maxMs: number): Buffer {
  const min = Math.round(minMs / 10) & 0xfff;
  const max = Math.round(maxMs / 10) & 0xfff;
  return Buffer.from([min >> 4, ((min & 0xf) << 4) | (max >> 8), max & 0xff]);
}

/** Seconds from the NTP epoch (1900) to the Unix epoch (1970). */
const NTP_UNIX_OFFSET_S = 2_208_988_800;

/**
 * 64-bit NTP time (RFC 3550 §4: seconds since 1900 . 32-bit binary fraction) of a moment given
 * in ms of `performance.now()`.
 */
export function ntpTimestamp(performanceMs: number): bigint {
  const unixMs = performance.timeOrigin + performanceMs;
  const seconds = Math.floor(unixMs / 1000);
  const fraction = Math.floor(((unixMs - seconds * 1000) / 1000) * 2 ** 32);
  return (BigInt(seconds + NTP_UNIX_OFFSET_S) << 32n) | BigInt(fraction >>> 0);
}

/** An RTP packet's header length: fixed header, CSRCs, then the extension block if any (RFC 3550 §5.3.1). */
export function rtpHeaderLength(packet: Buffer): number {
  let length = RTP_HEADER_LENGTH + (packet[0]! & 0x0f) * 4;
  if (packet[0]! & 0x10) length += 4 + packet.readUInt16BE(length + 2) * 4;
  return length;
}

/** Offset of the data of the one-byte-form (RFC 8285) extension element `id` in a packet's header, if it has one. */
export function extensionElementAt(packet: Buffer, headerLength: number, id: number): number | undefined {
  let at = RTP_HEADER_LENGTH + (packet[0]! & 0x0f) * 4;
  if (!(packet[0]! & 0x10) || packet.readUInt16BE(at) !== ONE_BYTE_EXTENSIONS) return undefined;
  at += 4;
  while (at < headerLength) {
    const byte = packet[at]!;
    if (byte === 0) {
      at++; // padding
      continue;
    }
    if (byte >> 4 === 15) return undefined; // reserved: stop (RFC 8285 §4.2)
    if (byte >> 4 === id) return at + 1;
    at += 2 + (byte & 0x0f);
  }
  return undefined;
}

/** RFC 8285 one-byte header-extension block marker. */
const ONE_BYTE_EXTENSIONS = 0xbede;
export const SDES_MID_URI = 'urn:ietf:params:rtp-hdrext:sdes:mid';

/** A packet's header-extension block, and where in it the transport-wide sequence number goes. */
export interface ExtensionBlock {
  readonly bytes: Buffer;
  /** Offset of the 16-bit transport-wide sequence number within `bytes`, if it carries one. */
  readonly sequenceAt: number | undefined;
}

/**
 * A one-byte-form block (RFC 8285) of the given elements, then the transport-wide sequence
 * number's element (2 bytes, zero here: written per packet) when its id is given; undefined for none.
 * mid (≤ 16) + playout-delay (3) + sequence (2), each with its element byte: 4 + 24 bytes at most
 * (rtp/packet-size.ts's MAX_EXTENSION_BLOCK_BYTES).
 */
export function buildExtensionBlock(
  elements: ReadonlyArray<readonly [number, Buffer]>,
  transportWideId: number | undefined,
): ExtensionBlock | undefined {
  const all = transportWideId === undefined ? elements : [...elements, [transportWideId, Buffer.alloc(2)] as const];
  if (all.length === 0) return undefined;
  let length = 0;
  for (const [, data] of all) length += 1 + data.length;
  const words = Math.ceil(length / 4);
  const block = Buffer.alloc(4 + words * 4); // zero padding
  block.writeUInt16BE(ONE_BYTE_EXTENSIONS, 0);
  block.writeUInt16BE(words, 2);
  let at = 4;
  let sequenceAt: number | undefined;
  for (const [id, data] of all) {
    block[at++] = (id << 4) | (data.length - 1);
    if (transportWideId !== undefined && id === transportWideId) sequenceAt = at;
    data.copy(block, at);
    at += data.length;
  }
  return { bytes: block, sequenceAt };
}
