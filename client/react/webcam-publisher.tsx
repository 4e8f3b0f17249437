/**
 * `<WebcamPublisher>`: the webcam as a model input, with an optional preview.
 */

import type { ReactNode } from 'react';
import { StreamVideo, type VideoElementProps } from './stream-video.tsx';
import { useWebcamPublisher, type WebcamPublisherOptions } from './use-webcam-publisher.ts';

/** `<WebcamPublisher>`'s props: the input track, the hook's options, and the preview's `<video>` props. */
export interface WebcamPublisherProps extends WebcamPublisherOptions, Omit<VideoElementProps, 'onError'> {
  /** The model's input video track, e.g. `'webcam'`. */
  readonly track: string;
  /** Show the camera in a muted `<video>` (the other props go to it); default false (renders nothing). */
  readonly preview?: boolean;
}

/**
 * Opens the webcam on mount and publishes it to the model's input track `track` whenever the
 * client is ready (see `useWebcamPublisher`); unmounting unpublishes it and turns the camera
 * off. With `preview` it shows the camera in a `<video>`.
 *
 * @example
 * ```tsx
 * <WebcamPublisher track="webcam" constraints={{ width: 640, height: 480 }} preview className="self-view"
 *   onError={(error) => setProblem(error.message)} />
 * ```
 */
export function WebcamPublisher({
  track,
  constraints,
  enabled,
  publishOptions,
  onError,
  preview = false,
  ...videoProps
}: WebcamPublisherProps): ReactNode {
  const { stream } = useWebcamPublisher(track, {
    ...(constraints !== undefined ? { constraints } : {}),
    ...(enabled !== undefined ? { enabled } : {}),
    ...(publishOptions !== undefined ? { publishOptions } : {}),
    ...(onError !== undefined ? { onError } : {}),
  });
  if (!preview) return null;
  return <StreamVideo data-track={track} {...videoProps} stream={stream} />;
}
