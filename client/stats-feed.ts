/**
 * The client's statistics while connected: the peer's `getStats()` summarised every second
 * (StatsSampler) with the latency being measured, emitted as `statsUpdate`; and the runtime's
 * quality report (`media_stats`, every 2 s), emitted as `mediaStats` and carried as `quality` by
 * both `statsUpdate` and `getStats()` until the peer closes.
 */

import type { EmitClientEvent } from './client-types.ts';
import type { LatencySummary } from './latency-tracker.ts';
import type { ConnectionView } from './session-connection.ts';
import { StatsSampler, type ClientStats, type MediaQuality } from './stats.ts';

const STATS_INTERVAL_MS = 1_000;

export class StatsFeed {
  readonly #connection: ConnectionView;
  readonly #emit: EmitClientEvent;
  readonly #latency: () => LatencySummary[];
  readonly #sampler = new StatsSampler();
  #stats: ClientStats | undefined;
  /** The latest `media_stats` of the current connection. */
  #quality: MediaQuality | undefined;
  #timer: ReturnType<typeof setInterval> | undefined;

  constructor(connection: ConnectionView, emit: EmitClientEvent, latency: () => LatencySummary[]) {
    this.#connection = connection;
    this.#emit = emit;
    this.#latency = latency;
  }

  /** Ready: sample every second. */
  start(): void {
    clearInterval(this.#timer);
    this.#timer = setInterval(() => void this.#sample(), STATS_INTERVAL_MS);
  }

  /** The peer closed: no more samples, and its quality report no longer applies. */
  closed(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
    this.#quality = undefined;
  }

  mediaStats(quality: MediaQuality): void {
    this.#quality = quality;
    this.#emit('mediaStats', quality);
  }

  /** The latest sample with the latest quality report; undefined before either. */
  current(): ClientStats | undefined {
    const quality = this.#quality;
    if (!quality) return this.#stats;
    return { ...(this.#stats ?? { timestamp: Date.now() }), quality };
  }

  async #sample(): Promise<void> {
    const pc = this.#connection.peerConnection;
    if (!pc) return;
    try {
      const report = await pc.getStats();
      const summarised = this.#sampler.summarise(report as unknown as Map<string, { type: string }>);
      const latency = this.#latency();
      const stats = latency.length > 0 ? { ...summarised, latency } : summarised;
      this.#stats = stats;
      this.#emit('statsUpdate', this.#quality ? { ...stats, quality: this.#quality } : stats);
    } catch {
      // stats are best effort
    }
  }
}
