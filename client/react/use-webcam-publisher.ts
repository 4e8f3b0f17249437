/**
 * `useWebcamPublisher()`: the webcam, published to a model input track while connected.
 */

import { useEffect, useLayoutEffect, useRef, useState } from 'react';
import type { ArclightClient, PublishOptions } from '../arclight-client.ts';
import { useArclightContext } from './arclight-context.ts';

/** Options of `useWebcamPublisher` (and props of `<WebcamPublisher>`). */
export interface WebcamPublisherOptions {
  /** The camera's `getUserMedia` video constraints, e.g. `{ width: 640, height: 480 }`; default `true`. */
  readonly constraints?: MediaTrackConstraints | boolean;
  /** Open the camera while true (default): false closes it and unpublishes; true again reopens it. */
  readonly enabled?: boolean;
  /** How the track is published (`frameMetadata`). */
  readonly publishOptions?: PublishOptions;
  /** Called when the camera cannot be opened (`NotAllowedError`, `NotFoundError`, ...) or publishing fails (`ArclightError`). */
  readonly onError?: (error: Error) => void;
}

/** What `useWebcamPublisher` returns. */
export interface WebcamPublisherState {
  /** The camera's stream, for a local preview; undefined until the camera is open. */
  readonly stream: MediaStream | undefined;
  /** True while the model receives it (published on the current connection). */
  readonly published: boolean;
  /** The last failure to open the camera or publish it; cleared when it next succeeds. */
  readonly error: Error | undefined;
}

/**
 * Opens the webcam (`getUserMedia`) while mounted and `enabled`, and publishes its video to the
 * model's input track `track` whenever the client is `ready`: at once if it is, else when it
 * gets there, and again after each new connect. (A connection recovery republishes by itself.)
 * On unmount, or when disabled, it unpublishes and stops the camera's tracks, so the camera
 * light goes off.
 *
 * @example
 * ```tsx
 * const { stream, published } = useWebcamPublisher('webcam', { constraints: { width: 640 } });
 * ```
 */
export function useWebcamPublisher(track: string, options: WebcamPublisherOptions = {}): WebcamPublisherState {
  const { client } = useArclightContext('useWebcamPublisher');
  const { constraints = true, enabled = true } = options;
  const [stream, setStream] = useState<MediaStream | undefined>(undefined);
  const [published, setPublished] = useState(false);
  const [error, setError] = useState<Error | undefined>(undefined);
  const latest = useRef(options);
  useLayoutEffect(() => {
    latest.current = options;
  });
  // Publishing steps run one after another: an unpublish left by a cleanup must reach the
  // runtime before the next publish (else the runtime would free the newly published track).
  const queue = useRef<Promise<void>>(Promise.resolve());

  // Constraints are compared by value: an inline object is a new one on every render.
  const constraintsKey = JSON.stringify(constraints);
  useEffect(() => {
    if (!enabled) return;
    let active = true;
    let opened: MediaStream | undefined;
    const video = JSON.parse(constraintsKey) as MediaTrackConstraints | boolean;
    navigator.mediaDevices.getUserMedia({ video, audio: false }).then(
      (camera) => {
        if (!active) return stopTracks(camera);
        opened = camera;
        setStream(camera);
        setError(undefined);
      },
      (failure: unknown) => {
        if (!active) return;
        const reason = failure instanceof Error ? failure : new Error(String(failure));
        setError(reason);
        latest.current.onError?.(reason);
      },
    );
    return () => {
      active = false;
      if (opened) stopTracks(opened);
      setStream(undefined);
    };
  }, [enabled, constraintsKey]);

  useEffect(() => {
    const video = stream?.getVideoTracks()[0];
    if (!video) return;
    let active = true;
    // The client forgets its published tracks when it disconnects; within a recovery
    // (ready → connecting → ready) it publishes them again itself.
    let due = true;
    const enqueue = (step: () => Promise<void>): void => {
      queue.current = queue.current.then(step, step);
    };
    const fail = (failure: unknown): void => {
      if (!active) return;
      const reason = failure instanceof Error ? failure : new Error(String(failure));
      setError(reason);
      latest.current.onError?.(reason);
    };
    const publish = (): void => {
      if (!due || client.getStatus() !== 'ready') return;
      due = false;
      enqueue(() =>
        publishTo(client, track, video, latest.current.publishOptions).then(() => {
          if (active) setPublished(true);
        }, fail),
      );
    };
    const onStatus = (status: string): void => {
      if (status === 'disconnected') {
        due = true;
        setPublished(false);
      } else if (status === 'ready') {
        publish();
      }
    };
    client.on('statusChanged', onStatus);
    publish();
    return () => {
      active = false;
      client.off('statusChanged', onStatus);
      setPublished(false);
      if (!due) enqueue(() => (client.getStatus() === 'ready' ? client.unpublishTrack(track).catch(() => {}) : Promise.resolve()));
    };
  }, [client, track, stream]);

  return { stream, published, error };
}

async function publishTo(
  client: ArclightClient,
  track: string,
  video: MediaStreamTrack,
  options: PublishOptions | undefined,
): Promise<void> {
  // The status may have changed while an earlier step ran: the next `ready` publishes then.
  if (client.getStatus() !== 'ready') return;
  await client.publishTrack(track, video, options);
}

function stopTracks(stream: MediaStream): void {
  for (const track of stream.getTracks()) track.stop();
}
