/** RTP payload formats Arclight sends and receives itself (werift has no H.264/H.265 packetizer). */
export { H264Packetizer, splitAnnexB, h264NalType } from './h264-packetizer.ts';
export { H264Depacketizer } from './h264-depacketizer.ts';
export { H265Packetizer, h265NalType, h265LayerId, h265Tid } from './h265-packetizer.ts';
export { H265Depacketizer } from './h265-depacketizer.ts';
export { Vp8Packetizer } from './vp8-packetizer.ts';
export { Vp8Depacketizer, parseVp8PayloadDescriptor, type Vp8PayloadDescriptor } from './vp8-depacketizer.ts';
export {
  RtpDepacketizer,
  type DepacketizedFrame,
  type DepacketizerOptions,
  type RtpPacketFields,
  type AssembledFrame,
} from './depacketized-frame.ts';
export { MAX_RTP_PACKET_BYTES, MAX_RTP_PAYLOAD_BYTES } from './packet-size.ts';
