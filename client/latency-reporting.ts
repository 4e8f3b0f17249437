/**
 * Glass-to-glass latency of the client's output video tracks (`trackLatency()`): one
 * LatencyTracker per measured track, fed the runtime's `frame_times` and clock pings, its rolling
 * summary shown in `getStats()` and reported to the runtime every 5 s (`latency_report`, for its
 * `/metrics`). Everything here lives as long as one peer: `closed()` stops it all.
 */

import { ArclightError } from '../protocol/errors.ts';
import { pingClock } from './clock-sync.ts';
import { LatencyTracker, type LatencySummary } from './latency-tracker.ts';
import type { ConnectionView } from './session-connection.ts';

const REPORT_INTERVAL_MS = 5_000;

export class LatencyReporting {
  readonly #connection: ConnectionView;
  readonly #trackers = new Map<string, LatencyTracker>();
  #reportTimer: ReturnType<typeof setInterval> | undefined;

  constructor(connection: ConnectionView) {
    this.#connection = connection;
  }

  async track(track: string, video: HTMLVideoElement): Promise<() => void> {
    this.#connection.assertReady('trackLatency');
    const capability = this.#connection.track(track, 'recvonly');
    if (capability.kind !== 'video') throw new ArclightError('unknown_track', `"${track}" is not a video track.`);
    this.#trackers.get(track)?.stop();
    const tracker = new LatencyTracker(track, video);
    this.#trackers.set(track, tracker);
    await this.#connection.request('runtime', 'subscribe_frame_times', { track, subscribed: true });
    await pingClock(this.#connection, (sentAt, receivedAt, serverTime) => tracker.addClockSample(sentAt, receivedAt, serverTime));
    this.#reportTimer ??= setInterval(() => this.#report(), REPORT_INTERVAL_MS);
    return () => {
      tracker.stop();
      if (this.#trackers.get(track) === tracker) this.#trackers.delete(track);
      if (this.#connection.status === 'ready')
        this.#connection.request('runtime', 'subscribe_frame_times', { track, subscribed: false }).catch(() => {});
    };
  }

  /** The runtime's emit times of frames of `track` (`frame_times`). */
  addEmitTimes(track: string, frames: Array<[number, number]>): void {
    this.#trackers.get(track)?.addEmitTimes(frames);
  }

  summaries(): LatencySummary[] {
    return [...this.#trackers.values()].map((t) => t.summary()).filter((s): s is LatencySummary => s !== undefined);
  }

  /** The peer closed: every measurement stops (a new connection starts none by itself). */
  closed(): void {
    for (const tracker of this.#trackers.values()) tracker.stop();
    this.#trackers.clear();
    clearInterval(this.#reportTimer);
    this.#reportTimer = undefined;
  }

  #report(): void {
    if (this.#connection.status !== 'ready') return;
    for (const tracker of this.#trackers.values()) {
      const summary = tracker.summary();
      if (!summary) continue;
      this.#connection
        .request('runtime', 'latency_report', { track: summary.track, p50_ms: summary.p50, p95_ms: summary.p95, samples: summary.samples })
        .catch(() => {});
    }
  }
}
