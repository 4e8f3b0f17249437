/**
 * Connection statistics, summarised from `RTCPeerConnection.getStats()`, plus the runtime's
 * latest `media_stats` report (`quality`).
 */

import type { MediaStatsData } from '../protocol/messages.ts';

/**
 * The runtime's view of this connection's media, from its latest `media_stats` message (every
 * 2 s): `score` 0 (unusable) to 10 (perfect), plus `loss`, `jitter_ms`, `rtt_ms`, `fps`,
 * `declared_fps`, `freezes` and per-track frame counts. See docs/protocol.md.
 */
export type MediaQuality = MediaStatsData;

export interface ClientStats {
  /** Glass-to-glass latency per output track being measured (client.trackLatency), ms. */
  readonly latency?: ReadonlyArray<{ readonly track: string; readonly p50: number; readonly p95: number; readonly samples: number }>;
  /** Round-trip time of the selected candidate pair, ms. */
  readonly rtt?: number;
  readonly candidateType?: string;
  /** Decoded frames per second on the first video track. */
  readonly framesPerSecond?: number;
  readonly framesDecoded?: number;
  readonly framesDropped?: number;
  /** Inbound video bitrate over the last interval, bits per second. */
  readonly bitrate?: number;
  readonly packetLossRatio?: number;
  readonly jitter?: number;
  readonly timestamp: number;
  /** The runtime's latest quality report for this connection; absent until the first arrives (~2 s after ready). */
  readonly quality?: MediaQuality;
}

interface StatsEntry {
  readonly type: string;
  readonly [key: string]: unknown;
}

/** Keeps the previous sample to turn byte counters into a bitrate. */
export class StatsSampler {
  #lastBytes: number | undefined;
  #lastAt: number | undefined;

  summarise(
    report: Map<string, StatsEntry> | { forEach(cb: (entry: StatsEntry) => void): void; get?(id: string): StatsEntry | undefined },
  ): ClientStats {
    let rtt: number | undefined;
    let localCandidateId: string | undefined;
    let video: StatsEntry | undefined;
    const all = new Map<string, StatsEntry>();
    report.forEach((entry) => {
      all.set(entry['id'] as string, entry);
      if (entry.type === 'candidate-pair' && (entry['nominated'] || entry['state'] === 'succeeded')) {
        if (typeof entry['currentRoundTripTime'] === 'number') rtt = entry['currentRoundTripTime'] * 1000;
        localCandidateId = entry['localCandidateId'] as string | undefined;
      }
      if (entry.type === 'inbound-rtp' && (entry['kind'] === 'video' || entry['mediaType'] === 'video') && !video) video = entry;
    });
    const now = Date.now();
    let bitrate: number | undefined;
    let packetLossRatio: number | undefined;
    if (video) {
      const bytes = video['bytesReceived'] as number | undefined;
      if (typeof bytes === 'number' && this.#lastBytes !== undefined && this.#lastAt !== undefined && now > this.#lastAt) {
        bitrate = ((bytes - this.#lastBytes) * 8 * 1000) / (now - this.#lastAt);
      }
      if (typeof bytes === 'number') {
        this.#lastBytes = bytes;
        this.#lastAt = now;
      }
      const received = video['packetsReceived'] as number | undefined;
      const lost = video['packetsLost'] as number | undefined;
      if (typeof received === 'number' && typeof lost === 'number' && received + lost > 0) packetLossRatio = lost / (received + lost);
    }
    const local = localCandidateId ? all.get(localCandidateId) : undefined;
    const pick = (key: string) => (video && typeof video[key] === 'number' ? (video[key] as number) : undefined);
    return strip({
      rtt,
      candidateType: local?.['candidateType'] as string | undefined,
      framesPerSecond: pick('framesPerSecond'),
      framesDecoded: pick('framesDecoded'),
      framesDropped: pick('framesDropped'),
      bitrate,
      packetLossRatio,
      jitter: pick('jitter'),
      timestamp: now,
    });
  }
}

function strip<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}
