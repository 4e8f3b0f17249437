/**
 * VP8 RTP packetization, RFC 7741.
 */

/**
 * Payload descriptor we send (RFC 7741 §4.2), 4 bytes:
 *
 *   byte 0  |X|R|N|S|R| PID |   X=1 (extensions follow), N=0, S=1 on a frame's first packet, PID=0
 *   byte 1  |I|L|T|K| RSV   |   I=1: a PictureID follows; no TL0PICIDX/TID/KEYIDX
 *   byte 2  |M| PictureID   |   M=1: 15-bit PictureID, high 7 bits
 *   byte 3  |   PictureID   |   low 8 bits
 *
 * The whole frame is one partition as far as the descriptor says (PID=0 throughout), which RFC 7741
 * allows; receivers find partition boundaries in the VP8 frame header.
 */
const DESCRIPTOR_BYTES = 4;
const X_BIT = 0x80;
const S_BIT = 0x10;
const I_BIT = 0x80;
const M_BIT = 0x80;
const PICTURE_ID_MASK = 0x7fff;

/**
 * Turns VP8 frames into RTP payloads (RFC 7741), each a payload descriptor followed by part of the
 * frame, split into pieces of about equal size so that no payload exceeds `maxPayloadBytes`.
 *
 * The PictureID increases by one per frame, wrapping from 0x7fff to 0, so receivers can tell a lost
 * frame from a lost packet. The caller builds the RTP packets and MUST set the marker bit on the last
 * payload of each frame (RFC 7741 §4.1); all payloads of a frame share its RTP timestamp.
 */
export class Vp8Packetizer {
  readonly #maxPayloadBytes: number;
  #pictureId: number;

  /**
   * @param initialPictureId PictureID of the first frame; RFC 7741 §4.2 leaves the start value open,
   *   and a random one keeps a restarted sender from looking like a continuation.
   */
  constructor(maxPayloadBytes = 1200, initialPictureId = 0) {
    if (!Number.isInteger(maxPayloadBytes) || maxPayloadBytes < DESCRIPTOR_BYTES + 1) {
      throw new RangeError(`maxPayloadBytes must be an integer >= 5, got ${maxPayloadBytes}`);
    }
    this.#maxPayloadBytes = maxPayloadBytes;
    this.#pictureId = initialPictureId & PICTURE_ID_MASK;
  }

  get maxPayloadBytes(): number {
    return this.#maxPayloadBytes;
  }

  /** PictureID the next frame will carry. */
  get nextPictureId(): number {
    return this.#pictureId;
  }

  /** RTP payloads for one VP8 frame, in sending order; empty for an empty frame (nothing to send). */
  packetize(frame: Buffer): Buffer[] {
    if (frame.length === 0) return [];
    const pictureId = this.#pictureId;
    this.#pictureId = (pictureId + 1) & PICTURE_ID_MASK;

    const perPacket = this.#maxPayloadBytes - DESCRIPTOR_BYTES;
    const count = Math.ceil(frame.length / perPacket);
    const base = Math.floor(frame.length / count);
    const larger = frame.length % count; // the first `larger` packets carry one byte more
    const block = Buffer.allocUnsafe(frame.length + count * DESCRIPTOR_BYTES);
    const payloads: Buffer[] = new Array<Buffer>(count);
    let src = 0;
    let dst = 0;
    for (let k = 0; k < count; k++) {
      const size = base + (k < larger ? 1 : 0);
      const packetStart = dst;
      block[dst++] = k === 0 ? X_BIT | S_BIT : X_BIT;
      block[dst++] = I_BIT;
      block[dst++] = M_BIT | (pictureId >> 8);
      block[dst++] = pictureId & 0xff;
      dst += frame.copy(block, dst, src, src + size);
      src += size;
      payloads[k] = block.subarray(packetStart, dst);
    }
    return payloads;
  }
}
