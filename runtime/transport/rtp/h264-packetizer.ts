/**
 * H.264 RTP packetization, RFC 6184 packetization-mode 1 (non-interleaved): single NAL unit packets,
 * STAP-A aggregation and FU-A fragmentation.
 */

import { packetizeNalUnits, type NalPacketization } from './nal-aggregation.ts';

/** NAL unit types this module cares about (H.264 Table 7-1 and RFC 6184 §5.2 Table 3). */
const NAL_SPS = 7;
const NAL_PPS = 8;
const NAL_AUD = 9;
const NAL_SPS_EXT = 13;
const NAL_SUBSET_SPS = 15;
const NAL_STAP_A = 24;
const NAL_FU_A = 28;

/** STAP-A: one byte of STAP-A NAL header, then per NAL a 16-bit size and the NAL (RFC 6184 §5.7.1). */
const STAP_A_HEADER_BYTES = 1;
const STAP_A_SIZE_BYTES = 2;
/** FU-A: FU indicator then FU header (RFC 6184 §5.8). */
const FU_A_HEADER_BYTES = 2;
const FU_START = 0x80;
const FU_END = 0x40;

/** F bit and NRI of a NAL header, which FU indicators and STAP-A headers carry over (RFC 6184 §5.3). */
const NAL_F_NRI_MASK = 0xe0;
const NAL_TYPE_MASK = 0x1f;

/** `nal_unit_type` from a NAL unit's first byte, or -1 for an empty buffer. */
export function h264NalType(nal: Buffer): number {
  const header = nal[0];
  return header === undefined ? -1 : header & NAL_TYPE_MASK;
}

/**
 * Split an Annex-B byte stream (H.264 Annex B) into NAL units, start codes removed.
 *
 * Accepts 3- and 4-byte start codes and any run of zero bytes between NAL units: a NAL unit never
 * ends in 0x00 (its RBSP ends with the stop bit, and cabac_zero_words end in 0x03), so trailing zeros
 * belong to the next start code or are trailing_zero_8bits. Bytes before the first start code are not
 * a NAL unit and are skipped; empty NAL units (adjacent start codes) are dropped. The returned
 * buffers are views into `buf`, not copies.
 */
export function splitAnnexB(buf: Buffer): Buffer[] {
  const nals: Buffer[] = [];
  // Emulation prevention (H.264 §7.4.1) guarantees 00 00 01 appears only in start codes, so
  // Buffer#indexOf (native) can find NAL boundaries without parsing.
  let start = findStartCode(buf, 0);
  while (start !== -1) {
    const nalStart = start + 3;
    const next = findStartCode(buf, nalStart);
    let nalEnd = next === -1 ? buf.length : next;
    while (nalEnd > nalStart && buf[nalEnd - 1] === 0) nalEnd--;
    if (nalEnd > nalStart) nals.push(buf.subarray(nalStart, nalEnd));
    start = next;
  }
  return nals;
}

const START_CODE_3 = Buffer.from([0, 0, 1]);

function findStartCode(buf: Buffer, from: number): number {
  return buf.indexOf(START_CODE_3, from);
}

function isParameterSet(type: number): boolean {
  return type === NAL_SPS || type === NAL_PPS || type === NAL_SPS_EXT || type === NAL_SUBSET_SPS;
}

/**
 * Turns Annex-B access units into RTP payloads (RFC 6184, packetization-mode=1).
 *
 * Consecutive NAL units are aggregated into STAP-A packets while they fit (so an access unit's
 * SPS and PPS travel together and small SEI/slices ride along), a NAL unit that fits alone goes as a
 * single NAL unit packet, and one larger than `maxPayloadBytes` is split into FU-A fragments of about
 * equal size. Access unit delimiters (type 9) are dropped: RTP timestamps delimit access units.
 *
 * The caller builds the RTP packets and MUST set the marker bit on the last payload of each access
 * unit and on no other (RFC 6184 §5.1); all payloads of one access unit share its RTP timestamp.
 *
 * Single NAL unit payloads are views into the input buffer (no copy), so the caller must not modify
 * the access unit until the payloads have been sent.
 */
