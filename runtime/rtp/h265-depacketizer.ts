/**
 * H.265/HEVC RTP depacketization, RFC 7798 without DONL (sprop-max-don-diff = 0): single NAL unit
 * packets, Aggregation Packets and Fragmentation Units become one Annex-B access unit per RTP timestamp.
 */

import { RtpDepacketizer, type AssembledFrame } from './depacketized-frame.ts';

/** VCL NAL unit types are 0..31; 16..21 are IRAP pictures (BLA, IDR, CRA), H.265 Table 7-1. */
const NAL_LAST_VCL = 31;
const NAL_FIRST_IRAP = 16;
const NAL_LAST_IRAP = 21;
const NAL_VPS = 32;
const NAL_SPS = 33;
const NAL_PPS = 34;
const NAL_AUD = 35;
const NAL_PREFIX_SEI = 39;
const NAL_AP = 48;
const NAL_FU = 49;
const NAL_PACI = 50;

const NAL_HEADER_BYTES = 2;
const TYPE_MASK_BYTE0 = 0x7e;
const FU_START = 0x80;
const FU_END = 0x40;
const FU_TYPE_MASK = 0x3f;

const START_CODE = Buffer.from([0, 0, 0, 1]);

function typeOf(byte0: number): number {
  return (byte0 & TYPE_MASK_BYTE0) >> 1;
}

/**
 * Whether a NAL unit of this type, on layer `layerId`, whose first byte after the two-byte NAL header
 * is `next`, can only be the first of an access unit that this packet begins. AUD, VPS, SPS, PPS and
 * prefix SEI precede the first slice segment of a picture (H.265 §7.4.2.4.4); a slice segment is a
 * picture's first when first_slice_segment_in_pic_flag, the leading bit of its header, is 1. NAL units
 * of layers above the base belong to the access unit the base layer began.
 */
function nalBeginsAccessUnit(type: number, layerId: number, next: number | undefined): boolean {
  if (layerId !== 0) return false;
  switch (type) {
    case NAL_AUD:
    case NAL_VPS:
    case NAL_SPS:
    case NAL_PPS:
    case NAL_PREFIX_SEI:
      return true;
    default:
      return type <= NAL_LAST_VCL && next !== undefined && (next & 0x80) !== 0;
  }
}

function layerIdOf(byte0: number, byte1: number): number {
  return ((byte0 & 0x01) << 5) | (byte1 >> 3);
}

/**
 * Reassembles RFC 7798 payloads (without DONL) into Annex-B access units with 4-byte start codes, in
 * the NAL order received. See `RtpDepacketizer` for framing and loss handling; a frame ends a wait for
 * a keyframe when it holds an IRAP picture (NAL types 16..21: BLA, IDR, CRA) or a VPS/SPS, and is
 * flagged `keyframe` when it holds an IRAP picture. FUs that lack their start or end break the frame
 * like a lost packet; PACI packets (type 50), which this receiver does not unwrap, do too.
 */
export class H265Depacketizer extends RtpDepacketizer {
  /** Start codes, NAL units and FU pieces of the frame in progress, concatenated once at its end. */
  #chunks: Buffer[] = [];
  #bytes = 0;
  #hasIrap = false;
  #hasParameterSet = false;
  /** NAL type of the FU being reassembled, or -1 when none is open. */
  #fuType = -1;

  protected override resetFrame(): void {
    this.#chunks = [];
    this.#bytes = 0;
    this.#hasIrap = false;
    this.#hasParameterSet = false;
    this.#fuType = -1;
  }

  protected override startsFrame(payload: Buffer): boolean {
    if (payload.length < NAL_HEADER_BYTES) return false;
    const type = typeOf(payload[0]!);
    if (type === NAL_AP) {
      // First aggregated NAL unit: its header at offset 4, after the payload header and a 16-bit size.
      const header0 = payload[4];
      const header1 = payload[5];
      if (header0 === undefined || header1 === undefined) return false;
      return nalBeginsAccessUnit(typeOf(header0), layerIdOf(header0, header1), payload[6]);
    }
    if (type === NAL_FU) {
      const fuHeader = payload[2];
      if (fuHeader === undefined || (fuHeader & FU_START) === 0) return false;
      return nalBeginsAccessUnit(fuHeader & FU_TYPE_MASK, layerIdOf(payload[0]!, payload[1]!), payload[3]);
    }
    return nalBeginsAccessUnit(type, layerIdOf(payload[0]!, payload[1]!), payload[2]);
  }

