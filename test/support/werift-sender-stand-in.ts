/**
 * Stand-ins for the werift objects the runtime's RTP send path (runtime/transport/send/) reads:
 * a connected DTLS transport whose socket writes go to an array, an SRTP key shared with a
 * receiver-side session (to decrypt what was sent), and the counters werift's RTCRtpSender keeps.
 * For the unit tests of that path; real peers are in the e2e tests.
 */

import { randomBytes } from 'node:crypto';
import { SrtpSession, type RTCRtpTransceiver } from 'werift';
import { SRTP_AEAD_AES_128_GCM } from '../../runtime/transport/send/srtp-protector.ts';

/** A connected DTLS transport (SRTP `profile`): every datagram written to it is copied into `wire` as it leaves; `receiver` decrypts them. */
export function connectedTransport(profile: number): { transport: object; wire: Buffer[]; receiver: SrtpSession } {
  const keys = { localMasterKey: randomBytes(16), localMasterSalt: randomBytes(profile === SRTP_AEAD_AES_128_GCM ? 12 : 14) };
  const keyed = { ...keys, remoteMasterKey: keys.localMasterKey, remoteMasterSalt: keys.localMasterSalt };
  const srtp = new SrtpSession({ keys: keyed, profile: profile as 1 });
  const receiver = new SrtpSession({ keys: keyed, profile: profile as 1 });
  const wire: Buffer[] = [];
  const connection = {
    nominated: { protocol: {}, remoteAddr: ['192.0.2.1', 9] }, // not plain UDP: werift's path, i.e. `send`
    canSendApplicationData: () => true,
    send: (packet: Buffer) => {
      wire.push(Buffer.from(packet)); // what left at that moment
      return Promise.resolve();
    },
  };
  const transport = { state: 'connected', srtpStarted: true, srtp, iceTransport: { connection }, bytesSent: 0, packetsSent: 0 };
  return { transport, wire, receiver };
}

/** The counters werift's RTCRtpSender keeps (and its sender reports and stats read), at their start. */
export function senderCounters() {
  return {
    rtcpRunning: true,
    timestampOffset: 0,
    octetCount: 0,
    packetCount: 0,
    headerBytesSent: 0,
    retransmittedPacketsSent: 0,
    retransmittedBytesSent: 0,
    receiverEstimatedMaxBitrate: 0n,
  };
}

/** An RTP packet's header length (fixed header, extension block). */
export const rtpHeaderLengthOf = (packet: Buffer): number => (packet[0]! & 0x10 ? 16 + packet.readUInt16BE(14) * 4 : 12);

/** The one-byte-form extension elements of an RTP packet (SRTP leaves the header clear), by id. */
export function extensionsOf(packet: Buffer): Map<number, Buffer> {
  const elements = new Map<number, Buffer>();
  for (let at = 16; at < rtpHeaderLengthOf(packet);) {
    if (packet[at] === 0) {
      at++;
      continue;
    }
    const id = packet[at]! >> 4;
    const length = (packet[at]! & 0x0f) + 1;
    elements.set(id, packet.subarray(at + 1, at + 1 + length));
    at += 1 + length;
  }
  return elements;
}

/** A NACK as werift's sender hands it on (the lost sequence numbers). */
export type NackListener = (nack: { header: { length?: number }; lost: number[] }) => void;

/**
 * A video transceiver stand-in on `transport`: the sender (`ssrc`, `codec`, an RTX SSRC if
 * given, werift's counters), its header extensions and negotiated codecs; `nack` delivers a NACK
 * to whoever subscribed (the RTP sender).
 */
export function videoTransceiverStandIn(
  transport: object,
  options: {
    readonly ssrc: number;
    readonly codec: { readonly payloadType: number; readonly mimeType: string };
    readonly rtxSsrc?: number;
    readonly headerExtensions: ReadonlyArray<{ readonly id: number; readonly uri: string }>;
    readonly codecs?: ReadonlyArray<{ readonly payloadType: number; readonly mimeType: string; readonly parameters?: string }>;
  },
): { transceiver: RTCRtpTransceiver; nack: (lost: number[]) => void } {
  let onNack: NackListener | undefined;
  const transceiver = {
    sender: {
      kind: 'video',
      ssrc: options.ssrc,
      ...(options.rtxSsrc === undefined ? {} : { rtxSsrc: options.rtxSsrc }),
      codec: options.codec,
      dtlsTransport: transport,
      onGenericNack: {
        subscribe: (listener: NackListener) => {
          onNack = listener;
          return { unSubscribe: () => {} };
        },
      },
      ...senderCounters(),
    },
    headerExtensions: options.headerExtensions,
    mid: '0',
    codecs: options.codecs ?? [options.codec],
  } as unknown as RTCRtpTransceiver;
  return { transceiver, nack: (lost) => onNack!({ header: {}, lost }) };
}
