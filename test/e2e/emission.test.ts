/**
 * Backpressured emission (media engine part 1), observed end to end with a Node client:
 * pacing at the track's fps, emit going on at that pace (nothing sent) while the only viewer has
 * paused the track, and sending again on resume, drop policies that never block and count drops, batches split and paced, nothing sent for empty
 * ticks, and exactly one black frame on connection opening and on flush.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ArclightClient } from '../../client/node.ts';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import { DEFAULT_QUEUE_FRAMES } from '../../runtime/media/output-video-track.ts';
import emissionModel, { emission } from '../fixtures/emission-model.ts';
import { VideoProbe, waitUntil, waitUntilStill } from '../support/video-probe.ts';

const LOOPBACK = '127.0.0.1';
const BLACK_MAX = 30; // Y of a black frame after coding (16 nominal)
const GREEN_MIN = 120; // Y of the model's green frames (145 nominal)
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const FPS = 30; // the emission model's
const INTERVAL_MS = 1000 / FPS;
/** Frames between emit() and the wire: the track's queue and the one the pacer holds. */
const IN_FLIGHT = DEFAULT_QUEUE_FRAMES + 1;
const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function counter(runtime: Runtime, metric: 'framesSent' | 'framesDropped', labels: Record<string, string>): Promise<number> {
  const values = (await runtime.metrics[metric].get()).values;
  return values
    .filter((v) => Object.entries(labels).every(([k, x]) => (v.labels as Record<string, unknown>)[k] === x))
    .reduce((sum, v) => sum + v.value, 0);
}

