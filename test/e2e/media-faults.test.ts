/**
 * Media faults end to end (issue 8): our Node client (wrtc, VP8) watches the `pattern` model
 * while the runtime's test-only network impairment (`faults.network`, every datagram both ways,
 * see runtime/webrtc/network-faults.ts) puts 5 % loss, then a 150 ms RTT, then a 2 s blackout
 * on the link, switched live on one session. Through all of it the session must survive (the
 * client stays ready, a command still gets its reply), frames must keep decoding, and after the
 * blackout the picture must come back — the client asks for a keyframe (PLI) and gets one.
 * Figures for more conditions and repetitions: bench/media-faults.ts, docs/reliability.md.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MediaQuality } from '../../client/stats.ts';
import pattern from '../../models/examples/pattern/index.ts';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import { NetworkFaults } from '../../runtime/webrtc/network-faults.ts';
import { connectWatchedClient, retransmittedPackets, type WatchedClient } from '../support/media-fault-probe.ts';
import { waitUntil } from '../support/video-probe.ts';

const LOOPBACK = '127.0.0.1';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('media faults: loss, delay and a blackout on a live session', () => {
  const network = new NetworkFaults();
  let runtime: Runtime;
  let watched: WatchedClient;
  const reports: MediaQuality[] = [];

  beforeAll(async () => {
    runtime = await startRuntime({ model: pattern as never, port: 0, host: LOOPBACK, ice: { hostAddresses: [LOOPBACK] }, playground: false, faults: { network } });
    watched = await connectWatchedClient(runtime.url);
    watched.client.on('mediaStats', (quality) => reports.push(quality));
    await waitUntil(() => watched.frames.count > 0, 10_000, 'the first decoded frame');
  }, 20_000);

  afterAll(async () => {
    await watched?.close();
    await runtime?.close();
  });

  /** Frames decoded in the next `ms`, and the longest gap between them. */
  async function watch(ms: number): Promise<{ frames: number; longestGapMs: number }> {
    const from = performance.now();
    await sleep(ms);
    const to = performance.now();
    return { frames: watched.frames.between(from, to), longestGapMs: watched.frames.longestGap(from, to) };
  }

  it('keeps decoding with 5 % loss each way (NACK retransmission)', async () => {
    const resentBefore = await retransmittedPackets(runtime.url);
    network.set({ lossPercent: 5 });
    const { frames, longestGapMs } = await watch(4_000);
    network.clear();
    // 30 fps for 4 s is 120 frames; well over half must decode, and the picture never stalls for a second.
    expect(frames).toBeGreaterThanOrEqual(70);
    expect(longestGapMs).toBeLessThan(1_000);
    expect(network.counters.dropped).toBeGreaterThan(10);
    expect(await retransmittedPackets(runtime.url)).toBeGreaterThan(resentBefore);
  }, 10_000);

  it('keeps decoding with a 150 ms RTT (75 ms each way), and the runtime measures it', async () => {
    network.set({ delayMs: 75 });
    const reportsBefore = reports.length;
    const { frames, longestGapMs } = await watch(4_500);
    expect(frames).toBeGreaterThanOrEqual(90);
    expect(longestGapMs).toBeLessThan(500);
    // The runtime's RTT comes from the client's RTCP receiver reports, which the delay slows both
    // ways; a report's figure may still average in the time before the delay.
    const measured = () => reports.slice(reportsBefore).map((r) => r.rtt_ms ?? 0);
    await waitUntil(() => measured().some((rtt) => rtt >= 140), 4_000, `an RTT ≥ 140 ms in media_stats (got ${measured().join(', ')})`);
    expect(Math.max(...measured())).toBeLessThan(400);
    network.clear();
  }, 12_000);

  it('survives a 2 s blackout: video comes back (resent packets or a keyframe after PLI), commands round-trip', async () => {
    await sleep(500); // the delayed datagrams of the previous test drain
    const before = await watched.counters();
    const resentBefore = await retransmittedPackets(runtime.url);
    network.blackout(2_000);
    const startedAt = performance.now();
    await sleep(2_000);
    const endedAt = performance.now();
    expect(watched.frames.between(startedAt + 1_000, endedAt)).toBe(0); // it really was dark
    await waitUntil(() => watched.frames.firstAfter(endedAt) !== undefined, 5_000, 'a decoded frame after the blackout');
    const recoveredMs = watched.frames.firstAfter(endedAt)! - endedAt;
    const { frames, longestGapMs } = await watch(2_000);
    const after = await watched.counters();
    const resent = (await retransmittedPackets(runtime.url)) - resentBefore;
    const detail = JSON.stringify({ recoveredMs, resent, longestGapMs, before, after, counters: network.counters });
    expect(recoveredMs, detail).toBeLessThan(3_000);
    expect(frames, detail).toBeGreaterThanOrEqual(40);
    expect(longestGapMs, detail).toBeLessThan(500);
    // 2 s of this stream (~270 packets) fits the runtime's send history (512 packets), so the
    // client usually gets the missing packets again by NACK; when it does not, it asks for a
    // keyframe (PLI) and must decode one.
    const askedForKeyframe = after.pliCount > before.pliCount;
    expect(resent > 0 || askedForKeyframe, detail).toBe(true);
    if (askedForKeyframe) expect(after.keyFramesDecoded, detail).toBeGreaterThan(before.keyFramesDecoded);
    expect(watched.client.getStatus()).toBe('ready');
    expect((await watched.client.sendCommand('set_color', { color: '#00ff00' }))?.type).toBe('color_changed');
  }, 15_000);
});
