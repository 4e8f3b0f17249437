/**
 * Writes one connection's RTP for one output track through a werift sender, owning the sequence
 * numbers (werift only offsets them) and the playout-delay header extension.
 */

import { RtpHeader, RtpPacket, type RTCRtpTransceiver } from 'werift';
import type { LatencyMode } from '../../protocol/messages.ts';
import { PLAYOUT_DELAY_URI } from './peer-factory.ts';

/**
 * playout-delay payload (http://www.webrtc.org/experiments/rtp-hdrext/playout-delay): 12-bit
 * min and max delay in 10 ms units. realtime: 0/0, render at once. smooth: 0/200 ms, the
 * receiver's jitter buffer adapts within that bound.
 */
const PLAYOUT_DELAY_PAYLOAD: Record<LatencyMode, Buffer> = {
  realtime: Buffer.from([0, 0, 0]),
  smooth: playoutDelayPayload(0, 200),
};

function playoutDelayPayload(minMs: number, maxMs: number): Buffer {
  const min = Math.round(minMs / 10) & 0xfff;
  const max = Math.round(maxMs / 10) & 0xfff;
  return Buffer.from([min >> 4, ((min & 0xf) << 4) | (max >> 8), max & 0xff]);
}

/** Seconds from the NTP epoch (1900) to the Unix epoch (1970). */
const NTP_UNIX_OFFSET_S = 2_208_988_800;

/**
 * 64-bit NTP time (RFC 3550 §4: seconds since 1900 . 32-bit binary fraction) of a moment given
 * in ms of `performance.now()`.
 */
export function ntpTimestamp(performanceMs: number): bigint {
  const unixMs = performance.timeOrigin + performanceMs;
  const seconds = Math.floor(unixMs / 1000);
  const fraction = Math.floor(((unixMs - seconds * 1000) / 1000) * 2 ** 32);
  return (BigInt(seconds + NTP_UNIX_OFFSET_S) << 32n) | BigInt(fraction >>> 0);
}

/** werift's sender fields that its RTCP sender reports are built from. */
interface SenderReportClock {
  ntpTimestamp: bigint;
}

export class RtpTrackSender {
  readonly #transceiver: RTCRtpTransceiver;
  #sequenceNumber = Math.floor(Math.random() * 0xffff);
  readonly #playoutDelayId: number | undefined;
  readonly #latencyMode: () => LatencyMode;
  #closed = false;

  /** @param latencyMode read per frame, so a session's mode change applies at once. */
  constructor(transceiver: RTCRtpTransceiver, latencyMode: () => LatencyMode = () => 'smooth') {
    this.#transceiver = transceiver;
    this.#latencyMode = latencyMode;
    this.#playoutDelayId = transceiver.headerExtensions.find((e) => e.uri === PLAYOUT_DELAY_URI)?.id;
  }

  /** Negotiated codec, lower-case short name (`h264`, `vp8`, `opus`), or undefined before negotiation. */
  get codec(): string | undefined {
    const mime = this.#transceiver.sender.codec?.mimeType ?? this.#transceiver.codecs[0]?.mimeType;
    return mime?.split('/')[1]?.toLowerCase();
  }

  get sender() {
    return this.#transceiver.sender;
  }

  /**
   * Sends one frame's payloads; the marker bit goes on the last one. Returns the RTP timestamp
   * as the client sees it (werift adds a per-sender random offset), or undefined if nothing left.
   *
   * `mediaTimeMs` (ms of `performance.now()`) is the moment `rtpTimestamp` stands for — when the
   * frame was taken from the model's queue (video) or is due to play (audio). It goes into this
   * stream's RTCP sender reports, which is how a receiver lines audio up with video: every
   * track of a session maps its RTP clock to this one wall clock. werift 0.24.4 writes a broken
   * NTP time (the decimal digits of the fraction as an integer: whole-second resolution, so
   * lip-sync could be off by up to a second) paired with the send time; it is replaced here,
   * synchronously after each sendRtp, before werift's RTCP loop can read it.
   */
  sendFrame(payloads: readonly Buffer[], rtpTimestamp: number, mediaTimeMs: number = performance.now()): number | undefined {
    if (this.#closed) return undefined;
    const last = payloads.length - 1;
    let wireTimestamp: number | undefined;
    payloads.forEach((payload, index) => {
      const header = new RtpHeader({
        sequenceNumber: this.#sequenceNumber,
        timestamp: rtpTimestamp >>> 0,
        marker: index === last,
        payloadType: 0, // werift writes the negotiated payload type
      });
      this.#sequenceNumber = (this.#sequenceNumber + 1) & 0xffff;
      if (this.#playoutDelayId !== undefined && index === 0) {
        header.extension = true;
        header.extensions = [{ id: this.#playoutDelayId, payload: PLAYOUT_DELAY_PAYLOAD[this.#latencyMode()] }];
      }
      // sendRtp is async only to await the socket; a failure means the peer is gone, which the
      // connection notices through its state — nothing to do per packet. It rewrites the header
      // (SSRC, payload type, timestamp offset) synchronously, before its first await.
      this.#transceiver.sender.sendRtp(new RtpPacket(header, payload)).catch(() => {});
      if (header.ssrc !== 0) wireTimestamp = header.timestamp;
    });
    if (wireTimestamp !== undefined) (this.#transceiver.sender as unknown as SenderReportClock).ntpTimestamp = ntpTimestamp(mediaTimeMs);
    return wireTimestamp;
  }

  close(): void {
    this.#closed = true;
  }
}
