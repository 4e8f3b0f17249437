/**
 * H.265/HEVC RTP packetization, RFC 7798: single NAL unit packets, Aggregation Packets (AP) and
 * Fragmentation Units (FU), without DONL fields (sprop-max-don-diff = 0, the only mode WebRTC uses).
 */

import { packetizeNalUnits, type NalPacketization } from './nal-aggregation.ts';
import { splitAnnexB } from './h264-packetizer.ts';

/** NAL unit types this module cares about (H.265 Table 7-1 and RFC 7798 §4.4). */
const NAL_VPS = 32;
const NAL_SPS = 33;
const NAL_PPS = 34;
const NAL_AUD = 35;
const NAL_AP = 48;
const NAL_FU = 49;
/** 48..63 are unspecified in H.265; RFC 7798 gives 48 (AP), 49 (FU) and 50 (PACI) meaning on the wire. */
const NAL_FIRST_UNSPECIFIED = 48;

/** Every H.265 NAL unit (and RTP payload) starts with a two-byte header (H.265 §7.3.1.2, RFC 7798 §1.1.4). */
const NAL_HEADER_BYTES = 2;
/** AP: payload header, then per NAL unit a 16-bit size and the NAL unit (RFC 7798 §4.4.2, no DONL). */
const AP_SIZE_BYTES = 2;
/** FU: payload header then a one-byte FU header (RFC 7798 §4.4.3, no DONL). */
const FU_HEADER_BYTES = NAL_HEADER_BYTES + 1;
const FU_START = 0x80;
const FU_END = 0x40;

/**
 * NAL unit header: |F|   Type    |  LayerId  | TID |
 *                   1      6           6        3     bits
 */
const F_BIT = 0x80;
/** The Type field within the first header byte. */
const TYPE_MASK_BYTE0 = 0x7e;
/** The high bit of LayerId, which sits in the first header byte. */
const LAYER_ID_HIGH_BIT = 0x01;

/** `nal_unit_type` from a NAL unit's (or RTP payload's) first byte, or -1 for an empty buffer. */
export function h265NalType(nal: Buffer): number {
  const header = nal[0];
  return header === undefined ? -1 : (header & TYPE_MASK_BYTE0) >> 1;
}

/** `nuh_layer_id` from a two-byte NAL header (0 for the base layer, all that WebRTC senders use). */
export function h265LayerId(nal: Buffer): number {
  return ((nal[0]! & LAYER_ID_HIGH_BIT) << 5) | (nal[1]! >> 3);
}

/** `nuh_temporal_id_plus1` from a two-byte NAL header (1 for the lowest temporal sub-layer). */
export function h265Tid(nal: Buffer): number {
  return nal[1]! & 0x07;
}

function isParameterSet(type: number): boolean {
  return type === NAL_VPS || type === NAL_SPS || type === NAL_PPS;
}

/**
 * Turns Annex-B HEVC access units into RTP payloads (RFC 7798, sprop-max-don-diff = 0).
 *
 * Consecutive NAL units are aggregated into APs while they fit (so an IRAP's VPS, SPS and PPS travel
 * together and small SEI/slices ride along), a NAL unit that fits alone goes as a single NAL unit
 * packet, and one larger than `maxPayloadBytes` is split into FUs of about equal size. Dropped:
 * access unit delimiters (type 35; RTP timestamps delimit access units), NAL units too short to hold a
 * header, and NAL units of the unspecified types 48..63, which on the wire would read as AP/FU/PACI.
 *
 * The caller builds the RTP packets and MUST set the marker bit on the last payload of each access
 * unit and on no other (RFC 7798 §4.1); all payloads of one access unit share its RTP timestamp.
 *
 * Single NAL unit payloads are views into the input buffer (no copy), so the caller must not modify
 * the access unit until the payloads have been sent.
 */
export class H265Packetizer {
  readonly #maxPayloadBytes: number;

  constructor(maxPayloadBytes = 1200) {
    // An FU needs its three header bytes plus at least one byte of NAL unit per fragment.
    if (!Number.isInteger(maxPayloadBytes) || maxPayloadBytes < FU_HEADER_BYTES + 1) {
      throw new RangeError(`maxPayloadBytes must be an integer >= 4, got ${maxPayloadBytes}`);
    }
    this.#maxPayloadBytes = maxPayloadBytes;
  }

