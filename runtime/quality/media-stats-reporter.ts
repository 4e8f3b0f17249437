/**
 * Measures how one connection's output video is doing and sends it `media_stats` every
 * interval (2 s): loss, jitter, RTT, frame rate, freezes and the 0–10 score of
 * `quality-score.ts`.
 *
 * Sources:
 * - RTCP from the client, read off the DTLS transport (every SR/RR report block about one of
 *   our sender SSRCs, and every generic NACK). Read there rather than from werift's
 *   `RTCRtpSender` fields because werift routes a sender report by its *sender* SSRC, so the
 *   report blocks in the SRs of a client that also sends media (a webcam) never reach our
 *   senders; and werift keeps no jitter.
 * - `RTCRtpSender.getStats()` for packets sent and the round-trip time (werift's LSR/DLSR
 *   estimate from receiver reports, else the ICE consent round trip).
 * - The output track's playout (fixed, or adaptive: the rate chosen and the production estimate),
 *   reported as each track's `playout`.
 * - `noteFrameSent(track)` for every frame handed to the connection's RTP sender, and the output
 *   track's counters (frames the model emitted, frames the track dropped), for frame rate,
 *   drops and freezes.
 *
 * Loss is the larger of two views of the interval: the fraction of our packets the client
 * asked to have retransmitted (distinct NACKed sequence numbers / packets sent: the loss on the
 * wire, before recovery), and the change in the cumulative lost count of its receiver reports
 * over the change in their highest sequence number (what is still missing: libwebrtc counts a
 * retransmission that arrived as received, so where NACK works this alone reads ~0; its
 * per-report `fraction lost` is not used, since libwebrtc sends a receiver report with every
 * NACK and such short windows read 0 % or 50 %).
 *
 * Just over ~400 lines: the score's inputs and the score itself, kept together so a change to one
 * is read against the other.
 */

import type { RTCRtpSender } from 'werift';
import type { MediaStatsData, TrackMediaStats } from '../../protocol/messages.ts';
import type { Logger } from '../../server-kit/log.ts';
import { FREEZE_THRESHOLD_MS, qualityScore } from './quality-score.ts';

export const MEDIA_STATS_INTERVAL_MS = 2_000;
/** RTCP packet types (RFC 3550, RFC 4585) and the generic NACK format. */
const RTCP_SR = 200;
const RTCP_RR = 201;
const RTCP_RTPFB = 205;
const GENERIC_NACK_FORMAT = 1;

export interface ReportedVideoSender {
  /** The model's output track this sender carries. */
  readonly track: string;
  readonly sender: RTCRtpSender;
}

export interface MediaStatsReporterOptions {
  /** The connection's output video senders (audio is not scored). */
  readonly senders: readonly ReportedVideoSender[];
  /** The model's declared frames per second. */
  readonly declaredFps: number | undefined;
  /** The output video track's running counters; undefined when unknown. */
  readonly trackCounters: (track: string) => OutputTrackCounters | undefined;
  /** Tracks this connection has paused at the start. */
  readonly pausedTracks?: Iterable<string>;
  readonly send: (data: MediaStatsData) => void;
  readonly intervalMs?: number;
  readonly now?: () => number;
  readonly log?: Logger;
}

/** What an output video track counts (`OutputVideoTrack` has both). */
export interface OutputTrackCounters {
  /** Frames the model has emitted on the track so far. */
  readonly framesEmitted: number;
  /** Frames the track has dropped so far for every viewer (queue full, stale, flush). */
  readonly framesDropped?: number;
  /** How the track paces: the rate it plays at now and, when adaptive, the production estimate. */
  readonly playout?: { readonly mode: 'fixed' | 'adaptive'; readonly fps: number; readonly productionFps?: number | undefined };
}

interface TrackState {
  readonly name: string;
  readonly sender: RTCRtpSender;
  paused: boolean;
  framesSent: number;
  /** Model frames emitted while this connection had the track unpaused (up to the last resume). */
  emittedUnpaused: number;
  /** The track's drops while this connection had it unpaused (up to the last resume). */
  droppedUnpaused: number;
  /** The track's counters at the last resume (or at the start). */
  emittedAtResume: number | undefined;
  droppedAtResume: number | undefined;
  lastSentAt: number;
  emittedAtLastSent: number | undefined;
  /** A freeze already counted at a report and not yet ended by a frame. */
  freezeOpen: boolean;
  // per interval
  sentAtReport: number;
  emittedUnpausedAtReport: number;
  pausedInInterval: boolean;
  freezes: number;
  packetsSentAtReport: number | undefined;
  nacked: Set<number>;
  /** The client's latest receiver report about this sender: cumulative lost, extended highest sequence. */
  lastReport: { lost: number; highest: number } | undefined;
  /** The same at the previous media_stats report. */
  reportAtReport: { lost: number; highest: number } | undefined;
  jitterMs: number | undefined;
}

