/**
 * SRTP protection (RFC 3711, RFC 7714) of outgoing RTP with long-lived key state, for the
 * fan-out send path: every viewer of a stream has its own keys, so this runs once per packet
 * per viewer and is the largest per-viewer cost the runtime has.
 *
 * werift's own encryptor creates a cipher object and an HMAC object per packet and
 * re-serializes the header; here the AES-CM keystream for a whole frame's packets comes from
 * one call on a cipher created once per connection, and the payload is encrypted in place in
 * the buffer that goes to the socket. The session keys are werift's (derived from the DTLS
 * handshake); the output is byte-identical to werift's (see srtp-protector.test.ts).
 */

import { createCipheriv, createDecipheriv, createHmac } from 'node:crypto';
import type { RTCDtlsTransport } from 'werift';

/** werift's `SrtpProfile` numbers (DTLS-SRTP protection profile ids, RFC 5764 / RFC 7714). */
export const SRTP_AES128_CM_HMAC_SHA1_80 = 1;
export const SRTP_AEAD_AES_128_GCM = 7;

/** One RTP packet of a batch: `packet` holds the RTP header, then room for payload and tag. */
export interface UnprotectedPacket {
  /** Header bytes already written at [0, headerLength); length = header + payload + tag. */
  readonly packet: Buffer;
  readonly headerLength: number;
  readonly payload: Buffer;
  /** 48-bit SRTP packet index: rollover counter × 65536 + sequence number. */
  readonly index: number;
}

/** What one DTLS-SRTP association gives the send path (werift's transport, its SRTP session, our protector); replaced if werift replaces it. */
export interface SrtpStream {
  readonly transport: RTCDtlsTransport;
  readonly srtp: object;
  readonly protector: SrtpProtector;
}

export interface SrtpProtector {
  /** Bytes of authentication tag each packet ends with. */
  readonly tagLength: number;
  /**
   * Encrypts each payload into its packet after the header and writes the tag after it: the
   * first `count` entries of `batch` (default all). Nothing of the batch is kept.
   */
  protect(ssrc: number, batch: readonly UnprotectedPacket[], count?: number): void;
  /**
   * The plaintext payload of a packet this protector protected (SSRC `ssrc`, SRTP index
   * `index`): `packet` is header (`headerLength` bytes), encrypted payload, tag; the payload is
   * written into `into` at `at`. For RTX (RFC 4588), which resends a kept packet's payload
   * under another SSRC and index: the send history keeps packets as they left, protected.
   */
  decrypt(ssrc: number, packet: Buffer, headerLength: number, index: number, into: Buffer, at: number): void;
}

/** The local (sending) SRTP session keys werift derived after the DTLS handshake. */
export interface SrtpSessionKeys {
  readonly profile: number;
  readonly key: Buffer;
  /** 14 bytes for AES-CM (112-bit salt), 12 used for GCM. */
  readonly salt: Buffer;
  /** HMAC-SHA1 key (AES-CM only). */
  readonly authKey: Buffer;
}

export function createSrtpProtector(keys: SrtpSessionKeys): SrtpProtector {
  switch (keys.profile) {
    case SRTP_AES128_CM_HMAC_SHA1_80:
      return new AesCmHmacSha1Protector(keys.key, keys.salt, keys.authKey);
    case SRTP_AEAD_AES_128_GCM:
      return new AesGcmProtector(keys.key, keys.salt);
    default:
      throw new Error(`unsupported SRTP protection profile ${keys.profile}`);
  }
}

/** Payload bytes per AES block. */
const BLOCK = 16;

/**
 * AES_CM_128_HMAC_SHA1_80 (RFC 3711 §4.1.1, §4.2): the keystream is AES(k_e, IV + j) for block
 * j, IV = (salt ≪ 16) ⊕ (SSRC ≪ 64) ⊕ (index ≪ 16), i.e. counter mode, which is AES-ECB over
 * the counter blocks — so one ECB cipher serves every packet of the connection. The tag is the
 * first 80 bits of HMAC-SHA1 over header, encrypted payload and the 32-bit rollover counter.
 */
class AesCmHmacSha1Protector implements SrtpProtector {
  readonly tagLength = 10;
  readonly #ecb: ReturnType<typeof createCipheriv>;
  readonly #salt: Buffer;
  readonly #authKey: Buffer;
  #counters = new Uint8Array(0);
  readonly #iv = Buffer.alloc(BLOCK);
  readonly #roc = Buffer.alloc(4);

  constructor(key: Buffer, salt: Buffer, authKey: Buffer) {
    this.#ecb = createCipheriv('aes-128-ecb', key, null);
    this.#ecb.setAutoPadding(false);
    this.#salt = Buffer.from(salt.subarray(0, 14));
    this.#authKey = authKey;
  }

