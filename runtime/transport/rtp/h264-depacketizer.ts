/**
 * H.264 RTP depacketization, RFC 6184 packetization-mode 1: single NAL unit packets, STAP-A and FU-A
 * become one Annex-B access unit per RTP timestamp.
 */

import { AnnexBAssembler } from './annexb-assembler.ts';
import { RtpDepacketizer, type AssembledFrame } from './depacketized-frame.ts';

const NAL_NON_IDR_SLICE = 1;
const NAL_IDR_SLICE = 5;
const NAL_SEI = 6;
const NAL_SPS = 7;
const NAL_PPS = 8;
const NAL_AUD = 9;
const NAL_SUBSET_SPS = 15;
const NAL_STAP_A = 24;
const NAL_STAP_B = 25;
const NAL_MTAP16 = 26;
const NAL_MTAP24 = 27;
const NAL_FU_A = 28;
const NAL_FU_B = 29;
const NAL_TYPE_MASK = 0x1f;
const NAL_F_NRI_MASK = 0xe0;
const FU_START = 0x80;
const FU_END = 0x40;

/** One-byte buffers for every NAL header value, so rebuilding an FU-A NAL header allocates nothing. */
const HEADER_BYTES: readonly Buffer[] = Array.from({ length: 256 }, (_, i) => Buffer.from([i]));

/**
 * Whether a NAL unit with this type, whose second byte is `next`, can only be the first of an access
 * unit that this packet begins. AUD, SEI and parameter sets precede the first slice of a picture
 * (H.264 §7.4.1.2.3); a slice is a picture's first when first_mb_in_slice, the leading ue(v) of its
 * header, is 0, i.e. coded as a single 1 bit. (Arbitrary slice order could defeat this; WebRTC
 * encoders do not use it.)
 */
function nalBeginsAccessUnit(type: number, next: number | undefined): boolean {
  switch (type) {
    case NAL_AUD:
    case NAL_SEI:
    case NAL_SPS:
    case NAL_PPS:
    case NAL_SUBSET_SPS:
      return true;
    case NAL_NON_IDR_SLICE:
    case NAL_IDR_SLICE:
      return next !== undefined && (next & 0x80) !== 0;
    default:
      return false;
  }
}

/**
 * Reassembles RFC 6184 packetization-mode 1 payloads into Annex-B access units with 4-byte start
 * codes, in the NAL order received. See `RtpDepacketizer` for framing and loss handling; a frame ends
 * a wait for a keyframe when it holds an IDR slice or an SPS, and is flagged `keyframe` when it holds
 * an IDR slice. FU-A fragments that lack their start or end break the frame like a lost packet.
 */
export class H264Depacketizer extends RtpDepacketizer {
  readonly #unit = new AnnexBAssembler((type) => (type === NAL_IDR_SLICE ? 'random-access' : type === NAL_SPS ? 'parameter-set' : 'other'));

  protected override resetFrame(): void {
    this.#unit.reset();
  }

  protected override startsFrame(payload: Buffer): boolean {
    const type = payload[0]! & NAL_TYPE_MASK;
    if (type === NAL_STAP_A) {
      // First aggregated NAL unit: header at offset 3, after the STAP-A header and a 16-bit size.
      const header = payload[3];
      return header !== undefined && nalBeginsAccessUnit(header & NAL_TYPE_MASK, payload[4]);
    }
    if (type === NAL_FU_A) {
      const fuHeader = payload[1];
      if (fuHeader === undefined || (fuHeader & FU_START) === 0) return false;
      return nalBeginsAccessUnit(fuHeader & NAL_TYPE_MASK, payload[2]);
    }
    return nalBeginsAccessUnit(type, payload[1]);
  }

  protected override appendPayload(payload: Buffer): boolean {
    const indicator = payload[0]!;
    const type = indicator & NAL_TYPE_MASK;
    if (this.#unit.fragmentOpen && type !== NAL_FU_A) return false; // FU-A ended without its E bit

    switch (type) {
      case NAL_STAP_A:
        // STAP-A (RFC 6184 §5.7.1): header byte, then repeated [16-bit NAL size][NAL unit].
        return this.#unit.appendAggregated(payload, 1, 1, (nal) => nal[0]! & NAL_TYPE_MASK);
      case NAL_FU_A:
        return this.#appendFuA(payload);
      case NAL_STAP_B:
      case NAL_MTAP16:
      case NAL_MTAP24:
      case NAL_FU_B:
        // Interleaved-mode (packetization-mode 2) only, RFC 6184 §6.3: we cannot place their NAL
        // units, so the frame is as good as lost.
        return false;
      case 0:
      case 30:
      case 31:
        // Undefined in RFC 6184 Table 3: carries nothing we can decode, but is not a sign of loss.
        return true;
      default:
        this.#unit.appendNal(payload, type);
        return true;
    }
  }

  protected override assembleFrame(): AssembledFrame | null | undefined {
    return this.#unit.assemble();
  }

  /**
   * FU-A (RFC 6184 §5.8): FU indicator (F, NRI, type 28), FU header (S, E, R, NAL type), fragment.
   * The original NAL header is F|NRI from the indicator with the type from the FU header.
   */
  #appendFuA(payload: Buffer): boolean {
    const indicator = payload[0]!;
    const fuHeader = payload[1];
    if (fuHeader === undefined) return false;
    const nalType = fuHeader & NAL_TYPE_MASK;
    return this.#unit.appendFragment(
      payload.subarray(2),
      nalType,
      (fuHeader & FU_START) !== 0,
      (fuHeader & FU_END) !== 0,
      () => HEADER_BYTES[(indicator & NAL_F_NRI_MASK) | nalType]!,
    );
  }
}
