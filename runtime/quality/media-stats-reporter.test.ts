import { afterEach, describe, expect, it } from 'vitest';
import type { RTCRtpSender } from 'werift';
import type { MediaStatsData } from '../../protocol/messages.ts';
import { MediaStatsReporter, nackedSequenceNumbers, type OutputTrackCounters, type RtcpLike } from './media-stats-reporter.ts';

/** A stand-in for werift's RTCRtpSender: what the reporter reads of it. */
function fakeSender(ssrc: number) {
  const listeners = new Set<(packet: unknown) => void>();
  const sender = {
    ssrc,
    codec: { clockRate: 90_000 },
    packetsSent: 0,
    rttSeconds: undefined as number | undefined,
    dtlsTransport: {
      onRtcp: {
        subscribe: (fn: (packet: unknown) => void) => {
          listeners.add(fn);
          return { unSubscribe: () => listeners.delete(fn) };
        },
      },
    },
    getStats: async () =>
      new Map<string, object>([
        ['out', { type: 'outbound-rtp', packetsSent: sender.packetsSent }],
        ...(sender.rttSeconds === undefined
          ? []
          : [['remote', { type: 'remote-inbound-rtp', roundTripTime: sender.rttSeconds }] as [string, object]]),
        ['pair', { type: 'candidate-pair', id: 'pair', nominated: true, currentRoundTripTime: 0.004 }],
      ]),
    rtcp: (packet: RtcpLike) => listeners.forEach((fn) => fn(packet)),
    listeners,
  };
  return sender;
}

function setup(options: { declaredFps?: number; paused?: string[]; playout?: OutputTrackCounters['playout'] } = {}) {
  let now = 0;
  let emitted = 0;
  let trackDropped = 0;
  const current = { playout: options.playout };
  const sender = fakeSender(1234);
  const sent: MediaStatsData[] = [];
  const reporter = new MediaStatsReporter({
    senders: [{ track: 'main_video', sender: sender as unknown as RTCRtpSender }],
    declaredFps: options.declaredFps ?? 30,
    trackCounters: (track) =>
      track === 'main_video' ? { framesEmitted: emitted, framesDropped: trackDropped, playout: current.playout } : undefined,
    pausedTracks: options.paused ?? [],
    send: (data) => sent.push(data),
    intervalMs: 60_000, // reports are triggered by hand
    now: () => now,
  });
  reporters.push(reporter);
  /** The model emits and the connection sends `count` frames at `fps`. */
  const stream = (count: number, fps = 30, { send = true } = {}) => {
    for (let i = 0; i < count; i++) {
      now += 1000 / fps;
      emitted++;
      if (send) reporter.noteFrameSent('main_video');
    }
  };
  return {
    reporter,
    sender,
    sent,
    stream,
    advance: (ms: number) => {
      now += ms;
    },
    emit: (n: number) => {
      emitted += n;
    },
    /** The track drops `n` frames (for every viewer). */
    drop: (n: number) => {
      trackDropped += n;
    },
    /** The track's playout changes (the adaptive pacer picked another rate). */
    setPlayout: (playout: OutputTrackCounters['playout']) => {
      current.playout = playout;
    },
  };
}

const reporters: MediaStatsReporter[] = [];
afterEach(() => {
  for (const r of reporters.splice(0)) r.stop();
});

