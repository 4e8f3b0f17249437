/**
 * What the video depacketizers hand back, and the RTP bookkeeping they share: sequence tracking,
 * frame boundaries, and withholding frames after loss until the stream can be decoded again.
 *
 * The codec-specific part (how a payload maps onto bitstream bytes) lives in the subclasses
 * `H264Depacketizer` and `Vp8Depacketizer`; everything about *which* packets form a usable frame
 * lives here so both codecs behave identically under loss.
 */

/** One reassembled video frame. */
export interface DepacketizedFrame {
  /** H.264: an Annex-B access unit with 4-byte start codes. VP8: the VP8 frame as the encoder wrote it. */
  readonly data: Buffer;
  /** H.264: the access unit holds an IDR slice (NAL type 5). VP8: a key frame (RFC 7741 §4.3, P bit 0). */
  readonly keyframe: boolean;
  /** RTP timestamp of the frame (90 kHz clock for video). */
  readonly timestamp: number;
}

/** The fields of an RTP packet the depacketizers read; werift's `RtpPacket` header+payload fit it. */
export interface RtpPacketFields {
  readonly payload: Buffer;
  readonly marker: boolean;
  readonly sequenceNumber: number;
  readonly timestamp: number;
}

export interface DepacketizerOptions {
  /**
   * Withhold frames until the first keyframe, as after a loss (default `true`). A decoder that starts
   * on an inter frame only produces garbage, so the first withheld non-key frame raises `needsKeyframe`.
   */
  readonly requireInitialKeyframe?: boolean;
  /**
   * Drop a frame (as if a packet had been lost) once its payloads exceed this many bytes
   * (default 16 MiB), so a peer that never sets the marker bit nor changes the timestamp cannot make
   * the receiver buffer without bound.
   */
  readonly maxFrameBytes?: number;
}

/** What a codec reports about a complete frame. */
export interface AssembledFrame {
  readonly data: Buffer;
  readonly keyframe: boolean;
  /** The frame lets a decoder start afresh (ends a wait for a keyframe). */
  readonly refresh: boolean;
}

/**
 * Consecutive packets that all look older than the newest one before we conclude the sender restarted
 * its sequence numbers (rather than that the network reordered a burst) and resynchronise. Without it,
 * a restart that lands "behind" the old numbering would be ignored for up to 32768 packets.
 */
const STALE_PACKETS_BEFORE_RESYNC = 64;

const DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024;

/**
 * Base class of the video depacketizers: feed it RTP packets in arrival order with `push()`.
 *
 * A frame is emitted when its marker packet arrives or, for senders that omit the marker, when a
 * packet with a different RTP timestamp arrives (whichever comes first).
 *
 * Loss handling: a sequence-number gap (mod 2^16) or a payload that cannot be reassembled discards the
 * frame in progress, sets `needsKeyframe`, and withholds every later frame until one that refreshes
 * the decoder (a keyframe) arrives; emitting that frame clears `needsKeyframe`. The owner polls
 * `needsKeyframe` after `push()` and sends a PLI, rate-limiting as it sees fit (the flag stays set
 * until a keyframe is delivered). A packet whose sequence number is not newer than the newest one seen
 * (a duplicate or a late reordered packet) is ignored; by then its frame has been judged, so this
 * class expects a jitter buffer upstream if the network reorders.
 *
 * Payload buffers are referenced, not copied, until their frame is emitted: callers must not reuse
 * them for other data in the meantime.
 */
export abstract class RtpDepacketizer {
  readonly #maxFrameBytes: number;

  #lastSeq: number | undefined;
  #staleRun = 0;
  /** Packets may have been lost right before the next payload-bearing packet (or this is the first). */
  #resync = true;

  #frameOpen = false;
  #frameTimestamp = 0;
  #frameBroken = false;
  #frameBytes = 0;

  #awaitingKeyframe: boolean;
  #needsKeyframe = false;

  /**
   * Frames completed but not yet returned. `push()` returns one frame, yet a packet can complete two:
   * one that ends a marker-less frame by changing the timestamp and also carries the marker of its own
   * single-packet frame. The second waits here and comes out of the next `push()`, one packet late;
   * frames keep their order and at most one waits between calls.
   */
  readonly #ready: DepacketizedFrame[] = [];

