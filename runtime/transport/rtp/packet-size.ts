/**
 * How large our RTP packets may be: the packetizers' payload budget, derived from the size of a
 * whole packet on the wire (rtp-track-sender.ts writes the header, extensions and SRTP tag).
 */

/** RTP fixed header bytes (RFC 3550 §5.1) with no CSRCs. */
export const RTP_HEADER_LENGTH = 12;

/**
 * The largest datagram an RTP packet of ours may be on the wire (spec: "RTP packets ≤ 1200
 * bytes"): header, header extensions, payload and the SRTP authentication tag together. 1200
 * stays under the path MTU of tunnels and TURN relays that a 1500-byte one would not.
 */
export const MAX_RTP_PACKET_BYTES = 1200;
/**
 * The extension block we write, at its largest (a frame's first packet): one-byte form (RFC
 * 8285), `mid` (at most 16 bytes, the one-byte form's limit), playout-delay (3 bytes) and the
 * transport-wide sequence number (2 bytes; on every packet where transport-cc is negotiated),
 * each with its 1-byte element header, padded to 32-bit words, after the 4-byte block header:
 * 4 + ⌈(17 + 4 + 3) / 4⌉ × 4 = 28.
 */
export const MAX_EXTENSION_BLOCK_BYTES = 28;
/** The longest SRTP tag of the profiles werift negotiates (AEAD_AES_128_GCM: 16; HMAC_SHA1_80: 10). */
const MAX_SRTP_TAG_BYTES = 16;
/**
 * What a packet carries beyond itself elsewhere, at most: resent on the RTX stream (RFC 4588), the
 * original sequence number (2 bytes) before the payload; covered by a FlexFEC repair packet
 * (send/flexfec.ts), the repair packet is the FlexFEC header (20 bytes: one SSRC, a 15-bit mask)
 * and everything after the media packet's fixed header, under a fixed header of its own.
 */
const FLEXFEC_HEADER_BYTES = 20;
/**
 * Payload bytes per packet the packetizers may use so every packet fits MAX_RTP_PACKET_BYTES on
 * the wire, whichever packet of a frame it is (the first carries the extensions), whichever
 * viewer it goes to (a frame is packetized once for every viewer, whose mids and SRTP profiles
 * may differ), when it is resent on the RTX stream, and the FlexFEC packet that covers it:
 * 1200 − 12 − 28 − 16 − 20 = 1124.
 */
export const MAX_RTP_PAYLOAD_BYTES =
  MAX_RTP_PACKET_BYTES - RTP_HEADER_LENGTH - MAX_EXTENSION_BLOCK_BYTES - MAX_SRTP_TAG_BYTES - FLEXFEC_HEADER_BYTES;
