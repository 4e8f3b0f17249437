/**
 * VP8 RTP depacketization, RFC 7741.
 */

import { RtpDepacketizer, type AssembledFrame } from './depacketized-frame.ts';

/** Byte 0 of the payload descriptor (RFC 7741 §4.2): |X|R|N|S|R| PID | */
const X_BIT = 0x80;
const S_BIT = 0x10;
const PID_MASK = 0x07;
/** Extension byte: |I|L|T|K| RSV | */
const I_BIT = 0x80;
const L_BIT = 0x40;
const T_BIT = 0x20;
const K_BIT = 0x10;
/** PictureID byte: |M| PictureID |, M=1 meaning a second byte follows (15-bit PictureID). */
const M_BIT = 0x80;
/** First byte of the VP8 payload header (RFC 7741 §4.3): |Size0|H| VER |P|, P=0 on key frames. */
const P_BIT = 0x01;

/** A parsed RFC 7741 payload descriptor. */
export interface Vp8PayloadDescriptor {
  /** N: the frame is not used as a reference. */
  readonly nonReference: boolean;
  /** S: this packet starts a VP8 partition. */
  readonly startOfPartition: boolean;
  /** PID: partition index. */
  readonly partitionIndex: number;
  /** 7- or 15-bit PictureID, when present. */
  readonly pictureId: number | undefined;
  readonly tl0PicIdx: number | undefined;
  /** TID and Y share a byte with KEYIDX; present when T or K is set. */
  readonly temporalLayerId: number | undefined;
  readonly layerSync: boolean | undefined;
  readonly keyIndex: number | undefined;
  /** Bytes the descriptor occupies; the VP8 payload starts here. */
  readonly length: number;
}

/**
 * Parse the variable-length VP8 payload descriptor (RFC 7741 §4.2) at the start of an RTP payload;
 * `undefined` when the payload is too short to hold what its flags announce.
 */
export function parseVp8PayloadDescriptor(payload: Buffer): Vp8PayloadDescriptor | undefined {
  const b0 = payload[0];
  if (b0 === undefined) return undefined;
  let offset = 1;
  let pictureId: number | undefined;
  let tl0PicIdx: number | undefined;
  let temporalLayerId: number | undefined;
  let layerSync: boolean | undefined;
  let keyIndex: number | undefined;

  if ((b0 & X_BIT) !== 0) {
    const ext = payload[offset++];
    if (ext === undefined) return undefined;
    if ((ext & I_BIT) !== 0) {
      const p0 = payload[offset++];
      if (p0 === undefined) return undefined;
      if ((p0 & M_BIT) !== 0) {
        const p1 = payload[offset++];
        if (p1 === undefined) return undefined;
        pictureId = ((p0 & 0x7f) << 8) | p1;
      } else {
        pictureId = p0 & 0x7f;
      }
    }
    if ((ext & L_BIT) !== 0) {
      tl0PicIdx = payload[offset++];
      if (tl0PicIdx === undefined) return undefined;
    }
    // T and K share one byte: |TID|Y| KEYIDX | (TID: 2 bits, Y: 1 bit, KEYIDX: 5 bits).
    if ((ext & (T_BIT | K_BIT)) !== 0) {
      const tk = payload[offset++];
      if (tk === undefined) return undefined;
      if ((ext & T_BIT) !== 0) {
        temporalLayerId = tk >> 6;
        layerSync = (tk & 0x20) !== 0;
      }
      if ((ext & K_BIT) !== 0) keyIndex = tk & 0x1f;
    }
  }

  return {
    nonReference: (b0 & 0x20) !== 0,
    startOfPartition: (b0 & S_BIT) !== 0,
    partitionIndex: b0 & PID_MASK,
    pictureId,
    tl0PicIdx,
    temporalLayerId,
    layerSync,
    keyIndex,
    length: offset,
  };
}

/**
 * Reassembles RFC 7741 payloads into VP8 frames. See `RtpDepacketizer` for framing and loss
 * handling. A frame's first packet has S=1 and PID=0 (RFC 7741 §4.2); a frame that does not start
 * with one has lost its beginning and is dropped. Key frame: the first packet's VP8 payload header
 * has P=0 (RFC 7741 §4.3).
 */
export class Vp8Depacketizer extends RtpDepacketizer {
  /** VP8 payloads (descriptors stripped) of the frame in progress, concatenated once at its end. */
  #chunks: Buffer[] = [];
  #bytes = 0;
  #keyframe = false;

  protected override resetFrame(): void {
    this.#chunks = [];
    this.#bytes = 0;
    this.#keyframe = false;
  }

  protected override startsFrame(payload: Buffer): boolean {
    const descriptor = parseVp8PayloadDescriptor(payload);
    return descriptor !== undefined && isFrameStart(descriptor);
  }

  protected override appendPayload(payload: Buffer): boolean {
    const descriptor = parseVp8PayloadDescriptor(payload);
    if (descriptor === undefined) return false;
    const body = payload.subarray(descriptor.length);
    // A descriptor with nothing after it carries no frame data; a sender never needs one.
    const first = body[0];
    if (first === undefined) return false;

    if (this.#chunks.length === 0) {
      if (!isFrameStart(descriptor)) return false; // the frame's first packet was lost
      this.#keyframe = (first & P_BIT) === 0;
    } else if (isFrameStart(descriptor)) {
      return false; // a second frame under the same timestamp: the first one lost its end
    }
    this.#chunks.push(body);
    this.#bytes += body.length;
    return true;
  }

  protected override assembleFrame(): AssembledFrame | null | undefined {
    if (this.#chunks.length === 0) return undefined;
    // Always a copy, even for one chunk, so the frame never aliases a packet buffer the caller may reuse.
    const data = Buffer.concat(this.#chunks, this.#bytes);
    return { data, keyframe: this.#keyframe, refresh: this.#keyframe };
  }
}

function isFrameStart(descriptor: Vp8PayloadDescriptor): boolean {
  return descriptor.startOfPartition && descriptor.partitionIndex === 0;
}
