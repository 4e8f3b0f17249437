/**
 * The client's tracks in and out. In: publishing local tracks to the model's input tracks (and
 * publishing them again after a recovery), with the per-frame stamping of annotated video tracks
 * (InputFrameStamper, installed on each new peer before its offer). Out: which output tracks are
 * paused (asked in the offer, switched on the data channel), and the metadata the model attached
 * to recent output frames. The peer link is reached only through the connection's narrow view.
 */

import { ArclightError } from '../protocol/errors.ts';
import {
  decodeFrameMetadata,
  encodeFrameMetadata,
  type FrameMetadataData,
  type InputFrameMetadataData,
} from '../protocol/frame-metadata.ts';
import type { Capabilities } from '../protocol/capabilities.ts';
import type { JsonValue } from '../protocol/json-schema.ts';
import { clockOffset } from './clock-sync.ts';
import type { ConnectOptions, EmitClientEvent, FrameMetadataEvent, InputFrameMetadata, PublishOptions } from './client-types.ts';
import { asError } from './error-coercion.ts';
import { InputFrameStamper, inputFrameMetadataSupported, type InputFrameInfo } from './input-frame-stamper.ts';
import type { ConnectionView } from './session-connection.ts';

/** How many frames' metadata getFrameMetadata() remembers per track. */
const FRAME_METADATA_MEMORY = 300;

export class MediaTracks {
  readonly #connection: ConnectionView;
  readonly #emit: EmitClientEvent;
  readonly #paused = new Set<string>();
  readonly #published = new Map<string, MediaStreamTrack>();
  /** How each published track was published, to publish it again after a recovery. */
  readonly #publishOptions = new Map<string, PublishOptions>();
  readonly #stampers = new Map<string, InputFrameStamper>();
  /** Values set with setInputFrameMetadata, by track. */
  readonly #inputMetadata = new Map<string, InputFrameMetadata>();
  #autoResume = true;
  #inputFrameTransforms = true;
  readonly #frameMetadata = new Map<string, Map<number, Record<string, JsonValue> | Uint8Array>>();

  constructor(connection: ConnectionView, emit: EmitClientEvent) {
    this.#connection = connection;
    this.#emit = emit;
  }

  /** connect() (`fresh`: starts over) or reconnect() (changes only what it names). */
  configure(options: ConnectOptions, fresh: boolean): void {
    if (fresh) {
      this.#autoResume = options.autoResumeTracks ?? true;
      this.#inputFrameTransforms = options.inputFrameMetadata ?? true;
      this.#paused.clear();
    } else if (options.autoResumeTracks !== undefined) {
      this.#autoResume = options.autoResumeTracks;
    }
  }

