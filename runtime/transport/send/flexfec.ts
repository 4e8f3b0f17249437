/**
 * FlexFEC repair packets in the format libwebrtc reads for the payload name `flexfec-03` (its
 * `Flexfec03HeaderReader`: draft-ietf-payload-flexible-fec-scheme-03, one protected SSRC, K-bit
 * masks), which Chromium's receiver has taken by default since M92 wherever the answer pairs the
 * media SSRC with a FEC SSRC (`a=ssrc-group:FEC-FR`). Read for its rules, not its code.
 *
 * A repair packet is the XOR of the media packets it protects: one missing packet among them is
 * rebuilt from the others at the receiver, without the round trip a NACK costs. For H.264 this
 * is the only FEC libwebrtc receivers can use alongside NACK: ULPFEC shares the media stream's
 * sequence numbers, and a codec without a picture id cannot tell a frame complete while a FEC
 * packet's number is missing (libwebrtc turns ULPFEC off for H.264 with NACK).
 *
 * What is XORed, per protected packet (in the clear, before SRTP): byte 0's P, X and CC bits;
 * byte 1 (marker, payload type); the timestamp; the packet's length − 12; and every byte after
 * the fixed 12-byte header (CSRCs, the extension block, the payload), shorter packets padded
 * with zeros. The receiver zeroes the extensions a sender rewrites at send time (the
 * transport-wide sequence number, abs-send-time, toffset) in its copy before it XORs, so those
 * bytes count as zeros here too.
 *
 * Pure: no sockets, no SRTP, no clock.
 */

/** The FlexFEC header for one protected SSRC with a 15-bit mask (k0 set). */
const HEADER_BYTES_15 = 20;
/** …with a 46-bit mask (k1 set). */
const HEADER_BYTES_46 = 24;
/** …with a 109-bit mask (k2 set). */
const HEADER_BYTES_109 = 32;
/** The most media packets one repair packet may cover: the span of its largest mask. */
export const FLEXFEC_MAX_SPAN = 109;

/** One media packet as a repair packet covers it: the RTP packet in the clear. */
export interface FecProtected {
  /** The packet's sequence number. */
  readonly sequenceNumber: number;
  /** The fixed header and the extension block (the 12 fixed bytes first). */
  readonly header: Buffer;
  /** The payload after `header`. */
  readonly payload: Buffer;
  /** Offset in `header` of bytes the receiver zeroes (the transport-wide sequence number's value), and how many. */
  readonly zeroAt?: number;
  readonly zeroLength?: number;
}

/** The FlexFEC header's size for repair packets covering sequence numbers over `span` (first to last + 1). */
export function flexfecHeaderBytes(span: number): number {
  if (span <= 15) return HEADER_BYTES_15;
  if (span <= 46) return HEADER_BYTES_46;
  if (span <= FLEXFEC_MAX_SPAN) return HEADER_BYTES_109;
  throw new RangeError(`a FlexFEC packet covers at most ${FLEXFEC_MAX_SPAN} sequence numbers, not ${span}`);
}

/** Sequence-number distance from `base` to `sequenceNumber` (mod 2^16). */
const offsetFrom = (base: number, sequenceNumber: number): number => (sequenceNumber - base) & 0xffff;

/**
 * The payload of the repair packet for `packets` of the media stream `mediaSsrc` (in sequence
 * order, the first one the base; all within FLEXFEC_MAX_SPAN of it): the FlexFEC header, then the
 * XOR of what follows each packet's 12-byte fixed header.
 */
export function flexfecPayload(mediaSsrc: number, packets: readonly FecProtected[]): Buffer {
  if (packets.length === 0) throw new RangeError('a FlexFEC packet protects at least one packet');
  const base = packets[0]!.sequenceNumber;
  let span = 0;
  let longest = 0;
  for (const packet of packets) {
    span = Math.max(span, offsetFrom(base, packet.sequenceNumber) + 1);
    longest = Math.max(longest, packet.header.length + packet.payload.length - 12);
  }
  const headerBytes = flexfecHeaderBytes(span);
  const out = Buffer.alloc(headerBytes + longest);
  let byte0 = 0;
  let byte1 = 0;
  let lengthRecovery = 0;
  let timestampRecovery = 0;
  const mask = new Uint8Array(FLEXFEC_MAX_SPAN);
  for (const packet of packets) {
    const { header, payload } = packet;
    byte0 ^= header[0]!;
    byte1 ^= header[1]!;
    timestampRecovery = (timestampRecovery ^ header.readUInt32BE(4)) >>> 0;
    lengthRecovery ^= (header.length + payload.length - 12) & 0xffff;
    mask[offsetFrom(base, packet.sequenceNumber)] = 1;
    // The protected bytes: the header after its fixed 12 (the receiver's zeroed bytes as zeros), then the payload.
    const zeroFrom = packet.zeroAt ?? -1;
    const zeroTo = zeroFrom + (packet.zeroLength ?? 0);
    let at = headerBytes;
    for (let i = 12; i < header.length; i++, at++) if (i < zeroFrom || i >= zeroTo) out[at]! ^= header[i]!;
    for (let i = 0; i < payload.length; i++, at++) out[at]! ^= payload[i]!;
  }
  // R = 0, F = 0 (the mask form), then the XOR of P, X and CC; the version is not carried.
  out[0] = byte0 & 0x3f;
  out[1] = byte1;
  out.writeUInt16BE(lengthRecovery, 2);
  out.writeUInt32BE(timestampRecovery, 4);
  out[8] = 1; // SSRCCount; bytes 9–11 reserved
  out.writeUInt32BE(mediaSsrc >>> 0, 12);
  out.writeUInt16BE(base, 16);
  writeMask(out, mask, headerBytes);
  return out;
}

/**
 * The packet mask after SN base: bit i (MSB first after each k-bit) protects base + i. Draft-03's
 * k-bit is 1 on the last part of the mask: bits 0–14 after k0 (bytes 18–19), 15–45 after k1
 * (bytes 20–23), 46–108 after k2 (bytes 24–31).
 */
function writeMask(out: Buffer, mask: Uint8Array, headerBytes: number): void {
  const parts: Array<{ at: number; bytes: number; first: number; bits: number }> = [
    { at: 18, bytes: 2, first: 0, bits: 15 },
    { at: 20, bytes: 4, first: 15, bits: 31 },
    { at: 24, bytes: 8, first: 46, bits: 63 },
  ];
  for (const part of parts) {
    if (part.at >= headerBytes) break;
    const last = part.at + part.bytes === headerBytes;
    let value = last ? 1n : 0n;
    for (let i = 0; i < part.bits; i++) value = (value << 1n) | (mask[part.first + i] ? 1n : 0n);
    for (let b = part.bytes - 1; b >= 0; b--) {
      out[part.at + b] = Number(value & 0xffn);
      value >>= 8n;
    }
  }
}
