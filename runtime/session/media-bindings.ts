/**
 * What each connection of a session has attached to the session's tracks: for an output track,
 * the connection's sink on the track (fed through a sender the connection makes), for an input
 * track, the receiver that decodes what the connection publishes. Attached per binding of the
 * connection's peer and detached per track, because a renegotiation in place may add or end one
 * track while the others go on.
 *
 * Only the transport port (runtime/transport/) is seen here, never werift: a binding's
 * transceiver gives senders, picture-loss reports and received RTP.
 */

import { ArclightError } from '../../protocol/errors.ts';
import { encodeFrameMetadata } from '../../protocol/frame-metadata.ts';
import type { TrackCapability } from '../../protocol/capabilities.ts';
import type { JsonValue } from '../../protocol/json-schema.ts';
import type { LatencyMode } from '../../protocol/messages.ts';
import type { Logger } from '../../server-kit/log.ts';
import type { RuntimeMetrics } from '../metrics.ts';
import type { TrackSpec } from '../model/definition.ts';
import { AudioReceiver } from '../media/audio-receiver.ts';
import type { AudioFrame, VideoFrame } from '../media/frames.ts';
import type { AudioSink } from '../media/output-audio-track.ts';
import type { VideoSink } from '../media/output-video-track.ts';
import { VideoReceiver } from '../media/video-receiver.ts';
import type { MediaTransceiver, ReceivedRtp } from '../transport/media-transceiver.ts';
import type { MediaBinding } from '../transport/peer-connection.ts';
import type { Connection } from './connection.ts';
import type { SessionTracks } from './session-tracks.ts';

/** What one connection has attached to one of the session's tracks, detached as a unit. */
interface TrackAttachment {
  /** Output tracks: the connection's sink. */
  sink?: VideoSink | AudioSink;
  readonly receivers: Array<VideoReceiver | AudioReceiver>;
  readonly disposers: Array<() => void>;
}

/** What one connection has attached to the session's tracks: per track, so a renegotiation in place can change one. */
interface MediaAttachment {
  readonly tracks: Map<string, TrackAttachment>;
  /** Picture loss handlers of the connection's output video senders, by sender SSRC (see bind). */
  readonly pictureLossBySsrc: Map<number, () => void>;
}

export interface MediaBindingsOptions {
  readonly tracks: SessionTracks;
  /** The model's declared tracks (what an input receiver decodes to), as the model declares them now. */
  readonly spec: (track: string) => TrackSpec | undefined;
  /** The session's tracks as clients see them (for `unknown_track` answers). */
  readonly capabilities: readonly TrackCapability[];
  readonly log: Logger;
  readonly metrics?: RuntimeMetrics | undefined;
  /** The session's latency mode, read per frame. */
  readonly latencyMode: () => LatencyMode;
  /** Whether the session has ended (packets arriving after that are dropped). */
  readonly ended: () => boolean;
}

export class MediaBindings {
  readonly #options: MediaBindingsOptions;
  readonly #tracks: SessionTracks;
  readonly #attachments = new Map<Connection, MediaAttachment>();

  constructor(options: MediaBindingsOptions) {
    this.#options = options;
    this.#tracks = options.tracks;
  }

  /**
   * Attaches output sinks and input receivers for these bindings of a connection's peer: all of
   * a freshly negotiated peer's, or those a renegotiation in place adds (beside what is there).
   */
  bind(connection: Connection, bindings: readonly MediaBinding[], pausedTracks: ReadonlySet<string>): void {
    let attachment = this.#attachments.get(connection);
    if (!attachment) this.#attachments.set(connection, (attachment = { tracks: new Map(), pictureLossBySsrc: new Map() }));
    const { pictureLossBySsrc } = attachment;
    for (const { transceiver, track } of bindings) {
      const bound: TrackAttachment = { receivers: [], disposers: [] };
      attachment.tracks.set(track.name, bound);
      if (track.direction === 'recvonly') {
        const onLoss = this.#bindOutput(connection, bound, transceiver, track, pausedTracks.has(track.name));
        if (onLoss) {
          const ssrc = transceiver.senderSsrc;
          pictureLossBySsrc.set(ssrc, onLoss);
          bound.disposers.push(() => pictureLossBySsrc.delete(ssrc));
        }
        // A sink added to a connection that is already up (a renegotiation in place) opens now.
        if (bound.sink && connection.state === 'ready') this.#tracks.outputVideo.get(track.name)?.sinkReady(bound.sink as VideoSink);
      } else {
        this.#bindInput(connection, bound, transceiver, track);
      }
      // werift routes payload-specific feedback by the *sender* SSRC first. A browser that also
      // sends video (a webcam) stamps its PLIs with that outgoing SSRC, so they land on our
      // receiver, not on the output sender they are about, and the picture would only open at the
      // next periodic keyframe. Route PLI and FIR by their media SSRC here, from every receiver.
      bound.disposers.push(transceiver.onPictureLossFeedback((mediaSsrc) => pictureLossBySsrc.get(mediaSsrc)?.()));
    }
  }