describe('MediaStatsReporter', () => {
  it('reports a clean stream as score 10 with its frame rate and counts', async () => {
    const t = setup();
    t.reporter.start();
    await Promise.resolve();
    t.stream(60);
    t.sender.packetsSent = 240;
    const data = await t.reporter.report();
    expect(data).toMatchObject({ score: 10, loss: 0, fps: 30, declared_fps: 30, freezes: 0, interval_ms: 2000, rtt_ms: 4 });
    expect(data?.tracks).toEqual({ main_video: { frames_sent: 60, frames_dropped: 0, fps: 30 } });
    expect(t.sent).toEqual([data]);
  });

  it("reports each track's playout: the declared rate when fixed, the chosen rate and production estimate when adaptive", async () => {
    const fixed = setup({ playout: { mode: 'fixed', fps: 30 } });
    fixed.stream(60);
    expect((await fixed.reporter.report())?.tracks['main_video']).toEqual({
      frames_sent: 60,
      frames_dropped: 0,
      fps: 30,
      playout: { mode: 'fixed', fps: 30, production_fps: null },
    });

    const adaptive = setup({ declaredFps: 24, playout: { mode: 'adaptive', fps: 24, productionFps: undefined } });
    adaptive.stream(32, 16);
    expect((await adaptive.reporter.report())?.tracks['main_video']?.playout).toEqual({ mode: 'adaptive', fps: 24, production_fps: null });
    adaptive.setPlayout({ mode: 'adaptive', fps: 16.1234, productionFps: 16.0789 });
    adaptive.stream(32, 16);
    expect((await adaptive.reporter.report())?.tracks['main_video']?.playout).toEqual({
      mode: 'adaptive',
      fps: 16.1,
      production_fps: 16.1,
    });
  });

  it('measures loss from NACKs (before recovery) and from receiver reports, jitter and RTCP RTT', async () => {
    const t = setup();
    t.reporter.start();
    await new Promise((resolve) => setTimeout(resolve, 0)); // baseline packet count (0)
    t.sender.packetsSent = 200;
    t.sender.rttSeconds = 0.25;
    // 10 distinct packets NACKed, one of them twice.
    t.sender.rtcp({
      type: 205,
      header: { length: 4 },
      feedback: { count: 1, mediaSourceSsrc: 1234, lost: [100, 101, 102, 103, 104, 500, 501, 502, 503, 504] },
    });
    t.sender.rtcp({ type: 205, header: { length: 3 }, feedback: { count: 1, mediaSourceSsrc: 1234, lost: [100] } });
    t.sender.rtcp({ type: 205, header: { length: 3 }, feedback: { count: 1, mediaSourceSsrc: 999, lost: [1, 2, 3] } }); // another stream
    t.sender.rtcp({ type: 201, reports: [{ ssrc: 1234, packetsLost: 0, highestSequence: 1000, jitter: 900 }] });
    t.sender.rtcp({ type: 201, reports: [{ ssrc: 1234, packetsLost: 1, highestSequence: 1200, jitter: 1800 }] });
    t.stream(60);
    const data = await t.reporter.report();
    expect(data?.loss).toBe(0.05); // 10 / 200 > 1 / 200 from the RRs
    expect(data?.jitter_ms).toBe(20);
    expect(data?.rtt_ms).toBe(250);
    expect(data?.score).toBeLessThan(10);
    // Next interval: RR loss only (no NACKs), 20 of 100 expected lost.
    t.sender.packetsSent = 300;
    t.sender.rtcp({ type: 200, reports: [{ ssrc: 1234, packetsLost: 21, highestSequence: 1300, jitter: 90 }] });
    t.stream(60);
    const next = await t.reporter.report();
    expect(next?.loss).toBe(0.2);
    expect(next?.jitter_ms).toBe(1);
    expect(next!.score).toBeLessThan(data!.score);
  });

  it('reads a negative cumulative loss (duplicates) as signed', async () => {
    const t = setup();
    t.reporter.start();
    t.sender.rtcp({ type: 201, reports: [{ ssrc: 1234, packetsLost: 0, highestSequence: 10, jitter: 0 }] });
    t.sender.rtcp({ type: 201, reports: [{ ssrc: 1234, packetsLost: 0xffffff, highestSequence: 110, jitter: 0 }] });
    t.stream(60);
    expect((await t.reporter.report())?.loss).toBe(0);
  });

  it('counts a freeze: ≥ 500 ms without a sent frame while the model emits, once', async () => {
    const t = setup();
    t.stream(30);
    t.stream(25, 30, { send: false }); // 833 ms of emitted frames that were not sent
    const during = await t.reporter.report();
    expect(during?.freezes).toBe(1); // visible while it lasts
    t.stream(35);
    const after = await t.reporter.report();
    expect(after?.freezes).toBe(0); // the frame that ended it did not count it again
    // A gap while the model emitted nothing is not a freeze.
    t.advance(2_000);
    t.stream(60);
    expect((await t.reporter.report())?.freezes).toBe(0);
  });

  it('scores by what the model emitted, not the declared fps, when the model is slower', async () => {
    const t = setup({ declaredFps: 30 });
    t.stream(20, 10); // the model emits 10 fps, every frame sent
    const data = await t.reporter.report();
    expect(data?.fps).toBe(10);
    expect(data?.score).toBe(10);
    // The network (or pipeline) delivers a third of what the model emits: that is scored.
    for (let i = 0; i < 60; i++) t.stream(1, 30, { send: i % 3 === 0 });
    const slow = await t.reporter.report();
    expect(slow?.fps).toBe(10);
    expect(slow!.score).toBeLessThan(5);
  });

  it("counts the track's drops while this connection has it unpaused", async () => {
    const t = setup();
    t.drop(2);
    t.stream(60);
    expect((await t.reporter.report())?.tracks['main_video']?.frames_dropped).toBe(2);
    t.reporter.setPaused('main_video', true);
    t.drop(5); // while paused: not this client's loss
    t.reporter.setPaused('main_video', false);
    t.drop(1);
    t.stream(60);
    expect((await t.reporter.report())?.tracks['main_video']?.frames_dropped).toBe(3);
  });

  it('leaves paused tracks out of fps, drops and freezes', async () => {
    const t = setup({ paused: ['main_video'] });
    t.stream(60, 30, { send: false });
    t.drop(10);
    const paused = await t.reporter.report();
    expect(paused).toMatchObject({ score: 10, fps: null, freezes: 0 });
    expect(paused?.tracks['main_video']).toEqual({ frames_sent: 0, frames_dropped: 0, fps: 0 });
    t.reporter.setPaused('main_video', false);
    t.stream(60);
    const resumed = await t.reporter.report();
    expect(resumed?.freezes).toBe(0);
    expect(resumed?.tracks['main_video']).toMatchObject({ frames_sent: 60, frames_dropped: 0 });
    t.stream(60);
    expect((await t.reporter.report())?.fps).toBe(30);
  });

  it('stops listening and reporting when stopped', async () => {
    const t = setup();
    t.reporter.start();
    expect(t.sender.listeners.size).toBe(1);
    t.reporter.stop();
    expect(t.sender.listeners.size).toBe(0);
    expect(await t.reporter.report()).toBeUndefined();
    expect(t.sent).toEqual([]);
  });
});

describe('nackedSequenceNumbers', () => {
  it('keeps only the FCI entries the header covers (werift parses to the end of the compound)', () => {
    // One FCI (length 3): PID 48338 with no bitmask; the rest is REMB ("RE" = 21061...) parsed as NACK.
    expect(nackedSequenceNumbers({ header: { length: 3 }, feedback: { lost: [48338, 36814, 36815, 0, 1, 21061] } })).toEqual([48338]);
    // Two FCIs: PID 10 + bits for 11, 13; PID 40 + bit for 41.
    expect(nackedSequenceNumbers({ header: { length: 4 }, feedback: { lost: [10, 11, 13, 40, 41, 7, 8] } })).toEqual([10, 11, 13, 40, 41]);
  });

  it('wraps PID + n at 65536, which werift does not', () => {
    expect(nackedSequenceNumbers({ header: { length: 3 }, feedback: { lost: [65534, 65535, 65536, 65537] } })).toEqual([
      65534, 65535, 0, 1,
    ]);
  });

  it('takes every entry when the header length is unknown', () => {
    expect(nackedSequenceNumbers({ feedback: { lost: [1, 2, 100] } })).toEqual([1, 2, 100]);
  });
});
