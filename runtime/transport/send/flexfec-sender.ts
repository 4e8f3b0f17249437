/**
 * One video sender's FlexFEC stream (flexfec.ts has the format and why): repair packets on the
 * FEC SSRC the answer announced (signalling/flexfec-negotiation.ts), with the stream's own
 * sequence numbers and SRTP index. Never resent (libwebrtc's receiver does not ask).
 *
 * No transport-wide sequence number: a receiver that offers flexfec-03 but drops the packets
 * before its feedback (the libwebrtc in @roamhq/wrtc reports none of them) would have them all
 * counted lost, and the loss-based estimate fell by a quarter and held the model's frames for
 * seconds (test/e2e/loss-recovery.test.ts, before this). So the congestion controller does not
 * see their bytes; the caller sends them only with headroom over the media (rtp-track-sender.ts).
 * They leave behind whatever the connection's pacer holds, in order.
 *
 * Which packets a repair covers is the caller's: each frame's packets, in groups of at most
 * `FEC_GROUP_PACKETS`, one repair packet per group.
 */

import type { PacketWrite } from './packet-pacer.ts';
import { flexfecPayload, type FecProtected } from './flexfec.ts';
import { RTP_HEADER_LENGTH } from '../rtp/packet-size.ts';
import type { SrtpStream } from './srtp-protector.ts';
import { existingTransportCongestion } from './transport-feedback.ts';
import type { FlexfecStream } from '../signalling/flexfec-negotiation.ts';

/**
 * Media packets per repair packet: one loss in each group of this many is rebuilt without a round
 * trip (at 2 % loss, two in one group ~1.5 % of the time); 1 / 8 of the packets more.
 */
export const FEC_GROUP_PACKETS = 8;

export interface FlexfecSenderOptions {
  /** Writes a protected packet to the connection (the media sender's own write). */
  readonly write: PacketWrite;
}

export class FlexfecSender {
  readonly #options: FlexfecSenderOptions;
  #sequenceNumber = Math.floor(Math.random() * 0x10000);
  #rolloverCounter = 0;
  /** Repair packets sent so far (tests, diagnostics). */
  sent = 0;

  constructor(options: FlexfecSenderOptions) {
    this.#options = options;
  }

  /**
   * The repair packets' payloads for one frame's `packets` of media stream `mediaSsrc` (in order,
   * clear; taken before SRTP): one per group of at most FEC_GROUP_PACKETS, the groups as even as
   * they can be.
   */
  repairs(mediaSsrc: number, packets: readonly FecProtected[]): Buffer[] {
    const groups = Math.ceil(packets.length / FEC_GROUP_PACKETS);
    const out: Buffer[] = [];
    for (let g = 0; g < groups; g++) {
      const from = Math.floor((g * packets.length) / groups);
      const to = Math.floor(((g + 1) * packets.length) / groups);
      out.push(flexfecPayload(mediaSsrc, packets.slice(from, to)));
    }
    return out;
  }

  /**
   * Sends repair packets (from `repairs`) after the frame's media. `timestamp`: the frame's RTP
   * timestamp (the receiver does not read a repair packet's). Returns the bytes sent.
   */
  send(srtp: SrtpStream, fec: FlexfecStream, repairs: readonly Buffer[], timestamp: number): number {
    let bytes = 0;
    for (const payload of repairs) bytes += this.#send(srtp, fec, payload, timestamp);
    return bytes;
  }

  #send(srtp: SrtpStream, fec: FlexfecStream, payload: Buffer, timestamp: number): number {
    const write = this.#options.write;
    const protector = srtp.protector;
    const headerLength = RTP_HEADER_LENGTH;
    const size = headerLength + payload.length + protector.tagLength;
    const out = Buffer.allocUnsafe(size);
    out[0] = 0x80;
    out[1] = fec.payloadType & 0x7f;
    out.writeUInt16BE(this.#sequenceNumber, 2);
    out.writeUInt32BE(timestamp >>> 0, 4);
    out.writeUInt32BE(fec.ssrc >>> 0, 8);
    // Behind what the connection's pacer holds (order kept); the caller sends none while it paces.
    const congestion = existingTransportCongestion(srtp.transport);
    const at = congestion ? congestion.pacer.reserve(size, undefined) : 0;
    const index = this.#rolloverCounter * 0x10000 + this.#sequenceNumber;
    protector.protect(fec.ssrc, [{ packet: out, headerLength, payload, index }]);
    this.#sequenceNumber = (this.#sequenceNumber + 1) & 0xffff;
    if (this.#sequenceNumber === 0) this.#rolloverCounter = (this.#rolloverCounter + 1) >>> 0;
    // The pacer writes it at once if it is due and nothing waits before it.
    if (congestion) congestion.pacer.dispatch(at, out, write);
    else write(out);
    this.sent++;
    return size;
  }
}
