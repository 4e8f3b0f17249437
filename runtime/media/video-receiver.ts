/**
 * Turns one connection's incoming RTP for a model input video track into decoded frames:
 * depacketize (H.264 or VP8) → decode (node-av) → convert to the model's pixel format → deliver.
 * Asks the sender for a keyframe (PLI) when it starts and whenever a loss breaks the picture.
 */

import type { Logger } from '../../server-kit/log.ts';
import type { RuntimeMetrics } from '../metrics.ts';
import type { DepacketizedFrame } from '../transport/rtp/depacketized-frame.ts';
import { H264Depacketizer } from '../transport/rtp/h264-depacketizer.ts';
import { H265Depacketizer } from '../transport/rtp/h265-depacketizer.ts';
import { Vp8Depacketizer } from '../transport/rtp/vp8-depacketizer.ts';
import type { VideoCodec } from './video-encoder.ts';
import { convertVideoFrame } from './frame-convert.ts';
import type { PixelFormat, VideoFrame } from './frames.ts';
import { VideoDecoder } from './video-decoder.ts';

export interface RtpInput {
  readonly payload: Buffer;
  readonly marker: boolean;
  readonly sequenceNumber: number;
  readonly timestamp: number;
}

/** PLIs are rate-limited: a burst of loss must not become a burst of keyframes. */
const PLI_INTERVAL_MS = 500;
/** Encoded frames waiting for the decoder; beyond this the receiver drops and asks for a keyframe. */
const MAX_DECODE_BACKLOG = 4;

export class VideoReceiver {
  readonly #codec: VideoCodec;
  readonly #depacketizer: H264Depacketizer | H265Depacketizer | Vp8Depacketizer;
  readonly #decoder: Promise<VideoDecoder>;
  readonly #format: PixelFormat;
  /** Receives each decoded frame with the RTP timestamp of the encoded frame it came from. */
  readonly #deliver: (frame: VideoFrame, rtpTimestamp: number) => void;
  readonly #requestKeyframe: () => void;
  readonly #log: Logger;
  readonly #metrics: RuntimeMetrics | undefined;
  readonly #track: string;
  #decodeChain: Promise<void> = Promise.resolve();
  #backlog = 0;
  #lastPli = 0;
  #awaitingKeyframe = true;
  #closed = false;

  constructor(options: {
    codec: VideoCodec;
    track: string;
    format: PixelFormat;
    deliver: (frame: VideoFrame, rtpTimestamp: number) => void;
    requestKeyframe: () => void;
    log: Logger;
    metrics?: RuntimeMetrics;
  }) {
    this.#codec = options.codec;
    this.#track = options.track;
    this.#depacketizer =
      options.codec === 'h264' ? new H264Depacketizer() : options.codec === 'h265' ? new H265Depacketizer() : new Vp8Depacketizer();
    this.#decoder = VideoDecoder.create(options.codec);
    this.#decoder.catch((error: unknown) => options.log.error('video decoder could not open', { error }));
    this.#format = options.format;
    this.#deliver = options.deliver;
    this.#requestKeyframe = options.requestKeyframe;
    this.#log = options.log;
    this.#metrics = options.metrics;
    this.#askForKeyframe(true);
  }

  get codec(): VideoCodec {
    return this.#codec;
  }

  push(packet: RtpInput): void {
    if (this.#closed) return;
    const frame = this.#depacketizer.push(packet);
    if (this.#depacketizer.needsKeyframe) this.#askForKeyframe(false);
    if (!frame) return;
    if (this.#awaitingKeyframe && !frame.keyframe) return;
    this.#awaitingKeyframe = false;
    if (this.#backlog >= MAX_DECODE_BACKLOG) {
      // Dropping an encoded frame breaks the reference chain: wait for a fresh keyframe.
      this.#awaitingKeyframe = true;
      this.#metrics?.framesDropped.inc({ track: this.#track, reason: 'decode_backlog' });
      this.#askForKeyframe(true);
      return;
    }
    this.#backlog++;
    this.#decodeChain = this.#decodeChain.then(() => this.#decode(frame));
  }

  close(): void {
    this.#closed = true;
    void this.#decodeChain
      .then(() => this.#decoder)
      .then(
        (d) => d.close(),
        () => {},
      );
  }

  async #decode(encoded: DepacketizedFrame): Promise<void> {
    try {
      if (this.#closed) return;
      const decoder = await this.#decoder;
      const frames = await decoder.decode(encoded.data, performance.now() * 1000);
      for (const frame of frames) {
        this.#metrics?.framesReceived.inc({ track: this.#track });
        // Low-delay decoding of WebRTC streams (no B-frames): each picture is the unit just sent.
        this.#deliver(this.#format === frame.format ? frame : convertVideoFrame(frame, this.#format), encoded.timestamp);
      }
    } catch (error) {
      this.#log.warn('input video frame could not be decoded', { error });
      this.#awaitingKeyframe = true;
      this.#askForKeyframe(true);
    } finally {
      this.#backlog--;
    }
  }

  #askForKeyframe(force: boolean): void {
    const now = performance.now();
    if (!force && now - this.#lastPli < PLI_INTERVAL_MS) return;
    this.#lastPli = now;
    this.#requestKeyframe();
  }
}