/** The parts of werift's parsed RTCP packets read here. */
export interface RtcpLike {
  readonly type?: number;
  readonly header?: { readonly length?: number };
  readonly reports?: ReadonlyArray<{ ssrc: number; packetsLost: number; highestSequence: number; jitter: number }>;
  readonly feedback?: { count?: number; mediaSourceSsrc?: number; lost?: readonly number[] };
}

export class MediaStatsReporter {
  readonly #tracks = new Map<string, TrackState>();
  readonly #bySsrc = new Map<number, TrackState>();
  readonly #options: MediaStatsReporterOptions;
  readonly #now: () => number;
  readonly #disposers: Array<() => void> = [];
  #timer: NodeJS.Timeout | undefined;
  #lastReportAt: number;
  #sampling = false;
  #stopped = false;

  constructor(options: MediaStatsReporterOptions) {
    this.#options = options;
    this.#now = options.now ?? (() => performance.now());
    this.#lastReportAt = this.#now();
    const paused = new Set(options.pausedTracks ?? []);
    for (const { track, sender } of options.senders) {
      const counters = options.trackCounters(track);
      const emitted = counters?.framesEmitted;
      const state: TrackState = {
        name: track,
        sender,
        paused: paused.has(track),
        framesSent: 0,
        emittedUnpaused: 0,
        droppedUnpaused: 0,
        emittedAtResume: emitted,
        droppedAtResume: counters?.framesDropped,
        lastSentAt: this.#lastReportAt,
        emittedAtLastSent: emitted,
        freezeOpen: false,
        sentAtReport: 0,
        emittedUnpausedAtReport: 0,
        pausedInInterval: paused.has(track),
        freezes: 0,
        packetsSentAtReport: undefined,
        nacked: new Set(),
        lastReport: undefined,
        reportAtReport: undefined,
        jitterMs: undefined,
      };
      this.#tracks.set(track, state);
      this.#bySsrc.set(sender.ssrc, state);
    }
  }

  /** Starts listening to RTCP and reporting every interval. */
  start(): void {
    if (this.#timer || this.#stopped) return;
    const transports = new Set<NonNullable<RTCRtpSender['dtlsTransport']>>();
    for (const { sender } of this.#tracks.values()) if (sender.dtlsTransport) transports.add(sender.dtlsTransport);
    for (const transport of transports) {
      this.#disposers.push(transport.onRtcp.subscribe((packet) => this.onRtcp(packet as RtcpLike)).unSubscribe);
    }
    // Baseline packet counts, so the first interval's NACK ratio has a denominator.
    void this.#readSenderStats().then((stats) => {
      for (const [state, s] of stats) state.packetsSentAtReport ??= s.packetsSent;
    });
    this.#timer = setInterval(() => void this.report(), this.#options.intervalMs ?? MEDIA_STATS_INTERVAL_MS);
    this.#timer.unref?.();
  }