describe('backpressured emission', () => {
  let runtime: Runtime;
  let client: ArclightClient;
  let probe: VideoProbe;

  beforeAll(async () => {
    emission.mode = 'free';
    runtime = await startRuntime({ model: emissionModel as never, port: 0, host: LOOPBACK, ice: { hostAddresses: [LOOPBACK] } });
    client = new ArclightClient({ modelName: 'emission', local: true, localRuntimeUrl: runtime.url });
    const probed = new Promise<VideoProbe>((resolve) => client.on('trackReceived', (_n, track) => resolve(new VideoProbe(track))));
    await client.connect();
    probe = await probed;
    await waitUntil(() => probe.frames > 10, 10_000, 'frames');
  });
  afterAll(async () => {
    probe?.stop();
    await client?.disconnect();
    await runtime?.close();
  });
  beforeEach(async () => {
    emission.mode = 'free';
    client.resumeTrack('main_video');
    // The data channel is ordered and the runtime applies a subscription change as it reads it:
    // a command's reply after it means the resume is in force (however slow the machine).
    await client.sendCommand('set_mode', { mode: 'free' });
    await sleep(200);
  });

  /** Pauses the track for this client and returns once the runtime has applied it (see beforeEach). */
  async function pause(): Promise<void> {
    client.pauseTrack('main_video');
    await client.sendCommand('set_mode', { mode: emission.mode });
  }

  /** The runtime's counters for the track, read together with the model's own count. */
  async function snapshot(): Promise<{ emitted: number; sent: number; dropped: number; queueFull: number }> {
    const track = { track: 'main_video' };
    const [sent, dropped, queueFull] = await Promise.all([
      counter(runtime, 'framesSent', track),
      counter(runtime, 'framesDropped', track),
      counter(runtime, 'framesDropped', { ...track, reason: 'queue_full' }),
    ]);
    return { emitted: emission.emitted, sent, dropped, queueFull };
  }

  it('opens the connection on exactly one black frame, then the model picture', () => {
    const firstGreen = probe.centreLuma.findIndex((y) => y > GREEN_MIN);
    expect(firstGreen, JSON.stringify(probe.centreLuma.slice(0, 10))).toBe(1);
    expect(probe.centreLuma[0]).toBeLessThan(BLACK_MAX);
  });

  it('paces a model that emits as fast as it can to the track fps', async () => {
    const before = await snapshot();
    const from = performance.now();
    await sleep(2_000);
    const after = await snapshot();
    const elapsedMs = performance.now() - from;
    const [emitted, sent, dropped] = [after.emitted - before.emitted, after.sent - before.sent, after.dropped - before.dropped];
    const released = emission.freeEmitAt.filter((t) => t >= from);
    const gaps = released.slice(1).map((t, i) => t - released[i]!);
    const detail = JSON.stringify({ emitted, sent, dropped, elapsedMs, medianGapMs: gaps.length > 0 ? median(gaps) : null });
    // The bounds come from the window as it really was, not the 2 s asked for: a loaded machine
    // sleeps longer and encodes slower. The pacer never lets two frames leave closer than an
    // interval (less its 4 ms slack and a millisecond of timer rounding), so the model, released
    // only as frames leave, cannot beat that; without pacing it would run at encoder speed
    // (hundreds per second).
    expect(emitted, detail).toBeLessThanOrEqual(Math.floor(elapsedMs / (INTERVAL_MS - 5)) + 1 + IN_FLIGHT);
    // …and it is held back by nothing else: each frame that left (sent, or dropped while the
    // picture restarted) let one more in.
    expect(sent, detail).toBeGreaterThan(0);
    expect(Math.abs(emitted - sent - dropped), detail).toBeLessThanOrEqual(IN_FLIGHT);
    // Nor is it held back by the pacer beyond the track's fps: most releases come an interval
    // apart. The median, not the count in 2 s, so that the odd stall of a loaded machine does not
    // count against the pacer (a pacer at 20 fps would show 50 ms here).
    expect(gaps.length, detail).toBeGreaterThan(10);
    expect(median(gaps), detail).toBeLessThan(1.25 * INTERVAL_MS);
  });

  it('a paused viewer does not stop the model: with block, emits go on at the track pace, nothing is sent, and resuming sends again', async () => {
    // Spec: pauseTrack unsubscribes and "the model keeps emitting". Backpressure comes from
    // viewers that play; with the only one paused, the pacer takes frames at the track's pace and
    // drops them before the encoder (reason "paused").
    const pausedDrops = () => counter(runtime, 'framesDropped', { track: 'main_video', reason: 'paused' });
    await pause();
    const before = await snapshot();
    const dropsBefore = await pausedDrops();
    const startedAt = performance.now();
    await waitUntil(() => emission.emitted - before.emitted >= 30, 20_000, 'emission to go on while paused');
    const elapsedMs = performance.now() - startedAt;
    const after = await snapshot();
    const detail = JSON.stringify({ before, after, elapsedMs });
    // Not sent: a frame already in the encoder when the pause came may still leave.
    expect(after.sent - before.sent, detail).toBeLessThanOrEqual(1);
    expect((await pausedDrops()) - dropsBefore, detail).toBeGreaterThanOrEqual(30 - IN_FLIGHT);
    // Paced, not free-running: no more emits than the elapsed time (as measured) holds intervals.
    expect(after.emitted - before.emitted, detail).toBeLessThanOrEqual(Math.floor(elapsedMs / (INTERVAL_MS - 5)) + 1 + IN_FLIGHT);
    client.resumeTrack('main_video');
    await waitUntil(async () => (await snapshot()).sent > after.sent + 15, 10_000, 'frames sent after resume');
  });

  it('drop policies never block and count their drops', async () => {
    // Counted, not timed: the model tries every ~4 ms, but how many tries a loaded machine fits in
    // a second is not the rule. The rule is that emit() returns at once whatever the queue holds,
    // so the model gets far ahead of what is sent and the difference is counted as dropped.
    for (const mode of ['drop-oldest', 'drop-newest'] as const) {
      emission.mode = mode;
      await client.sendCommand('set_mode', { mode });
      emission.dropEmitMs.length = 0;
      const before = await snapshot();
      await waitUntil(async () => (await snapshot()).queueFull - before.queueFull >= 60, 20_000, `60 ${mode} drops`);
      const after = await snapshot();
      const [emitted, sent, dropped, queueFull] = [
        after.emitted - before.emitted,
        after.sent - before.sent,
        after.dropped - before.dropped,
        after.queueFull - before.queueFull,
      ];
      const detail = JSON.stringify({ mode, emitted, sent, dropped, queueFull, medianEmitMs: median(emission.dropEmitMs) });
      // Every frame emitted in the window was sent or dropped, bar those in flight at either end.
      expect(Math.abs(emitted - sent - dropped), detail).toBeLessThanOrEqual(IN_FLIGHT + 1);
      // Far more got in than left: a blocking emit() could not get more than the queue ahead.
      expect(emitted, detail).toBeGreaterThan(sent + 2 * IN_FLIGHT);
      expect(queueFull, detail).toBeGreaterThanOrEqual(60);
      // And each call came straight back: a blocked one waits for the pacer's next slot, most of
      // an interval (~29 ms here); the median is not moved by the odd stall of a loaded machine.
      expect(median(emission.dropEmitMs), detail).toBeLessThan(INTERVAL_MS / 2);

      // Dropping while no one plays does not block either: nothing leaves, yet emit() returns.
      await pause();
      emission.dropEmitMs.length = 0;
      const paused = await snapshot();
      await waitUntil(() => emission.emitted - paused.emitted >= 20, 10_000, `${mode} emits while paused`);
      const pausedAfter = await snapshot();
      const pausedDetail = JSON.stringify({ mode, paused, pausedAfter, medianEmitMs: median(emission.dropEmitMs) });
      expect(pausedAfter.sent - paused.sent, pausedDetail).toBe(0);
      // Every frame emitted meanwhile is dropped: as queue_full, or taken by the pacer at the
      // track's pace and dropped before the encoder (reason "paused": a paused viewer does not
      // stop the model). Which of the two takes a frame depends on timing; the sum does not.
      const emittedWhilePaused = pausedAfter.emitted - paused.emitted;
      expect(pausedAfter.dropped - paused.dropped, pausedDetail).toBeGreaterThanOrEqual(emittedWhilePaused - IN_FLIGHT);
      expect(median(emission.dropEmitMs), pausedDetail).toBeLessThan(INTERVAL_MS / 2);
      client.resumeTrack('main_video');
    }
  });

  it('sends nothing while the model emits nothing', async () => {
    emission.mode = 'stopped';
    // What the model emitted before it stopped (the queue, the frame in the encoder) must be gone
    // first: instead of a fixed 300 ms, which a loaded machine's encoder can outlast, wait until
    // the runtime's counts and the client's frames have stood still for a while, restarting the
    // wait whenever one moves.
    const track = { track: 'main_video' };
    await waitUntilStill(
      async () => [await counter(runtime, 'framesSent', track), await counter(runtime, 'framesDropped', track), probe.frames],
      500,
      15_000,
      'frames sent, dropped and received',
    );
    const sent = await counter(runtime, 'framesSent', track);
    const received = probe.frames;
    await sleep(1_000);
    expect(await counter(runtime, 'framesSent', track)).toBe(sent);
    expect(probe.frames).toBe(received);
  });

  it('splits a batch and paces it at the track fps', async () => {
    emission.mode = 'stopped';
    await sleep(300);
    const before = probe.frames;
    await client.sendCommand('burst', { n: 15 });
    await waitUntil(() => probe.frames >= before + 15, 10_000, 'the batch');
    // Timed where the pacing happens, not at the client: a loaded machine can hold frames in the
    // client's receive path and hand them over in a clump (arrival gaps of 23 ms against the
    // pacer's 28), which shortened the arrivals' span below its bound (378 ms < 380). The batch's
    // emit() returns once its last frame is queued, i.e. once the frame two before it has left:
    // 11 strictly paced gaps after the first frame, each at least an interval less the pacer's
    // 4 ms slack and a millisecond of timer rounding (~319 ms seen). The bound allows 10 such
    // gaps; a batch paced at half an interval returns in ~140 ms, an unpaced one in a few.
    // Load only makes it longer.
    expect(emission.lastBurstMs).toBeGreaterThanOrEqual(10 * (INTERVAL_MS - 4));
  });

  it('shows exactly one black frame on flush, then the model picture again', async () => {
    const index = probe.centreLuma.length;
    await client.sendCommand('flush', {});
    await waitUntil(
      () => probe.centreLuma.slice(index).some((y, i, all) => y < BLACK_MAX && (all[i + 1] ?? 0) > GREEN_MIN),
      5_000,
      'black then green',
    );
    const after = probe.centreLuma.slice(index);
    const blackRun = after.filter((y) => y < BLACK_MAX);
    expect(blackRun).toHaveLength(1);
  });
});
