/**
 * `useArclightStats()`: the connection's statistics, sampled at a rate the component chooses.
 */

import { useMemo, useSyncExternalStore } from 'react';
import type { ArclightClient } from '../arclight-client.ts';
import type { ClientStats } from '../stats.ts';
import { useArclightContext } from './arclight-context.ts';

const DEFAULT_INTERVAL_MS = 1_000;

/**
 * `client.getStats()` (fps, RTT, bitrate, drops, loss, the runtime's quality score, latency)
 * read every `intervalMs` (default 1000; the client samples once a second); the component
 * renders again when a newer sample is there. `undefined` until the first sample, about a second
 * after `ready`.
 *
 * @example
 * ```tsx
 * const stats = useArclightStats(500);
 * return <span>{stats?.framesPerSecond ?? '–'} fps</span>;
 * ```
 */
export function useArclightStats(intervalMs: number = DEFAULT_INTERVAL_MS): ClientStats | undefined {
  const { client } = useArclightContext('useArclightStats');
  const source = useMemo(() => statsSource(client, intervalMs), [client, intervalMs]);
  return useSyncExternalStore(source.subscribe, source.getSnapshot, source.getSnapshot);
}

/**
 * Polls the client's stats. `getStats()` returns a fresh object per call once the runtime's
 * quality report has arrived, so the snapshot is taken on the timer, never in `getSnapshot`.
 */
function statsSource(
  client: ArclightClient,
  intervalMs: number,
): { subscribe: (onChange: () => void) => () => void; getSnapshot: () => ClientStats | undefined } {
  let current = client.getStats();
  return {
    subscribe(onChange) {
      const timer = setInterval(
        () => {
          const next = client.getStats();
          if (next?.timestamp === current?.timestamp && next?.quality === current?.quality) return;
          current = next;
          onChange();
        },
        Math.max(50, intervalMs),
      );
      return () => clearInterval(timer);
    },
    getSnapshot: () => current,
  };
}