  /**
   * Detaches what `bind` attached for a connection: for the named tracks only (a renegotiation
   * in place ended or changed them; input claims on them are released), or all.
   */
  unbind(connection: Connection, trackNames?: readonly string[]): void {
    const attachment = this.#attachments.get(connection);
    if (!attachment) return;
    const names = trackNames ?? [...attachment.tracks.keys()];
    for (const name of names) {
      const bound = attachment.tracks.get(name);
      if (!bound) continue;
      attachment.tracks.delete(name);
      if (bound.sink) {
        this.#tracks.outputVideo.get(name)?.removeSink(bound.sink as VideoSink);
        this.#tracks.outputAudio.get(name)?.removeSink(bound.sink as AudioSink);
      }
      for (const receiver of bound.receivers) receiver.close();
      for (const dispose of bound.disposers) dispose();
      if (trackNames) {
        const input = this.#tracks.input(name);
        if (input?.publisher === connection.id) input.publisher = undefined;
      }
    }
    if (!trackNames) this.#attachments.delete(connection);
  }

  /** The connection became ready: its output video sinks open. */
  connectionReady(connection: Connection): void {
    for (const [name, { sink }] of this.#attachments.get(connection)?.tracks ?? []) {
      if (sink) this.#tracks.outputVideo.get(name)?.sinkReady(sink as VideoSink);
    }
  }

  /** Pauses or resumes one output track for one connection. */
  setSubscribed(connection: Connection, trackName: string, subscribed: boolean): void {
    const output = this.#attachments.get(connection)?.tracks.get(trackName);
    if (!output?.sink) {
      const known = this.#options.capabilities.some((t) => t.name === trackName && t.direction === 'recvonly');
      throw new ArclightError(
        'unknown_track',
        known ? `Output track "${trackName}" is not negotiated on this connection.` : `The model has no output track "${trackName}".`,
      );
    }
    this.#tracks.outputVideo.get(trackName)?.setPaused(output.sink as VideoSink, !subscribed);
    this.#tracks.outputAudio.get(trackName)?.setPaused(output.sink as AudioSink, !subscribed);
  }

