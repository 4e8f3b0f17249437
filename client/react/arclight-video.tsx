/**
 * `<ArclightVideo>`: a video track from the model in a `<video>`.
 */

import type { ReactNode } from 'react';
import { StreamVideo, type VideoElementProps } from './stream-video.tsx';
import { useArclightTrack } from './use-arclight-track.ts';

/** `<ArclightVideo>`'s props: the track, and any `<video>` prop (ref included). */
export interface ArclightVideoProps extends VideoElementProps {
  /** The model's output video track, e.g. `'main_video'`. */
  readonly track: string;
  /**
   * Shown instead of the `<video>` until the track arrives (and after a disconnect); without it
   * the empty `<video>` is rendered from the start, so the ref is set at once.
   */
  readonly placeholder?: ReactNode;
}

/**
 * Plays the model's output video track `track` in a `<video autoPlay playsInline muted>`; other
 * props (and the ref) go to the `<video>`. A connection recovery swaps in the new peer's track
 * by itself.
 *
 * @example
 * ```tsx
 * <ArclightVideo track="main_video" className="stage" placeholder={<p>Connecting…</p>} />
 * ```
 */
export function ArclightVideo({ track, placeholder, ...props }: ArclightVideoProps): ReactNode {
  const stream = useArclightTrack(track);
  if (!stream && placeholder !== undefined) return placeholder;
  return <StreamVideo data-track={track} {...props} stream={stream} />;
}
