/**
 * The transport port's media half: one negotiated m-line of a peer (`MediaTransceiver`) and the
 * sender of one output track on it (`MediaSender`), with no WebRTC library's types. The session's
 * media bindings (runtime/session/media-bindings.ts) attach the model's tracks through these; the
 * werift adapter (werift-media-transceiver.ts) implements them.
 *
 * Events are subscriptions that return their own unsubscribe, because a binding is detached as a
 * unit (a renegotiation in place may end one track while the peer lives on).
 */

import type { H264Profile } from '../media/video-encoder.ts';
import type { LatencyMode } from '../../protocol/messages.ts';
import type { RetransmissionRefusal, UnaskedResend } from './send/loss-recovery.ts';
import type { ProbeOutcome } from './send/bandwidth-probe.ts';

/** One RTP packet a client sent on an input m-line (header fields the depacketizers read). */
export interface ReceivedRtp {
  readonly payloadType: number;
  readonly marker: boolean;
  readonly sequenceNumber: number;
  readonly timestamp: number;
  readonly ssrc: number;
  readonly payload: Buffer;
}

/** Stops a subscription. */
export type Unsubscribe = () => void;

export interface MediaSenderOptions {
  /** Read per frame, so a session's mode change applies at once. Default `smooth`. */
  readonly latencyMode?: () => LatencyMode;
  /** Called with the number of packets (and their bytes) resent, for a NACK or unasked (for metrics). */
  readonly onRetransmit?: (packets: number, bytes: number) => void;
  /** Called with the number of packets resent that no NACK asked for, by reason (also in `onRetransmit`; for metrics). */
  readonly onUnaskedResends?: (reason: UnaskedResend, packets: number) => void;
  /** Called with the number of FlexFEC repair packets sent after a frame (for metrics). */
  readonly onRepairPackets?: (packets: number) => void;
  /** Called with the NACKed packets not resent, by reason (for metrics). */
  readonly onRetransmissionsRefused?: (reason: RetransmissionRefusal, packets: number) => void;
  /** Called when a picture-loss report is ignored: a keyframe was asked for too recently. */
  readonly onKeyframeRequestThrottled?: () => void;
  /** This track's weight when its connection's estimate is shared among several video tracks (its configured rate). */
  readonly shareWeight?: number;
  /** Called when a bandwidth probe this track padded ended, with its outcome (for metrics). */
  readonly onProbe?: (outcome: ProbeOutcome) => void;
  /**
   * Called after every frame handed to `sendFrame`, sent or not (not connected yet, closed):
   * what `media_stats` counts as frames sent to the client.
   */
  readonly onFrameSent?: () => void;
}

/** Sends one output track's frames to one client. */
export interface MediaSender {
  /** Negotiated codec, lower-case short name (`h264`, `vp8`, `opus`), or undefined before negotiation. */
  readonly codec: string | undefined;
  /**
   * Sends one frame's payloads (already packetized). Returns the RTP timestamp as the client
   * sees it, or undefined when nothing could be sent. `mediaTimeMs` (ms of `performance.now()`):
   * the moment `rtpTimestamp` stands for, for the sender reports that line tracks up.
   */
  sendFrame(payloads: readonly Buffer[], rtpTimestamp: number, mediaTimeMs?: number): number | undefined;
  /** A receiver reported picture loss: true if a keyframe should be made for it (false: throttled). */
  pictureLost(): boolean;
  /** Who makes a keyframe when this sender leaves a NACKed loss unrepaired. */
  onKeyframeNeeded(listener: (() => void) | undefined): void;
  close(): void;
}

/** One negotiated m-line of a peer: its sender side for an output track, its receiver side for an input. */
export interface MediaTransceiver {
  /** The SSRC the runtime sends this m-line's media with. */
  readonly senderSsrc: number;
  /** A sender for the output track bound here. */
  createSender(options: MediaSenderOptions): MediaSender;
  /** The H.264 profile the client accepted on this m-line (when it sends H.264). */
  h264Profile(): H264Profile;
  /**
   * What the path to the client can take, kbit/s: the connection's congestion controller's target
   * when the client sends transport-wide feedback (transport-cc), else its receiver-estimated
   * maximum bitrate (REMB); undefined before either came.
   */
  estimatedBitrateKbps(): number | undefined;
  /** Picture loss (PLI) the transport routed to this m-line's sender. */
  onPictureLoss(listener: () => void): Unsubscribe;
  /**
   * Picture-loss feedback (PLI, FIR) arriving on this m-line's receiver, with the media SSRC it
   * is about — which may be another m-line's sender (see media-bindings.ts for why).
   */
  onPictureLossFeedback(listener: (mediaSsrc: number) => void): Unsubscribe;
  /** Every RTP packet the client sends on this m-line, on any of its remote tracks (now or later). */
  onRtp(listener: (packet: ReceivedRtp) => void): Unsubscribe;
  /** The lower-case MIME type (`video/h264`) a payload type stands for on this m-line. */
  mimeType(payloadType: number): string | undefined;
  /** Asks the client for a keyframe of the stream `ssrc` it sends here (PLI); failures ignored. */
  requestKeyframe(ssrc: number): void;
}