  get maxPayloadBytes(): number {
    return this.#maxPayloadBytes;
  }

  /** RTP payloads for one Annex-B access unit, in sending order; empty if it holds no NAL units to send. */
  packetize(accessUnit: Buffer): Buffer[] {
    const nals = splitAnnexB(accessUnit);
    // Drops what is not sent in place (the array is ours): no second array per frame.
    let kept = 0;
    for (const nal of nals) if (isSent(nal)) nals[kept++] = nal;
    nals.length = kept;
    return packetizeNalUnits(nals, this.#maxPayloadBytes, H265_PACKETIZATION);
  }
}

function isSent(nal: Buffer): boolean {
  if (nal.length < NAL_HEADER_BYTES) return false;
  const type = h265NalType(nal);
  return type !== NAL_AUD && type < NAL_FIRST_UNSPECIFIED;
}

/** RFC 7798's aggregation and fragmentation, for packetizeNalUnits (one object, not one per frame). */
const H265_PACKETIZATION: NalPacketization = {
  aggregationHeaderBytes: NAL_HEADER_BYTES,
  isParameterSet: (nal) => isParameterSet(h265NalType(nal)),
  fragment,
  aggregate: buildAp,
};

/**
 * An Aggregation Packet (RFC 7798 §4.4.2). Its payload header has F = the OR of the aggregated F bits,
 * LayerId = their lowest LayerId and TID = their lowest TID.
 */
function buildAp(nals: readonly Buffer[], totalBytes: number): Buffer {
  let f = 0;
  let layerId = 0x3f;
  let tid = 0x07;
  for (const nal of nals) {
    f |= nal[0]! & F_BIT;
    layerId = Math.min(layerId, h265LayerId(nal));
    tid = Math.min(tid, h265Tid(nal));
  }
  const out = Buffer.allocUnsafe(totalBytes);
  out[0] = f | (NAL_AP << 1) | (layerId >> 5);
  out[1] = ((layerId & 0x1f) << 3) | tid;
  let offset = NAL_HEADER_BYTES;
  for (const nal of nals) {
    out.writeUInt16BE(nal.length, offset);
    offset += AP_SIZE_BYTES;
    offset += nal.copy(out, offset);
  }
  return out;
}

/**
 * Split one NAL unit into FU payloads (RFC 7798 §4.4.3), appending them to `out`.
 *
 * The NAL header is not sent as such: each payload header is a copy of it with Type = 49 (F, LayerId
 * and TID kept), and the FU header carries S, E and the original type. Fragments are sized about
 * equally rather than max-size-then-remainder, which avoids a tiny last packet; all fragments share
 * one allocation.
 */
function fragment(nal: Buffer, max: number, out: Buffer[]): void {
  const header0 = (nal[0]! & ~TYPE_MASK_BYTE0) | (NAL_FU << 1);
  const header1 = nal[1]!;
  const type = h265NalType(nal);
  const body = nal.subarray(NAL_HEADER_BYTES);
  const perFragment = max - FU_HEADER_BYTES;
  // nal.length > max, so body.length > max - 2 >= perFragment + 1: always at least two fragments, so
  // S and E are never both set, which RFC 7798 §4.4.3 forbids.
  const count = Math.ceil(body.length / perFragment);
  const base = Math.floor(body.length / count);
  const larger = body.length % count; // the first `larger` fragments carry one byte more
  const block = Buffer.allocUnsafe(body.length + count * FU_HEADER_BYTES);
  let src = 0;
  let dst = 0;
  for (let k = 0; k < count; k++) {
    const size = base + (k < larger ? 1 : 0);
    let fuHeader = type;
    if (k === 0) fuHeader |= FU_START;
    if (k === count - 1) fuHeader |= FU_END;
    const packetStart = dst;
    block[dst++] = header0;
    block[dst++] = header1;
    block[dst++] = fuHeader;
    dst += body.copy(block, dst, src, src + size);
    src += size;
    out.push(block.subarray(packetStart, dst));
  }
}