  /** A new peer, before its offer: an idle pass-through transform per input video track. */
  installInputTransforms(tracks: Capabilities['tracks'], senderOf: (track: string) => RTCRtpSender): void {
    if (!this.#inputFrameTransforms || !inputFrameMetadataSupported()) return;
    for (const track of tracks) {
      if (track.kind !== 'video' || track.direction !== 'sendonly') continue;
      this.#stampers.set(track.name, new InputFrameStamper(senderOf(track.name)));
    }
  }

  /** The output tracks the offer asks to start paused (all of them without autoResumeTracks). */
  pausedTracks(tracks: Capabilities['tracks']): string[] {
    const pausedTracks = this.#autoResume ? [...this.#paused] : tracks.filter((t) => t.direction === 'recvonly').map((t) => t.name);
    for (const name of pausedTracks) this.#paused.add(name);
    return pausedTracks;
  }

  /** The peer closed: nothing is published on it any more. */
  closed(): void {
    this.#published.clear();
    this.#publishOptions.clear();
    for (const stamper of this.#stampers.values()) stamper.stop();
    this.#stampers.clear();
  }

  /** Before a recovery closes the peer: publishes what is published now again, once back. */
  captureForRecovery(): () => Promise<void> {
    const republish = [...this.#published].map(([name, track]) => ({ name, track, options: this.#publishOptions.get(name) ?? {} }));
    return async () => {
      for (const { name, track, options } of republish) {
        await this.publish(name, track, options).catch((error: unknown) => this.#connection.fail(asError(error, 'internal_error')));
      }
    };
  }

  async publish(name: string, track: MediaStreamTrack, options: PublishOptions): Promise<void> {
    this.#connection.assertReady('publishTrack');
    const capability = this.#connection.track(name, 'sendonly');
    if (capability.kind !== track.kind)
      throw new ArclightError('invalid_request', `Track "${name}" is ${capability.kind}; got a ${track.kind} track.`);
    const annotate = options.frameMetadata !== undefined && options.frameMetadata !== false;
    if (annotate && capability.kind !== 'video')
      throw new ArclightError('invalid_request', `Frame metadata is carried on video tracks; "${name}" is audio.`);
    if (annotate && !inputFrameMetadataSupported()) {
      throw new ArclightError(
        'unsupported',
        'Input frame metadata needs RTCRtpScriptTransform (a current browser); this platform has none.',
      );
    }
    const stamper = this.#stampers.get(name);
    if (annotate && !stamper) {
      throw new ArclightError(
        'invalid_request',
        'Frame metadata needs connect() without inputFrameMetadata: false (transforms are set up at connect).',
      );
    }
    await this.#connection.request('runtime', 'publish_track', annotate ? { track: name, frame_metadata: true } : { track: name });
    if (annotate) {
      const offset = await clockOffset(this.#connection);
      const source = typeof options.frameMetadata === 'function' ? options.frameMetadata : undefined;
      let sourceFailed = false;
      stamper!.start((frame) => {
        let metadata: InputFrameMetadata | undefined;
        try {
          metadata = source ? source(frame) : this.#inputMetadata.get(name);
        } catch (error) {
          // Said once per publish, not 30 times a second; the frames go on with their capture time.
          if (!sourceFailed)
            this.#connection.fail(
              new ArclightError('invalid_params', `frameMetadata for "${name}" threw: ${asError(error, 'invalid_params').message}`),
            );
          sourceFailed = true;
        }
        this.#sendInputFrameAnnotation(name, frame, offset, metadata);
      });
    } else {
      stamper?.pause();
    }
    await this.#connection.sender(name)!.replaceTrack(track);
    this.#published.set(name, track);
    this.#publishOptions.set(name, options);
  }

  setInputFrameMetadata(name: string, metadata: InputFrameMetadata | undefined): void {
    this.#connection.track(name, 'sendonly');
    if (metadata === undefined) this.#inputMetadata.delete(name);
    else this.#inputMetadata.set(name, metadata);
  }

  async unpublish(name: string): Promise<void> {
    this.#connection.track(name, 'sendonly');
    if (!this.#published.has(name)) return;
    this.#published.delete(name);
    this.#publishOptions.delete(name);
    this.#stampers.get(name)?.pause();
    await this.#connection.sender(name)?.replaceTrack(null);
    if (this.#connection.status === 'ready') await this.#connection.request('runtime', 'unpublish_track', { track: name });
  }

  /** Pauses (`subscribed` false) or resumes an output track; the runtime hears of it while ready. */
  subscribe(name: string, subscribed: boolean): void {
    this.#connection.track(name, 'recvonly');
    if (subscribed) this.#paused.delete(name);
    else this.#paused.add(name);
    if (this.#connection.status === 'ready') {
      this.#connection
        .request('runtime', 'track_subscription', { track: name, subscribed })
        .catch((e: unknown) => this.#connection.fail(asError(e, 'internal_error')));
    }
  }

  /** An output frame's metadata from the model: remembered (the latest frames per track) and emitted. */
  receiveFrameMetadata(data: FrameMetadataData): void {
    const event: FrameMetadataEvent = { track: data.track, rtpTimestamp: data.rtp_timestamp, metadata: decodeFrameMetadata(data.metadata) };
    let memory = this.#frameMetadata.get(data.track);
    if (!memory) this.#frameMetadata.set(data.track, (memory = new Map()));
    memory.set(event.rtpTimestamp, event.metadata);
    if (memory.size > FRAME_METADATA_MEMORY) memory.delete(memory.keys().next().value as number);
    this.#emit('frameMetadata', event);
  }

  frameMetadata(track: string, rtpTimestamp: number): Record<string, JsonValue> | Uint8Array | undefined {
    return this.#frameMetadata.get(track)?.get(rtpTimestamp);
  }

  #sendInputFrameAnnotation(track: string, frame: InputFrameInfo, clockOffset: number, metadata: InputFrameMetadata | undefined): void {
    this.#connection.sendWhileReady(() => {
      const data: InputFrameMetadataData = {
        track,
        frames: [
          {
            rtp_timestamp: frame.rtpTimestamp,
            capture_time: Math.max(0, Math.round((frame.captureTime + clockOffset) * 1000) / 1000),
            ...(metadata !== undefined ? { metadata: encodeFrameMetadata(metadata) } : {}),
          },
        ],
      };
      return JSON.stringify({ scope: 'runtime', data: { type: 'input_frame_metadata', data } });
    });
  }
}
