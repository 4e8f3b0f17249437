/**
 * H.265/HEVC RTP depacketization, RFC 7798 without DONL (sprop-max-don-diff = 0): single NAL unit
 * packets, Aggregation Packets and Fragmentation Units become one Annex-B access unit per RTP timestamp.
 */

import { AnnexBAssembler } from './annexb-assembler.ts';
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
  readonly #unit = new AnnexBAssembler((type) =>
    type >= NAL_FIRST_IRAP && type <= NAL_LAST_IRAP ? 'random-access' : type === NAL_VPS || type === NAL_SPS ? 'parameter-set' : 'other',
  );

  protected override resetFrame(): void {
    this.#unit.reset();
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
    if (this.#unit.fragmentOpen && type !== NAL_FU) return false; // FU ended without its E bit

    switch (type) {
      case NAL_AP:
        // AP (RFC 7798 §4.4.2, no DONL): payload header, then repeated [16-bit NAL size][NAL unit];
        // every aggregated NAL unit has at least its two-byte header.
        return this.#unit.appendAggregated(payload, NAL_HEADER_BYTES, NAL_HEADER_BYTES, (nal) => typeOf(nal[0]!));
      case NAL_FU:
        return this.#appendFu(payload);
      case NAL_PACI:
        // PACI (RFC 7798 §4.4.4) wraps another payload behind extension headers; no WebRTC sender uses
        // it, and without unwrapping it its NAL units are missing from the frame.
        return false;
      default:
        if (type > NAL_PACI) return true; // 51..63: unspecified payload types, carry nothing to decode
        this.#unit.appendNal(payload, type);
        return true;
    }
  }

  protected override assembleFrame(): AssembledFrame | null | undefined {
    return this.#unit.assemble();
  }

  /**
   * FU (RFC 7798 §4.4.3, no DONL): payload header (F, type 49, LayerId, TID), FU header (S, E,
   * FuType), fragment. The original NAL header is the payload header with Type = FuType.
   */
  #appendFu(payload: Buffer): boolean {
    const fuHeader = payload[2];
    if (fuHeader === undefined) return false;
    const nalType = fuHeader & FU_TYPE_MASK;
    return this.#unit.appendFragment(payload.subarray(3), nalType, (fuHeader & FU_START) !== 0, (fuHeader & FU_END) !== 0, () =>
      Buffer.from([(payload[0]! & ~TYPE_MASK_BYTE0) | (nalType << 1), payload[1]!]),
    );
  }
}
