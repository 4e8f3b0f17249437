/**
 * The part of H.264 (RFC 6184) and H.265 (RFC 7798) depacketization that is the same for both:
 * collecting one access unit's NAL units — whole, from an aggregation packet (STAP-A / AP), or
 * from fragments (FU-A / FU) — as Annex-B (4-byte start codes), and noting whether it holds a
 * picture a decoder can start from. The codec classes parse their own headers and feed this.
 */

import type { AssembledFrame } from './depacketized-frame.ts';

const START_CODE = Buffer.from([0, 0, 0, 1]);

/** What a NAL unit type means for starting to decode: a random-access picture, a parameter set, neither. */
export type NalRole = 'random-access' | 'parameter-set' | 'other';

export class AnnexBAssembler {
  readonly #roleOf: (nalType: number) => NalRole;
  /** Start codes, NAL units and fragments of the access unit in progress, concatenated once at its end. */
  #chunks: Buffer[] = [];
  #bytes = 0;
  #randomAccess = false;
  #parameterSet = false;
  /** NAL type of the fragmented NAL unit being reassembled, or -1 when none is open. */
  #fragmentType = -1;

  constructor(roleOf: (nalType: number) => NalRole) {
    this.#roleOf = roleOf;
  }

  /** Whether a fragmented NAL unit has started and not ended. */
  get fragmentOpen(): boolean {
    return this.#fragmentType !== -1;
  }

  reset(): void {
    this.#chunks = [];
    this.#bytes = 0;
    this.#randomAccess = false;
    this.#parameterSet = false;
    this.#fragmentType = -1;
  }

  /** A whole NAL unit (header included) of this type. */
  appendNal(nal: Buffer, nalType: number): void {
    this.#note(nalType);
    this.#chunks.push(START_CODE, nal);
    this.#bytes += START_CODE.length + nal.length;
  }

  /**
   * An aggregation packet's NAL units: repeated [16-bit size][NAL unit] from `offset` to the end.
   * False (the frame is broken) when a size is below `minNalBytes` or runs past the payload.
   */
  appendAggregated(payload: Buffer, offset: number, minNalBytes: number, typeOf: (nal: Buffer) => number): boolean {
    if (offset >= payload.length) return false;
    while (offset < payload.length) {
      if (offset + 2 > payload.length) return false;
      const size = payload.readUInt16BE(offset);
      offset += 2;
      if (size < minNalBytes || offset + size > payload.length) return false;
      const nal = payload.subarray(offset, offset + size);
      this.appendNal(nal, typeOf(nal));
      offset += size;
    }
    return true;
  }

  /**
   * One fragment of a NAL unit of type `nalType`. The first (`start`) brings the rebuilt NAL
   * header; `end` closes the unit (start and end together are not allowed by either RFC but
   * unambiguous, so accepted as a whole unit). False (the frame is broken) for a start while
   * another unit is open, or a continuation without its start.
   */
  appendFragment(fragment: Buffer, nalType: number, start: boolean, end: boolean, rebuiltHeader: () => Buffer): boolean {
    if (start) {
      if (this.#fragmentType !== -1) return false; // the previous fragmented unit never ended
      const header = rebuiltHeader();
      this.#chunks.push(START_CODE, header);
      this.#bytes += START_CODE.length + header.length;
      this.#note(nalType);
      this.#fragmentType = nalType;
    } else if (this.#fragmentType === -1 || this.#fragmentType !== nalType) {
      return false; // continuation without its start
    }
    if (fragment.length > 0) {
      this.#chunks.push(fragment);
      this.#bytes += fragment.length;
    }
    if (end) this.#fragmentType = -1;
    return true;
  }

  /** The access unit: null while a fragment is open (its end was lost), undefined when empty. */
  assemble(): AssembledFrame | null | undefined {
    if (this.#fragmentType !== -1) return null;
    if (this.#chunks.length === 0) return undefined;
    return {
      data: Buffer.concat(this.#chunks, this.#bytes),
      keyframe: this.#randomAccess,
      refresh: this.#randomAccess || this.#parameterSet,
    };
  }

  #note(nalType: number): void {
    const role = this.#roleOf(nalType);
    if (role === 'random-access') this.#randomAccess = true;
    else if (role === 'parameter-set') this.#parameterSet = true;
  }
}
