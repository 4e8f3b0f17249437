/**
 * One video sender's RTX stream (RFC 4588), where the receiver negotiated it for the codec being
 * sent: a resend of a kept packet becomes a new packet on a stream of its own — its own SSRC,
 * payload type, sequence numbers and SRTP index, the original sequence number before the payload,
 * and a transport-wide sequence number of its own — so protecting it reuses no keystream (the
 * original keeps its index and its transport-wide number) and the congestion controller sees the
 * resend's bytes and arrival. The same packets pad bandwidth probes (bandwidth-probe.ts).
 *
 * Split from rtp-track-sender.ts, which keeps the media stream, the send history and the rules
 * of which NACKs are answered; this file only builds, numbers, protects and sends RTX packets.
 */

import type { RTCRtpTransceiver } from 'werift';
import type { PacketWrite } from './packet-pacer.ts';
import { extensionElementAt, rtpHeaderLength } from './rtp-header.ts';
import type { SrtpStream } from './srtp-protector.ts';
import { transportCongestion, type ReportedLossListener } from './transport-feedback.ts';

/** Who hears if a resend is reported lost, and which copy of its packet it is. */
export interface ResendCopy {
  readonly listener: ReportedLossListener;
  readonly copy: number;
}

/** The RTX payload's original sequence number (RFC 4588 §4). */
export const RTX_OSN_BYTES = 2;

/** Where a sender resends NACKed packets when RTX is negotiated. */
interface RtxStream {
  readonly payloadType: number;
  readonly ssrc: number;
}

/** The `apt` (associated payload type) of an RTX codec's fmtp parameters, if any. */
function aptOf(parameters: string | undefined): number | undefined {
  const match = /(?:^|;)\s*apt=(\d+)/.exec(parameters ?? '');
  return match ? Number(match[1]) : undefined;
}

export interface RtxSenderOptions {
  /** The transport-wide sequence number's extension id, when negotiated. */
  readonly transportWideId: number | undefined;
  /** Writes a protected packet to the connection (the media sender's own write). */
  readonly write: PacketWrite;
}

export class RtxSender {
  readonly #transceiver: RTCRtpTransceiver;
  readonly #options: RtxSenderOptions;
  #sequenceNumber = Math.floor(Math.random() * 0x10000);
  /** SRTP rollover counter of the RTX stream. */
  #rolloverCounter = 0;
  /**
   * The RTX stream found for a codec and the sender's RTX SSRC (looked up again when either
   * changes): asked for on every frame, so nothing is allocated when they have not.
   */
  #for: { readonly codec: object; readonly ssrc: number | undefined; readonly stream: RtxStream | undefined } | undefined;

  constructor(transceiver: RTCRtpTransceiver, options: RtxSenderOptions) {
    this.#transceiver = transceiver;
    this.#options = options;
  }

  /**
   * The RTX payload type and SSRC for the codec being sent, when the receiver negotiated RTX for
   * it (`a=rtpmap:<pt> rtx/90000`, `a=fmtp:<pt> apt=<codec's pt>`; werift announced the SSRC in
   * the answer's `a=ssrc-group:FID <media> <rtx>`), else undefined: resend on the media stream.
   */
  stream(): RtxStream | undefined {
    const sender = this.#transceiver.sender;
    const codec = sender.codec;
    if (codec === undefined) return undefined;
    const ssrc = (sender as unknown as { rtxSsrc?: number }).rtxSsrc;
    if (this.#for?.codec !== codec || this.#for.ssrc !== ssrc) {
      const payloadType = this.#transceiver.codecs.find(
        (c) => c.mimeType.toLowerCase().endsWith('/rtx') && aptOf(c.parameters) === codec.payloadType,
      )?.payloadType;
      this.#for = { codec, ssrc, stream: payloadType === undefined || ssrc === undefined ? undefined : { payloadType, ssrc } };
    }
    return this.#for.stream;
  }

  /**
   * Sends the RTX packet resending `packet` (as it left, SRTP-protected, media sequence number
   * `sequenceNumber`, SRTP index `originalIndex`): its header and extensions (mid, playout-delay)
   * with the RTX payload type (the marker kept), the RTX stream's next sequence number and SSRC
   * and a new transport-wide sequence number; the payload is the original sequence number, then
   * the original's payload (decrypted); protected under the RTX SSRC and its own index. It leaves
   * at once, or behind what the connection's pacer holds (the order it was numbered in); `paced`:
   * at the pacer's rate while the path is the limit (a resend), else not (a probe's padding,
   * which paces itself). `resend` (a resend; a probe's padding is not missed): who hears if the
   * connection's feedback reports it lost, as which copy. Returns its size.
   */
  send(
    srtp: SrtpStream,
    rtx: RtxStream,
    packet: Buffer,
    sequenceNumber: number,
    originalIndex: number,
    paced: boolean,
    resend?: ResendCopy,
  ): number {
    const { write, transportWideId } = this.#options;
    const protector = srtp.protector;
    const headerLength = rtpHeaderLength(packet);
    const payloadLength = packet.length - headerLength - protector.tagLength;
    const payload = Buffer.allocUnsafe(RTX_OSN_BYTES + payloadLength);
    payload.writeUInt16BE(sequenceNumber, 0);
    protector.decrypt(this.#transceiver.sender.ssrc, packet, headerLength, originalIndex, payload, RTX_OSN_BYTES);
    const size = headerLength + payload.length + protector.tagLength;
    const out = Buffer.allocUnsafe(size);
    packet.copy(out, 0, 0, headerLength);
    out[1] = (packet[1]! & 0x80) | rtx.payloadType;
    out.writeUInt16BE(this.#sequenceNumber, 2);
    out.writeUInt32BE(rtx.ssrc, 8);
    const sequenceAt = transportWideId === undefined ? undefined : extensionElementAt(out, headerLength, transportWideId);
    // Numbered in the order packets leave, like media: behind what the pacer holds, if it holds any.
    const congestion = sequenceAt === undefined ? undefined : transportCongestion(srtp.transport);
    const at = congestion ? congestion.pacer.reserve(size, paced ? congestion.pacingRateBps() : undefined) : 0;
    if (congestion && sequenceAt !== undefined)
      out.writeUInt16BE(congestion.send(size, at, resend?.listener, sequenceNumber, resend?.copy), sequenceAt);
    const index = this.#rolloverCounter * 0x10000 + this.#sequenceNumber;
    protector.protect(rtx.ssrc, [{ packet: out, headerLength, payload, index }]);
    this.#sequenceNumber = (this.#sequenceNumber + 1) & 0xffff;
    if (this.#sequenceNumber === 0) this.#rolloverCounter = (this.#rolloverCounter + 1) >>> 0;
    // The pacer writes it at once if it is due and nothing waits before it.
    if (congestion) congestion.pacer.dispatch(at, out, write);
    else write(out);
    return size;
  }
}
