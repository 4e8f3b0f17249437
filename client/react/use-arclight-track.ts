/**
 * `useArclightTrack()`: the stream of a track the model sends.
 */

import { useSyncExternalStore } from 'react';
import { useArclightContext } from './arclight-context.ts';
import { storeOf } from './client-store.ts';

/**
 * A `MediaStream` holding the received output track `name` (e.g. `'main_video'`), for a
 * `<video>`/`<audio>` `srcObject`; `undefined` until it arrives and again once disconnected.
 * After a connection recovery it is the new peer's track, in a new stream.
 *
 * @example
 * ```tsx
 * const stream = useArclightTrack('main_audio');
 * const ref = useRef<HTMLAudioElement>(null);
 * useEffect(() => { if (ref.current) ref.current.srcObject = stream ?? null; }, [stream]);
 * return <audio ref={ref} autoPlay />;
 * ```
 */
export function useArclightTrack(name: string): MediaStream | undefined {
  const { client } = useArclightContext('useArclightTrack');
  const store = storeOf(client);
  return useSyncExternalStore(
    store.subscribeTracks,
    () => store.track(name),
    () => undefined,
  );
}