  stop(): void {
    this.#stopped = true;
    clearInterval(this.#timer);
    this.#timer = undefined;
    for (const dispose of this.#disposers.splice(0)) dispose();
  }

  /** A frame of `track` was handed to this connection's RTP sender. */
  noteFrameSent(track: string): void {
    const state = this.#tracks.get(track);
    if (!state) return;
    const now = this.#now();
    const emitted = this.#options.trackCounters(track)?.framesEmitted;
    if (!state.freezeOpen && !state.paused && this.#isFreeze(state, now, emitted)) state.freezes++;
    state.freezeOpen = false;
    state.framesSent++;
    state.lastSentAt = now;
    state.emittedAtLastSent = emitted;
  }

  /** The connection paused (or resumed) an output track. */
  setPaused(track: string, paused: boolean): void {
    const state = this.#tracks.get(track);
    if (!state || state.paused === paused) return;
    const counters = this.#options.trackCounters(track);
    const emitted = counters?.framesEmitted;
    if (paused) {
      state.emittedUnpaused += delta(emitted, state.emittedAtResume);
      state.droppedUnpaused += delta(counters?.framesDropped, state.droppedAtResume);
      state.pausedInInterval = true;
    } else {
      state.emittedAtResume = emitted;
      state.droppedAtResume = counters?.framesDropped;
      // The gap since the last frame before the pause is not a freeze.
      state.lastSentAt = this.#now();
      state.emittedAtLastSent = emitted;
      state.freezeOpen = false;
    }
    state.paused = paused;
  }

  /** Feeds one RTCP packet from the client (public for tests). */
  onRtcp(packet: RtcpLike): void {
    if ((packet.type === RTCP_RR || packet.type === RTCP_SR) && packet.reports) {
      for (const report of packet.reports) {
        const state = this.#bySsrc.get(report.ssrc);
        if (!state) continue;
        // Cumulative lost is a signed 24-bit field; werift reads it unsigned.
        const lost = report.packetsLost > 0x7f_ffff ? report.packetsLost - 0x100_0000 : report.packetsLost;
        state.lastReport = { lost, highest: report.highestSequence };
        state.reportAtReport ??= state.lastReport;
        const clockRate = state.sender.codec?.clockRate ?? 90_000;
        state.jitterMs = (report.jitter / clockRate) * 1000;
      }
    } else if (packet.type === RTCP_RTPFB && packet.feedback?.count === GENERIC_NACK_FORMAT) {
      const state = this.#bySsrc.get(packet.feedback.mediaSourceSsrc ?? -1);
      if (state) for (const seq of nackedSequenceNumbers(packet)) state.nacked.add(seq);
    }
  }

  /** Measures the interval since the last report, sends it and returns it (public for tests). */
  async report(): Promise<MediaStatsData | undefined> {
    if (this.#sampling || this.#stopped) return undefined;
    this.#sampling = true;
    try {
      const senderStats = await this.#readSenderStats();
      if (this.#stopped) return undefined;
      const data = this.#measure(senderStats);
      this.#options.send(data);
      return data;
    } catch (error) {
      this.#options.log?.warn('media stats could not be measured', { error });
      return undefined;
    } finally {
      this.#sampling = false;
    }
  }

  #measure(senderStats: Map<TrackState, SenderStats>): MediaStatsData {
    const now = this.#now();
    const seconds = Math.max(0.001, (now - this.#lastReportAt) / 1000);
    this.#lastReportAt = now;
    const declared = this.#options.declaredFps;
    const tracks: Record<string, TrackMediaStats> = {};
    let loss: number | undefined;
    let jitterMs: number | undefined;
    let rttMs: number | undefined;
    let freezes = 0;
    let worst: { fps: number; target: number } | undefined;
    let slowest: number | undefined;
    for (const state of this.#tracks.values()) {
      const counters = this.#options.trackCounters(state.name);
      const emitted = counters?.framesEmitted;
      // An open freeze (no frame yet) counts now, so a stall shows in the report it happens in.
      if (!state.freezeOpen && !state.paused && this.#isFreeze(state, now, emitted)) {
        state.freezes++;
        state.freezeOpen = true;
      }
      const emittedUnpaused = state.emittedUnpaused + (state.paused ? 0 : delta(emitted, state.emittedAtResume));
      const dropped = state.droppedUnpaused + (state.paused ? 0 : delta(counters?.framesDropped, state.droppedAtResume));
      const sent = state.framesSent - state.sentAtReport;
      const fps = sent / seconds;
      const emittedFps = (emittedUnpaused - state.emittedUnpausedAtReport) / seconds;
      const playout = counters?.playout;
      tracks[state.name] = {
        frames_sent: state.framesSent,
        frames_dropped: dropped,
        fps: round(fps, 1),
        ...(playout
          ? {
              playout: {
                mode: playout.mode,
                fps: round(playout.fps, 1),
                production_fps: playout.productionFps === undefined ? null : round(playout.productionFps, 1),
              },
            }
          : {}),
      };
      if (!state.paused && !state.pausedInInterval) {
        // What could have been sent: the declared rate, or what the model emitted if less.
        const target = emitted === undefined ? (declared ?? 0) : Math.min(declared ?? Infinity, emittedFps);
        if (target > 0 && (worst === undefined || fps / target < worst.fps / worst.target)) worst = { fps, target };
        slowest = slowest === undefined ? fps : Math.min(slowest, fps);
      }
      freezes += state.freezes;
      const stats = senderStats.get(state);
      let trackLoss: number | undefined;
      const [from, to] = [state.reportAtReport, state.lastReport];
      if (from && to && to.highest > from.highest)
        trackLoss = Math.max(0, Math.min(1, (to.lost - from.lost) / (to.highest - from.highest)));
      if (stats?.packetsSent !== undefined && state.packetsSentAtReport !== undefined) {
        const packets = stats.packetsSent - state.packetsSentAtReport;
        if (packets > 0) trackLoss = Math.max(trackLoss ?? 0, Math.min(1, state.nacked.size / packets));
      }
      if (trackLoss !== undefined) loss = Math.max(loss ?? 0, trackLoss);
      if (state.jitterMs !== undefined) jitterMs = Math.max(jitterMs ?? 0, state.jitterMs);
      if (stats?.rttMs !== undefined) rttMs = Math.max(rttMs ?? 0, stats.rttMs);
      // Next interval.
      state.sentAtReport = state.framesSent;
      state.emittedUnpausedAtReport = emittedUnpaused;
      state.pausedInInterval = state.paused;
      state.freezes = 0;
      if (stats?.packetsSent !== undefined) state.packetsSentAtReport = stats.packetsSent;
      state.nacked.clear();
      state.reportAtReport = state.lastReport;
    }
    const score = qualityScore({
      loss,
      jitterMs,
      rttMs,
      fps: worst?.fps,
      targetFps: worst?.target,
      freezes,
    });
    return {
      score,
      loss: round(loss ?? 0, 4),
      jitter_ms: round(jitterMs ?? 0, 1),
      rtt_ms: rttMs === undefined ? null : round(rttMs, 1),
      fps: worst ? round(worst.fps, 1) : slowest === undefined ? null : round(slowest, 1),
      declared_fps: declared ?? null,
      freezes,
      interval_ms: Math.round(seconds * 1000),
      tracks,
    };
  }

  #isFreeze(state: TrackState, now: number, emitted: number | undefined): boolean {
    if (now - state.lastSentAt < FREEZE_THRESHOLD_MS) return false;
    // The model emitted something besides the frame now being sent: it was not simply idle.
    return emitted !== undefined && state.emittedAtLastSent !== undefined && emitted - state.emittedAtLastSent >= 2;
  }

  async #readSenderStats(): Promise<Map<TrackState, SenderStats>> {
    const result = new Map<TrackState, SenderStats>();
    await Promise.all(
      [...this.#tracks.values()].map(async (state) => {
        try {
          result.set(state, senderStatsOf(await state.sender.getStats()));
        } catch {
          // not negotiated or closing: nothing measured for this sender
        }
      }),
    );
    return result;
  }
}

interface SenderStats {
  readonly packetsSent: number | undefined;
  readonly rttMs: number | undefined;
}

function senderStatsOf(report: ReadonlyMap<string, object>): SenderStats {
  let packetsSent: number | undefined;
  let rtcpRtt: number | undefined;
  let iceRtt: number | undefined;
  let selectedPair: string | undefined;
  const pairs = new Map<string, number>();
  report.forEach((value) => {
    const entry = value as Record<string, unknown>;
    switch (entry['type']) {
      case 'outbound-rtp':
        if (typeof entry['packetsSent'] === 'number') packetsSent = entry['packetsSent'];
        break;
      case 'remote-inbound-rtp':
        if (typeof entry['roundTripTime'] === 'number') rtcpRtt = entry['roundTripTime'] * 1000;
        break;
      case 'transport':
        if (typeof entry['selectedCandidatePairId'] === 'string') selectedPair = entry['selectedCandidatePairId'];
        break;
      case 'candidate-pair':
        if (typeof entry['currentRoundTripTime'] === 'number') pairs.set(entry['id'] as string, entry['currentRoundTripTime'] * 1000);
        if (entry['nominated'] === true && typeof entry['currentRoundTripTime'] === 'number')
          iceRtt ??= entry['currentRoundTripTime'] * 1000;
        break;
    }
  });
  if (selectedPair !== undefined && pairs.has(selectedPair)) iceRtt = pairs.get(selectedPair);
  return { packetsSent, rttMs: rtcpRtt ?? iceRtt };
}

/**
 * The sequence numbers a generic NACK asks for. werift 0.24.4 parses a NACK's FCI entries to
 * the end of the whole compound RTCP packet, so the REMB (etc.) that libwebrtc sends after it
 * in the same compound appear as extra "lost" numbers; only the first `header.length − 2`
 * entries (PID + bitmask of 16) are the NACK's. werift also does not wrap PID + n at 65536.
 */
export function nackedSequenceNumbers(packet: RtcpLike): number[] {
  const lost = packet.feedback?.lost ?? [];
  const length = packet.header?.length;
  const fciCount = typeof length === 'number' ? length - 2 : Infinity;
  const result: number[] = [];
  let fcis = 0;
  let pid = -Infinity;
  let previous = -Infinity;
  for (const seq of lost) {
    // A member of the current FCI's bitmask: (pid, pid + 16], ascending.
    if (seq > previous && seq > pid && seq <= pid + 16) {
      result.push(seq & 0xffff);
      previous = seq;
      continue;
    }
    if (fcis >= fciCount) break;
    fcis++;
    pid = seq;
    previous = seq;
    result.push(seq & 0xffff);
  }
  return result;
}

/** How far a counter moved since a snapshot; 0 when either is unknown. */
function delta(now: number | undefined, then: number | undefined): number {
  return now !== undefined && then !== undefined ? Math.max(0, now - then) : 0;
}

function round(value: number, decimals: number): number {
  const f = 10 ** decimals;
  return Math.round(value * f) / f;
}