  protected override appendPayload(payload: Buffer): boolean {
    if (payload.length < NAL_HEADER_BYTES) return false;
    const type = typeOf(payload[0]!);
    if (this.#fuType !== -1 && type !== NAL_FU) return false; // FU ended without its E bit

    switch (type) {
      case NAL_AP:
        return this.#appendAp(payload);
      case NAL_FU:
        return this.#appendFu(payload);
      case NAL_PACI:
        // PACI (RFC 7798 §4.4.4) wraps another payload behind extension headers; no WebRTC sender uses
        // it, and without unwrapping it its NAL units are missing from the frame.
        return false;
      default:
        if (type > NAL_PACI) return true; // 51..63: unspecified payload types, carry nothing to decode
        this.#appendNal(payload);
        return true;
    }
  }

  protected override assembleFrame(): AssembledFrame | null | undefined {
    if (this.#fuType !== -1) return null;
    if (this.#chunks.length === 0) return undefined;
    return {
      data: Buffer.concat(this.#chunks, this.#bytes),
      keyframe: this.#hasIrap,
      refresh: this.#hasIrap || this.#hasParameterSet,
    };
  }

  #appendNal(nal: Buffer): void {
    this.#noteType(typeOf(nal[0]!));
    this.#chunks.push(START_CODE, nal);
    this.#bytes += START_CODE.length + nal.length;
  }

  #noteType(type: number): void {
    if (type >= NAL_FIRST_IRAP && type <= NAL_LAST_IRAP) this.#hasIrap = true;
    else if (type === NAL_VPS || type === NAL_SPS) this.#hasParameterSet = true;
  }

  /** AP (RFC 7798 §4.4.2, no DONL): payload header, then repeated [16-bit NAL size][NAL unit]. */
  #appendAp(payload: Buffer): boolean {
    let offset = NAL_HEADER_BYTES;
    if (offset >= payload.length) return false;
    while (offset < payload.length) {
      if (offset + 2 > payload.length) return false;
      const size = payload.readUInt16BE(offset);
      offset += 2;
      // Every aggregated NAL unit has at least its two-byte header.
      if (size < NAL_HEADER_BYTES || offset + size > payload.length) return false;
      this.#appendNal(payload.subarray(offset, offset + size));
      offset += size;
    }
    return true;
  }

  /**
   * FU (RFC 7798 §4.4.3, no DONL): payload header (F, type 49, LayerId, TID), FU header (S, E,
   * FuType), fragment. The original NAL header is the payload header with Type = FuType.
   */
  #appendFu(payload: Buffer): boolean {
    const fuHeader = payload[2];
    if (fuHeader === undefined) return false;
    const nalType = fuHeader & FU_TYPE_MASK;
    const fragment = payload.subarray(3);

    if ((fuHeader & FU_START) !== 0) {
      if (this.#fuType !== -1) return false; // previous FU never ended
      const header = Buffer.from([(payload[0]! & ~TYPE_MASK_BYTE0) | (nalType << 1), payload[1]!]);
      this.#chunks.push(START_CODE, header);
      this.#bytes += START_CODE.length + header.length;
      this.#noteType(nalType);
      this.#fuType = nalType;
    } else if (this.#fuType === -1 || this.#fuType !== nalType) {
      return false; // continuation without its start
    }

    if (fragment.length > 0) {
      this.#chunks.push(fragment);
      this.#bytes += fragment.length;
    }
    // S and E together is not allowed (§4.4.3) but unambiguous, so it is accepted as a whole NAL unit.
    if ((fuHeader & FU_END) !== 0) this.#fuType = -1;
    return true;
  }
}
