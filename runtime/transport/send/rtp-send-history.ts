/**
 * The last packets one connection was sent on one RTP stream, as they went to the socket
 * (SRTP-protected), so a NACKed packet is resent byte for byte: no re-encryption, and a
 * receiver that did get the first copy discards the second as a replay. Where RTX is negotiated
 * the sender rebuilds the resend from the kept packet instead (rtp-track-sender.ts: its header,
 * and its payload decrypted, on the RTX stream): the packetizers' payload buffers are reused
 * frame after frame, so the protected packet is the only copy kept, and keeping it costs nothing
 * per packet.
 *
 * Packets are written straight into the history's own memory — one slab per stream, a fixed
 * slot per sequence number modulo the size — and sent from there. A per-packet buffer kept for
 * seconds (what werift does) is promoted out of V8's young generation and costs collection work
 * that grows with every viewer; a slab costs nothing after it is allocated.
 *
 * A slot is reused `size` packets later (seconds at any bitrate), long after the kernel took
 * the datagram: a send still queued in libuv by then (a socket blocked for seconds) would go out
 * with the newer packet's bytes — a lost packet, as it would be anyway on such a link.
 *
 * Each slot also keeps when its packet was first sent and last resent (ms of the sender's clock),
 * which the loss-recovery rules read (loss-recovery.ts: too old, once per RTT), and how many
 * copies were resent (a report that one copy was lost asks for another only if it was the newest).
 */

/** Packets kept per stream: ~2 s of a 2 Mbit/s 720p stream, ~0.5 s at 10 Mbit/s. */
export const RTP_SEND_HISTORY_SIZE = 512;

/**
 * Bytes per slot: 12-byte header + extensions + 1200-byte payload (the packetizers' limit) +
 * a 16-byte tag fits; anything larger gets a buffer of its own.
 */
export const RTP_SEND_HISTORY_SLOT_BYTES = 1280;

export class RtpSendHistory {
  readonly #slab: Buffer;
  readonly #lengths: Uint16Array;
  readonly #sequenceNumbers: Uint16Array;
  readonly #sentAt: Float64Array;
  /** NaN: not resent. */
  readonly #resentAt: Float64Array;
  /** How many times each packet was resent (its copies after the first; wraps at 256). */
  readonly #resends: Uint8Array;
  readonly #oversized = new Map<number, Buffer>();

  constructor(
    readonly size: number = RTP_SEND_HISTORY_SIZE,
    readonly slotBytes: number = RTP_SEND_HISTORY_SLOT_BYTES,
  ) {
    this.#slab = Buffer.allocUnsafeSlow(size * slotBytes);
    this.#lengths = new Uint16Array(size);
    this.#sequenceNumbers = new Uint16Array(size);
    this.#sentAt = new Float64Array(size);
    this.#resentAt = new Float64Array(size).fill(NaN);
    this.#resends = new Uint8Array(size);
  }

  /**
   * Memory for the packet with this sequence number, `length` bytes, to be filled and sent by
   * the caller; it replaces what the slot held. `sentAtMs`: when it is sent.
   */
  allocate(sequenceNumber: number, length: number, sentAtMs = 0): Buffer {
    const slot = sequenceNumber % this.size;
    this.#sequenceNumbers[slot] = sequenceNumber;
    this.#sentAt[slot] = sentAtMs;
    this.#resentAt[slot] = NaN;
    this.#resends[slot] = 0;
    this.#oversized.delete(slot);
    if (length > this.slotBytes) {
      this.#lengths[slot] = 0;
      const packet = Buffer.allocUnsafe(length);
      this.#oversized.set(slot, packet);
      return packet;
    }
    this.#lengths[slot] = length;
    return this.#slab.subarray(slot * this.slotBytes, slot * this.slotBytes + length);
  }

  /** The packet sent with this sequence number, if it is still kept. */
  get(sequenceNumber: number): Buffer | undefined {
    const slot = sequenceNumber % this.size;
    if (this.#sequenceNumbers[slot] !== sequenceNumber) return undefined;
    const oversized = this.#oversized.get(slot);
    if (oversized) return oversized;
    const length = this.#lengths[slot]!;
    return length === 0 ? undefined : this.#slab.subarray(slot * this.slotBytes, slot * this.slotBytes + length);
  }

  /** When the packet with this sequence number was first sent (as given to `allocate`), if it is still kept. */
  sentAt(sequenceNumber: number): number | undefined {
    return this.get(sequenceNumber) === undefined ? undefined : this.#sentAt[sequenceNumber % this.size];
  }

  /** When the packet with this sequence number was last resent, if it was and is still kept. */
  resentAt(sequenceNumber: number): number | undefined {
    const at = this.get(sequenceNumber) === undefined ? NaN : this.#resentAt[sequenceNumber % this.size]!;
    return Number.isNaN(at) ? undefined : at;
  }

  /**
   * How many times the packet with this sequence number was resent (0: only its first copy
   * left), if it is still kept: the number of its newest copy.
   */
  resends(sequenceNumber: number): number | undefined {
    return this.get(sequenceNumber) === undefined ? undefined : this.#resends[sequenceNumber % this.size];
  }

  /**
   * Notes that the packet with this sequence number was resent at `atMs` (if it is still kept);
   * returns the new copy's number (1 for the first resend), or undefined.
   */
  markResent(sequenceNumber: number, atMs: number): number | undefined {
    if (this.get(sequenceNumber) === undefined) return undefined;
    const slot = sequenceNumber % this.size;
    this.#resentAt[slot] = atMs;
    this.#resends[slot] = (this.#resends[slot]! + 1) & 0xff;
    return this.#resends[slot];
  }

  clear(): void {
    this.#lengths.fill(0);
    this.#oversized.clear();
  }
}