  protect(ssrc: number, batch: readonly UnprotectedPacket[], count = batch.length): void {
    const keystream = this.#keystream(ssrc, batch, count);
    let offset = 0;
    for (let i = 0; i < count; i++) {
      const { packet, headerLength, payload, index } = batch[i]!;
      xorInto(packet, headerLength, payload, keystream, offset);
      offset += Math.ceil(payload.length / BLOCK) * BLOCK;
      const end = headerLength + payload.length;
      this.#roc.writeUInt32BE(Math.floor(index / 0x1_0000) >>> 0, 0);
      const tag = createHmac('sha1', this.#authKey).update(packet.subarray(0, end)).update(this.#roc).digest();
      tag.copy(packet, end, 0, this.tagLength);
    }
  }

  decrypt(ssrc: number, packet: Buffer, headerLength: number, index: number, into: Buffer, at: number): void {
    // Counter mode: XORing the same keystream again gives the plaintext back (the tag is not checked: our own packet).
    const payload = packet.subarray(headerLength, packet.length - this.tagLength);
    xorInto(into, at, payload, this.#keystream(ssrc, [{ packet, headerLength, payload, index }], 1), 0);
  }

  /** The keystream of the first `count` packets of `batch`, each starting on a block boundary. */
  #keystream(ssrc: number, batch: readonly UnprotectedPacket[], count: number): Buffer {
    let blocks = 0;
    for (let i = 0; i < count; i++) blocks += Math.ceil(batch[i]!.payload.length / BLOCK);
    if (this.#counters.length < blocks * BLOCK) this.#counters = new Uint8Array(Math.max(blocks * BLOCK, 2 * this.#counters.length));
    const counters = this.#counters;
    // Counter blocks for every packet, one after the other: one native call for the frame.
    let offset = 0;
    for (let i = 0; i < count; i++) {
      const { payload, index } = batch[i]!;
      const iv = this.#iv;
      this.#salt.copy(iv, 0);
      iv[14] = 0;
      iv[15] = 0;
      iv.writeUInt32BE((iv.readUInt32BE(4) ^ ssrc) >>> 0, 4);
      const high = Math.floor(index / 0x1_0000_0000); // index bits 47..32 → IV bytes 8..9
      iv.writeUInt16BE(iv.readUInt16BE(8) ^ (high & 0xffff), 8);
      iv.writeUInt32BE((iv.readUInt32BE(10) ^ (index >>> 0)) >>> 0, 10);
      const n = Math.ceil(payload.length / BLOCK);
      for (let j = 0; j < n; j++) {
        counters.set(iv, offset);
        counters[offset + 14] = j >> 8;
        counters[offset + 15] = j & 0xff;
        offset += BLOCK;
      }
    }
    return this.#ecb.update(counters.subarray(0, offset));
  }
}

/**
 * AEAD_AES_128_GCM (RFC 7714 §8): IV = (0x0000 ‖ SSRC ‖ ROC ‖ SEQ) ⊕ salt, the header is the
 * associated data, a 16-byte tag follows the payload. Node cannot re-key a GCM cipher with a
 * new IV, so this is one cipher object per packet — still without werift's header re-encoding
 * and copies.
 */
class AesGcmProtector implements SrtpProtector {
  readonly tagLength = 16;
  readonly #key: Buffer;
  readonly #salt: Buffer;
  /** The IV, rewritten per packet (createCipheriv copies it). */
  readonly #iv = Buffer.alloc(12);

  constructor(key: Buffer, salt: Buffer) {
    this.#key = key;
    this.#salt = Buffer.from(salt.subarray(0, 12));
  }

  protect(ssrc: number, batch: readonly UnprotectedPacket[], count = batch.length): void {
    for (let i = 0; i < count; i++) {
      const { packet, headerLength, payload, index } = batch[i]!;
      const cipher = createCipheriv('aes-128-gcm', this.#key, this.#ivFor(ssrc, index));
      cipher.setAAD(packet.subarray(0, headerLength));
      const end = headerLength + payload.length;
      cipher.update(payload).copy(packet, headerLength);
      cipher.final();
      cipher.getAuthTag().copy(packet, end);
    }
  }

  decrypt(ssrc: number, packet: Buffer, headerLength: number, index: number, into: Buffer, at: number): void {
    // GCM's payload is counter-mode encrypted: update() gives the plaintext. The tag is not
    // checked (our own packet; final() would throw on a mismatch inside a NACK handler).
    const end = packet.length - this.tagLength;
    const decipher = createDecipheriv('aes-128-gcm', this.#key, this.#ivFor(ssrc, index));
    decipher.update(packet.subarray(headerLength, end)).copy(into, at);
  }

  /** IV = (0x0000 ‖ SSRC ‖ ROC ‖ SEQ) ⊕ salt, in the reused buffer. */
  #ivFor(ssrc: number, index: number): Buffer {
    const iv = this.#iv;
    this.#salt.copy(iv, 0);
    iv.writeUInt32BE((iv.readUInt32BE(2) ^ ssrc) >>> 0, 2);
    iv.writeUInt32BE((iv.readUInt32BE(6) ^ Math.floor(index / 0x1_0000)) >>> 0, 6);
    iv.writeUInt16BE(iv.readUInt16BE(10) ^ (index & 0xffff), 10);
    return iv;
  }
}

/** packet[at + i] = payload[i] ⊕ keystream[from + i], four bytes at a time where aligned. */
function xorInto(packet: Buffer, at: number, payload: Buffer, keystream: Buffer, from: number): void {
  const length = payload.length;
  payload.copy(packet, at);
  let i = 0;
  const target = packet.byteOffset + at;
  const source = keystream.byteOffset + from;
  if (target % 4 === 0 && source % 4 === 0) {
    const words = length >>> 2;
    const out = new Int32Array(packet.buffer, target, words);
    const key = new Int32Array(keystream.buffer, source, words);
    for (; i < words; i++) out[i] = out[i]! ^ key[i]!;
    i = words << 2;
  }
  for (; i < length; i++) packet[at + i] = packet[at + i]! ^ keystream[from + i]!;
}
