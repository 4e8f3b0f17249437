/**
 * A `<video>` showing a `MediaStream` (set as `srcObject`, which has no attribute), with the
 * caller's ref and props.
 */

import { useCallback, useEffect, useRef, type ComponentPropsWithRef, type ReactNode, type Ref } from 'react';

/** The props of a `<video>` element, its ref included (a prop in React 19). */
export type VideoElementProps = ComponentPropsWithRef<'video'>;

interface StreamVideoProps extends VideoElementProps {
  readonly stream: MediaStream | undefined;
}

/**
 * Muted, inline and autoplaying by default (what lets browsers start a video without a user
 * gesture, and keeps iOS from going full screen); each can be overridden by a prop.
 */
export function StreamVideo({ stream, ref, ...props }: StreamVideoProps): ReactNode {
  const element = useRef<HTMLVideoElement | null>(null);
  const setRefs = useCallback(
    (node: HTMLVideoElement | null) => {
      element.current = node;
      return assignRef(ref, node);
    },
    [ref],
  );
  useEffect(() => {
    const video = element.current;
    if (!video || video.srcObject === (stream ?? null)) return;
    video.srcObject = stream ?? null;
    // autoPlay covers the first stream; a later one (after a reconnect) may need a nudge.
    if (stream && video.autoplay) video.play().catch(() => {});
  }, [stream]);
  return <video autoPlay playsInline muted {...props} ref={setRefs} />;
}

/** Sets a ref of either kind; returns the callback ref's cleanup, if it has one (React 19). */
function assignRef<T>(ref: Ref<T> | undefined, value: T | null): (() => void) | undefined {
  if (typeof ref === 'function') {
    const cleanup = ref(value);
    return typeof cleanup === 'function' ? cleanup : undefined;
  }
  if (ref) (ref as { current: T | null }).current = value;
  return undefined;
}