export class H264Packetizer {
  readonly #maxPayloadBytes: number;

  constructor(maxPayloadBytes = 1200) {
    // FU-A needs its two header bytes plus at least one byte of NAL per fragment.
    if (!Number.isInteger(maxPayloadBytes) || maxPayloadBytes < FU_A_HEADER_BYTES + 1) {
      throw new RangeError(`maxPayloadBytes must be an integer >= 3, got ${maxPayloadBytes}`);
    }
    this.#maxPayloadBytes = maxPayloadBytes;
  }

  get maxPayloadBytes(): number {
    return this.#maxPayloadBytes;
  }

  /** RTP payloads for one Annex-B access unit, in sending order; empty if it holds no NAL units to send. */
  packetize(accessUnit: Buffer): Buffer[] {
    const nals = splitAnnexB(accessUnit);
    // Drops access unit delimiters in place (the array is ours): no second array per frame.
    let kept = 0;
    for (const nal of nals) if (h264NalType(nal) !== NAL_AUD) nals[kept++] = nal;
    nals.length = kept;
    return packetizeNalUnits(nals, this.#maxPayloadBytes, H264_PACKETIZATION);
  }
}

/** RFC 6184's aggregation and fragmentation, for packetizeNalUnits (one object, not one per frame). */
const H264_PACKETIZATION: NalPacketization = {
  aggregationHeaderBytes: STAP_A_HEADER_BYTES,
  isParameterSet: (nal) => isParameterSet(h264NalType(nal)),
  fragment: fragmentFuA,
  aggregate: buildStapA,
};

function buildStapA(nals: readonly Buffer[], totalBytes: number): Buffer {
  const out = Buffer.allocUnsafe(totalBytes);
  // STAP-A header (RFC 6184 §5.7.1): F is the OR of the aggregated F bits, NRI their maximum.
  let f = 0;
  let nri = 0;
  for (const nal of nals) {
    const header = nal[0]!;
    f |= header & 0x80;
    nri = Math.max(nri, header & 0x60);
  }
  out[0] = f | nri | NAL_STAP_A;
  let offset = STAP_A_HEADER_BYTES;
  for (const nal of nals) {
    out.writeUInt16BE(nal.length, offset);
    offset += STAP_A_SIZE_BYTES;
    offset += nal.copy(out, offset);
  }
  return out;
}

/**
 * Split one NAL unit into FU-A payloads (RFC 6184 §5.8), appending them to `out`.
 *
 * The NAL header byte is not sent as such: its F/NRI go into each FU indicator and its type into each
 * FU header. Fragments are sized about equally rather than max-size-then-remainder, which avoids a
 * tiny last packet; all fragments share one allocation.
 */
function fragmentFuA(nal: Buffer, max: number, out: Buffer[]): void {
  const header = nal[0]!;
  const indicator = (header & NAL_F_NRI_MASK) | NAL_FU_A;
  const type = header & NAL_TYPE_MASK;
  const body = nal.subarray(1);
  const perFragment = max - FU_A_HEADER_BYTES;
  // body.length >= max here, so there are always at least two fragments: S and E are never both set,
  // which RFC 6184 §5.8 forbids.
  const count = Math.ceil(body.length / perFragment);
  const base = Math.floor(body.length / count);
  const larger = body.length % count; // the first `larger` fragments carry one byte more
  const block = Buffer.allocUnsafe(body.length + count * FU_A_HEADER_BYTES);
  let src = 0;
  let dst = 0;
  for (let k = 0; k < count; k++) {
    const size = base + (k < larger ? 1 : 0);
    let fuHeader = type;
    if (k === 0) fuHeader |= FU_START;
    if (k === count - 1) fuHeader |= FU_END;
    const packetStart = dst;
    block[dst++] = indicator;
    block[dst++] = fuHeader;
    dst += body.copy(block, dst, src, src + size);
    src += size;
    out.push(block.subarray(packetStart, dst));
  }
}