  constructor(options: DepacketizerOptions = {}) {
    this.#maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES;
    this.#awaitingKeyframe = options.requireInitialKeyframe ?? true;
  }

  /** Set after loss (or an undecodable start) until a keyframe is delivered: time to send a PLI. */
  get needsKeyframe(): boolean {
    return this.#needsKeyframe;
  }

  /** Feed one RTP packet; returns a frame when one is complete and decodable. */
  push(packet: RtpPacketFields): DepacketizedFrame | undefined {
    const { payload, marker, sequenceNumber, timestamp } = packet;
    const seq = sequenceNumber & 0xffff;

    let lost = false;
    if (this.#lastSeq !== undefined) {
      // Serial-number arithmetic (RFC 3550 §A.1): forward distances under 2^15 are "newer".
      const delta = (seq - this.#lastSeq) & 0xffff;
      if (delta === 0 || delta >= 0x8000) {
        if (++this.#staleRun < STALE_PACKETS_BEFORE_RESYNC) return this.#ready.shift();
        lost = true;
      } else if (delta !== 1) {
        lost = true;
      }
    }
    this.#staleRun = 0;
    this.#lastSeq = seq;

    if (lost) {
      this.#markLoss();
      // The missing packets may have been this frame's tail even if the timestamp changes next.
      if (this.#frameOpen) this.#breakFrame();
      this.#resync = true;
    }

    if (this.#frameOpen && timestamp !== this.#frameTimestamp) this.#finishFrame();

    // Empty payloads are padding-only packets (bandwidth probing): they advance the sequence number
    // and nothing else.
    if (payload.length === 0) {
      if (marker && this.#frameOpen) this.#finishFrame();
      return this.#ready.shift();
    }

    const afterGap = this.#resync;
    this.#resync = false;

    if (!this.#frameOpen) {
      this.#frameOpen = true;
      this.#frameTimestamp = timestamp;
      this.#frameBroken = false;
      this.#frameBytes = 0;
      this.resetFrame();
      // After a gap we cannot tell whether this frame's first packets were among those lost, unless
      // this packet itself demonstrably starts a frame.
      if (afterGap && !this.startsFrame(payload)) this.#breakFrame();
    }

    if (!this.#frameBroken) {
      this.#frameBytes += payload.length;
      if (this.#frameBytes > this.#maxFrameBytes || !this.appendPayload(payload)) this.#breakFrame();
    }

    if (marker) this.#finishFrame();
    return this.#ready.shift();
  }

  /** Forget the frame in progress; called before the first payload of every frame. */
  protected abstract resetFrame(): void;

  /** Whether this (non-empty) payload is the first of a frame, judged from the payload alone. */
  protected abstract startsFrame(payload: Buffer): boolean;

  /** Add a non-empty payload to the frame in progress; `false` if it cannot be reassembled. */
  protected abstract appendPayload(payload: Buffer): boolean;

  /**
   * The frame in progress as one buffer: `undefined` when it holds no bitstream data, `null` when it
   * is incomplete (e.g. a fragment still lacks its end).
   */
  protected abstract assembleFrame(): AssembledFrame | null | undefined;

  #markLoss(): void {
    this.#needsKeyframe = true;
    this.#awaitingKeyframe = true;
  }

  #breakFrame(): void {
    this.#frameBroken = true;
    this.#markLoss();
    // Let go of the payloads now rather than holding them until the frame's end.
    this.resetFrame();
  }

  #finishFrame(): void {
    this.#frameOpen = false;
    if (this.#frameBroken) {
      this.resetFrame();
      return;
    }
    const frame = this.assembleFrame();
    this.resetFrame();
    if (frame === null) {
      this.#markLoss();
      return;
    }
    if (frame === undefined) return;
    if (this.#awaitingKeyframe) {
      if (!frame.refresh) {
        this.#needsKeyframe = true;
        return;
      }
      this.#awaitingKeyframe = false;
      this.#needsKeyframe = false;
    }
    this.#ready.push({ data: frame.data, keyframe: frame.keyframe, timestamp: this.#frameTimestamp });
  }
}
