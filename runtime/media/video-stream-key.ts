/**
 * The streams an output video track encodes: one per codec its viewers need (and for H.264, per
 * profile), each with the packetizer and the 90 kHz RTP clock its frames go out with. Pure
 * functions of the stream, shared by the track, its encoders and its black keyframes.
 */
import { H264Packetizer } from '../transport/rtp/h264-packetizer.ts';
import { H265Packetizer } from '../transport/rtp/h265-packetizer.ts';
import { Vp8Packetizer } from '../transport/rtp/vp8-packetizer.ts';
import { MAX_RTP_PAYLOAD_BYTES } from '../transport/rtp/packet-size.ts';
import type { H264Profile, VideoCodec } from './video-encoder.ts';

/**
 * One encode per distinct stream a track's viewers need: the codec, and for H.264 the profile
 * (a client that offers only High gets High; every other H.264 viewer shares Constrained Baseline).
 */
export type VideoStreamKey = 'h264' | 'h264-high' | 'h265' | 'vp8';

/** The stream a viewer with this codec (and H.264 profile) watches. */
export function streamKey(sink: { readonly codec: VideoCodec; readonly h264Profile?: H264Profile }): VideoStreamKey {
  return sink.codec === 'h264' && sink.h264Profile === 'high' ? 'h264-high' : sink.codec;
}

/** The encoder settings that make a stream: its codec, and High profile for `h264-high`. */
export function streamFormat(key: VideoStreamKey): { codec: VideoCodec; profile?: H264Profile } {
  return key === 'h264-high' ? { codec: 'h264', profile: 'high' } : { codec: key };
}

/**
 * RTP payloads for one encoded frame of `codec`, small enough that each whole packet on the wire
 * (header, extensions, SRTP tag) stays within MAX_RTP_PACKET_BYTES (rtp/packet-size.ts).
 */
export function createPacketizer(codec: VideoCodec): { packetize(data: Buffer): Buffer[] } {
  switch (codec) {
    case 'h264':
      return new H264Packetizer(MAX_RTP_PAYLOAD_BYTES);
    case 'h265':
      return new H265Packetizer(MAX_RTP_PAYLOAD_BYTES);
    case 'vp8':
      return new Vp8Packetizer(MAX_RTP_PAYLOAD_BYTES);
  }
}

/** 90 kHz RTP clock from microseconds, wrapping at 2^32. */
export function toRtpTimestamp(timestampUs: number): number {
  return Math.floor((timestampUs * 90) / 1000) % 0x1_0000_0000;
}
