/**
 * The werift implementation of the media port (media-transceiver.ts): one werift
 * `RTCRtpTransceiver` seen as a `MediaTransceiver`. Its senders are the runtime's own RTP path
 * (send/rtp-track-sender.ts); everything else reads or subscribes to werift's objects.
 *
 * One wrapper per werift transceiver and peer (werift-peer-connection.ts keeps them), so the
 * session may key its state by the wrapper as it did by the transceiver.
 */

import type { RTCRtpTransceiver } from 'werift';
import type { H264Profile } from '../media/video-encoder.ts';
import { negotiatedH264Profile } from './signalling/answer-offer.ts';
import { RtpTrackSender } from './send/rtp-track-sender.ts';
import { existingTransportCongestion } from './send/transport-feedback.ts';
import type { MediaSender, MediaSenderOptions, MediaTransceiver, ReceivedRtp, Unsubscribe } from './media-transceiver.ts';

/** RTCP payload-specific feedback (RFC 4585) and its PLI / FIR formats (RFC 5104). */
const RTCP_PAYLOAD_SPECIFIC_FEEDBACK = 206;
const PLI_FORMAT = 1;
const FIR_FORMAT = 4;

/** The parts of a werift RTP packet an input binding reads. */
interface WeriftRtp {
  readonly header: { payloadType: number; marker: boolean; sequenceNumber: number; timestamp: number; ssrc: number };
  readonly payload: Buffer;
}

/** A remote track of a werift receiver: where its RTP packets arrive. */
interface WeriftRemoteTrack {
  readonly onReceiveRtp: { subscribe: (fn: (rtp: WeriftRtp) => void) => { unSubscribe: () => void } };
}

export class WeriftMediaTransceiver implements MediaTransceiver {
  /** The werift transceiver itself, for the adapter's signalling calls (never the session's). */
  readonly werift: RTCRtpTransceiver;

  constructor(transceiver: RTCRtpTransceiver) {
    this.werift = transceiver;
  }

  get senderSsrc(): number {
    return this.werift.sender.ssrc;
  }

  createSender(options: MediaSenderOptions): MediaSender {
    return new RtpTrackSender(this.werift, options);
  }

  h264Profile(): H264Profile {
    return negotiatedH264Profile(this.werift);
  }

  estimatedBitrateKbps(): number | undefined {
    // A peer that sends transport-wide feedback: the connection's own estimate
    // (send/transport-feedback.ts), this track's share of it where the connection carries several.
    const congestion = existingTransportCongestion(this.werift.sender.dtlsTransport as object | undefined);
    if (congestion?.active()) return (congestion.controller.targetBps * congestion.shareOf(this.werift.sender)) / 1000;
    const remb = this.werift.sender.receiverEstimatedMaxBitrate;
    return remb > 0n ? Number(remb) / 1000 : undefined;
  }

  onPictureLoss(listener: () => void): Unsubscribe {
    return this.werift.sender.onPictureLossIndication.subscribe(listener).unSubscribe;
  }

  onPictureLossFeedback(listener: (mediaSsrc: number) => void): Unsubscribe {
    return this.werift.receiver.onRtcp.subscribe((packet) => {
      const feedback = (packet as { type?: number; feedback?: { count?: number; mediaSsrc?: number } }).feedback;
      if ((packet as { type?: number }).type !== RTCP_PAYLOAD_SPECIFIC_FEEDBACK || !feedback) return;
      if (feedback.count !== PLI_FORMAT && feedback.count !== FIR_FORMAT) return;
      listener(feedback.mediaSsrc ?? -1);
    }).unSubscribe;
  }

  onRtp(listener: (packet: ReceivedRtp) => void): Unsubscribe {
    const unsubscribes: Unsubscribe[] = [];
    const onRtp = (rtp: WeriftRtp): void => {
      const { header } = rtp;
      listener({
        payloadType: header.payloadType,
        marker: header.marker,
        sequenceNumber: header.sequenceNumber,
        timestamp: header.timestamp,
        ssrc: header.ssrc,
        payload: rtp.payload,
      });
    };
    const subscribeTrack = (remote: WeriftRemoteTrack): void => {
      unsubscribes.push(remote.onReceiveRtp.subscribe(onRtp).unSubscribe);
    };
    for (const remote of this.werift.receiver.tracks) subscribeTrack(remote);
    unsubscribes.push(this.werift.onTrack.subscribe((remote) => subscribeTrack(remote)).unSubscribe);
    return () => {
      for (const unsubscribe of unsubscribes) unsubscribe();
    };
  }

  mimeType(payloadType: number): string | undefined {
    return this.werift.codecs.find((c) => c.payloadType === payloadType)?.mimeType.toLowerCase();
  }

  requestKeyframe(ssrc: number): void {
    void this.werift.receiver.sendRtcpPLI(ssrc).catch(() => {});
  }
}