  /** Attaches an output; returns what to call when the client reports picture loss (video only). */
  #bindOutput(
    connection: Connection,
    bound: TrackAttachment,
    transceiver: MediaTransceiver,
    track: TrackCapability,
    paused: boolean,
  ): (() => void) | undefined {
    const { metrics, log } = this.#options;
    const video = this.#tracks.outputVideo.get(track.name);
    const sender = connection.createTrackSender(transceiver, {
      ...(video ? { shareWeight: video.configuredBitrateKbps } : {}),
      latencyMode: this.#options.latencyMode,
      onRetransmit: (packets, bytes) => {
        metrics?.rtpRetransmitted.inc({ track: track.name }, packets);
        metrics?.rtpRetransmittedBytes.inc({ track: track.name }, bytes);
      },
      onRetransmissionsRefused: (reason, packets) => metrics?.rtpRetransmissionsRefused.inc({ track: track.name, reason }, packets),
      onUnaskedResends: (reason, packets) => metrics?.rtpUnaskedResends.inc({ track: track.name, reason }, packets),
      onRepairPackets: (packets) => metrics?.rtpFecPackets.inc({ track: track.name }, packets),
      onKeyframeRequestThrottled: () => metrics?.keyframeRequestsThrottled.inc({ track: track.name }),
      onProbe: (outcome) => metrics?.bandwidthProbes.inc({ track: track.name, outcome }),
    });
    if (video) {
      const codec = sender.codec;
      if (codec !== 'h264' && codec !== 'h265' && codec !== 'vp8') {
        log.warn('no common video codec with client; track not sent', { track: track.name, codec });
        return undefined;
      }
      const sink: VideoSink = {
        connectionId: connection.id,
        codec,
        ...(codec === 'h264' ? { h264Profile: transceiver.h264Profile() } : {}),
        sendFrame: (p, ts, mediaTimeMs) => sender.sendFrame(p, ts, mediaTimeMs),
        noteEmitTime: (wireTimestamp, emittedAtMs) => connection.frameTimes.note(track.name, wireTimestamp, emittedAtMs),
        estimatedBitrateKbps: () => transceiver.estimatedBitrateKbps(),
        sendMetadata: (wireTimestamp, metadata) =>
          connection.sendMessage('runtime', {
            type: 'frame_metadata',
            data: { track: track.name, rtp_timestamp: wireTimestamp, metadata: encodeFrameMetadata(metadata) as JsonValue },
          }),
      };
      video.addSink(sink, { paused });
      // Keyframe requests are throttled per viewer (loss-recovery.ts); the sender also asks for
      // one itself when it leaves a NACKed loss unrepaired.
      const pictureLost = (): void => {
        if (sender.pictureLost()) video.pictureLost(sink);
      };
      sender.onKeyframeNeeded(() => {
        metrics?.lossKeyframes.inc({ track: track.name });
        video.pictureLost(sink);
      });
      const unsubscribe = transceiver.onPictureLoss(pictureLost);
      bound.sink = sink;
      bound.disposers.push(unsubscribe, () => sender.close());
      return pictureLost;
    }
    const audio = this.#tracks.outputAudio.get(track.name);
    if (audio) {
      const sink: AudioSink = { connectionId: connection.id, sendFrame: (p, ts, mediaTimeMs) => sender.sendFrame(p, ts, mediaTimeMs) };
      audio.addSink(sink, { paused });
      bound.sink = sink;
      bound.disposers.push(() => sender.close());
    }
    return undefined;
  }

  #bindInput(connection: Connection, bound: TrackAttachment, transceiver: MediaTransceiver, track: TrackCapability): void {
    const tracks = this.#tracks;
    const spec = this.#options.spec(track.name);
    let receiver: VideoReceiver | AudioReceiver | undefined;
    const onRtp = (rtp: ReceivedRtp): void => {
      if (!tracks.input(track.name) || this.#options.ended()) return;
      if (!tracks.claimByPacket(connection.id, track.name)) return;
      if (!receiver) {
        receiver = this.#createReceiver(connection, transceiver, track, rtp.payloadType, rtp.ssrc, spec);
        if (!receiver) return;
        bound.receivers.push(receiver);
      }
      receiver.push(rtp);
    };
    bound.disposers.push(transceiver.onRtp(onRtp));
  }

  #createReceiver(
    connection: Connection,
    transceiver: MediaTransceiver,
    track: TrackCapability,
    payloadType: number,
    ssrc: number,
    spec: TrackSpec | undefined,
  ): VideoReceiver | AudioReceiver | undefined {
    const mime = transceiver.mimeType(payloadType);
    const log = this.#options.log.child({ connection: connection.id, track: track.name });
    if (track.kind === 'audio') {
      const input = this.#tracks.inputAudio.get(track.name)!;
      const channels = spec?.kind === 'audio' ? (spec.channels ?? 1) : 1;
      return new AudioReceiver({ channels, deliver: (f: AudioFrame) => input.deliver(f), log });
    }
    const codec = mime === 'video/h264' ? 'h264' : mime === 'video/h265' ? 'h265' : mime === 'video/vp8' ? 'vp8' : undefined;
    if (!codec) {
      log.warn('input video arrives in a codec the runtime does not decode', { mime, payloadType });
      return undefined;
    }
    const input = this.#tracks.inputVideo.get(track.name)!;
    const format = spec?.kind === 'video' && spec.direction === 'sendonly' ? (spec.format ?? 'i420') : 'i420';
    return new VideoReceiver({
      codec,
      track: track.name,
      format,
      deliver: (frame: VideoFrame, rtpTimestamp: number) => input.deliver(frame, rtpTimestamp),
      requestKeyframe: () => transceiver.requestKeyframe(ssrc),
      log,
      ...(this.#options.metrics ? { metrics: this.#options.metrics } : {}),
    });
  }
}
