/**
 * Media faults end to end (issue 8): our Node client (wrtc, VP8) watches the `pattern` model
 * while the runtime's test-only network impairment (`faults.network`, every datagram both ways,
 * see runtime/faults/network-faults.ts) puts 5 % loss, then a 150 ms RTT, then a 2 s blackout
 * on the link, switched live on one session. Through all of it the session must survive (the
 * client stays ready, a command still gets its reply), frames must keep decoding, and after the
 * blackout the picture must come back. libwebrtc gets a 2 s gap back by NACK from the runtime's
 * send history, so the keyframe-after-PLI path is checked with a werift client (H.264, decoded
 * with node-av) that asks for a keyframe as soon as it loses the picture.
 * Figures for more conditions and repetitions: bench/media-faults.ts, docs/reliability.md.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { valueFromText } from '../../bench/support/process-probe.ts';
import type { MediaQuality } from '../../client/stats.ts';
import pattern from '../../models/examples/pattern/index.ts';
import type { Runtime } from '../../runtime/index.ts';
import { startRuntimeWithFaults } from '../../runtime/faults/start-runtime-with-faults.ts';
import { NetworkFaults } from '../../runtime/faults/network-faults.ts';
import { decodeTrack, openWeriftPeer, type WeriftPeer } from '../support/werift-peer.ts';
import { connectWatchedClient, FrameArrivals, retransmittedPackets, type WatchedClient } from '../support/media-fault-probe.ts';
import { waitUntil } from '../support/video-probe.ts';

const LOOPBACK = '127.0.0.1';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('media faults: loss, delay and a blackout on a live session', () => {
  const network = new NetworkFaults();
  let runtime: Runtime;
  let watched: WatchedClient;
  const reports: MediaQuality[] = [];

  beforeAll(async () => {
    runtime = await startRuntimeWithFaults(
      { model: pattern as never, port: 0, host: LOOPBACK, ice: { hostAddresses: [LOOPBACK] }, playground: false },
      { network },
    );
    watched = await connectWatchedClient(runtime.url);
    watched.client.on('mediaStats', (quality) => reports.push(quality));
    await waitUntil(() => watched.frames.count > 0, 10_000, 'the first decoded frame');
  }, 20_000);

  afterAll(async () => {
    await watched?.close();
    await runtime?.close();
  });

  /**
   * Frames decoded in the next `ms` and the longest gap between them, beside the frames the
   * runtime sent meanwhile and the longest gap between those (its frame tap sees each frame as the
   * pacer lets it go). The decoded side is judged against the sent side, not against 30 fps: a
   * loaded 2-core machine sends fewer frames a second, and can stall the sender, which no client
   * recovery can make up for.
   */
  async function watch(ms: number): Promise<{ frames: number; longestGapMs: number; sent: number; longestSendGapMs: number }> {
    const track = runtime.sessions.current?.outputVideoTrack('main_video');
    expect(track, 'the session and its main_video track').toBeDefined();
    const sends = new FrameArrivals();
    track!.setFrameTap(() => sends.note(performance.now()));
    const from = performance.now();
    await sleep(ms);
    const to = performance.now();
    track!.setFrameTap(undefined);
    return {
      frames: watched.frames.between(from, to),
      longestGapMs: watched.frames.longestGap(from, to),
      sent: sends.between(from, to),
      longestSendGapMs: sends.longestGap(from, to),
    };
  }

  it('keeps decoding with 5 % loss each way (NACK retransmission)', async () => {
    const resentBefore = await retransmittedPackets(runtime.url);
    network.set({ lossPercent: 5 });
    const watch4s = await watch(4_000);
    const { frames, longestGapMs, sent, longestSendGapMs } = watch4s;
    network.clear();
    // Of what was sent (120 frames in 4 s at 30 fps) well over a third must decode (it was 45 of
    // 120), and the picture never stalls for a second longer than the sender did.
    expect(sent, JSON.stringify(watch4s)).toBeGreaterThan(0);
    expect(frames, JSON.stringify(watch4s)).toBeGreaterThanOrEqual(Math.ceil(sent * 0.375));
    expect(longestGapMs - longestSendGapMs, JSON.stringify(watch4s)).toBeLessThan(1_000);
    expect(network.counters.dropped).toBeGreaterThan(10);
    expect(await retransmittedPackets(runtime.url)).toBeGreaterThan(resentBefore);
  }, 10_000);

  it('keeps decoding with a 150 ms RTT (75 ms each way), and the runtime measures it', async () => {
    network.set({ delayMs: 75 });
    const reportsBefore = reports.length;
    const watched45 = await watch(4_500);
    const { frames, longestGapMs, sent, longestSendGapMs } = watched45;
    // A third of what was sent (it was 45, a third of 30 fps): the machine running this may be
    // busy; what matters is that it keeps on.
    expect(sent, JSON.stringify(watched45)).toBeGreaterThan(0);
    expect(frames, JSON.stringify(watched45)).toBeGreaterThanOrEqual(Math.ceil(sent / 3));
    expect(longestGapMs - longestSendGapMs, JSON.stringify(watched45)).toBeLessThan(1_000);
    // The runtime's RTT comes from the client's RTCP receiver reports, which the delay slows both
    // ways; the figure climbs towards 150 ms report by report (seen: 25, 45, 75, 96, 111, 117 ms at
    // 2 s intervals). Since transport-cc is negotiated it climbs slower than with REMB alone (≥ 140
    // within 4 s then), likely because libwebrtc no longer sends a receiver report with every REMB
    // (not verified): ~120 ms after 10–15 s here.
    const measured = () => reports.slice(reportsBefore).map((r) => r.rtt_ms ?? 0);
    await waitUntil(() => measured().some((rtt) => rtt >= 120), 25_000, `an RTT ≥ 120 ms in media_stats (got ${measured().join(', ')})`);
    expect(Math.max(...measured())).toBeLessThan(400);
    network.clear();
  }, 40_000);

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
    const { frames, longestGapMs, sent, longestSendGapMs } = await watch(2_000);
    const after = await watched.counters();
    const resent = (await retransmittedPackets(runtime.url)) - resentBefore;
    const detail = JSON.stringify({
      recoveredMs,
      resent,
      frames,
      sent,
      longestGapMs,
      longestSendGapMs,
      before,
      after,
      counters: network.counters,
    });
    expect(recoveredMs, detail).toBeLessThan(3_000);
    // A third of what was sent in the 2 s after (it was 20, a third of 30 fps), with no stall a
    // second longer than the sender's own.
    expect(sent, detail).toBeGreaterThan(0);
    expect(frames, detail).toBeGreaterThanOrEqual(Math.ceil(sent / 3));
    expect(longestGapMs - longestSendGapMs, detail).toBeLessThan(1_000);
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

describe('media faults: a keyframe after PLI (werift client, H.264)', () => {
  const network = new NetworkFaults();
  let runtime: Runtime;
  let peer: WeriftPeer;
  let decoding: { close(): void } | undefined;
  const decoded: Array<{ readonly at: number; readonly keyframe: boolean }> = [];
  const plis: number[] = [];

  beforeAll(async () => {
    runtime = await startRuntimeWithFaults(
      { model: pattern as never, port: 0, host: LOOPBACK, ice: { hostAddresses: [LOOPBACK] }, playground: false },
      { network },
    );
    peer = await openWeriftPeer(runtime.url, { videoMime: 'video/H264' });
    // decodeTrack sends a PLI whenever its depacketizer lost the picture; note when.
    const receiver = peer.transceiver('main_video').receiver;
    const sendPli = receiver.sendRtcpPLI.bind(receiver);
    receiver.sendRtcpPLI = (ssrc: number) => {
      plis.push(performance.now());
      return sendPli(ssrc);
    };
    decoding = await decodeTrack(peer, 'main_video', 'h264', (_frame, unit) =>
      decoded.push({ at: performance.now(), keyframe: unit.keyframe }),
    );
    await waitUntil(() => decoded.length > 0, 10_000, 'the first decoded frame');
  }, 20_000);

  afterAll(async () => {
    decoding?.close();
    await peer?.close();
    await runtime?.close();
  });

  it('after a 2 s runtime → client blackout the client asks for a keyframe and decodes one', async () => {
    const before = await runtimeCounters();
    // One way only: the client's PLIs reach the runtime the moment the picture is back.
    network.blackout(2_000, 'outbound');
    await sleep(2_000);
    const endedAt = performance.now();
    await waitUntil(() => decoded.some((f) => f.keyframe && f.at >= endedAt), 5_000, 'a keyframe decoded after the blackout');
    const firstPli = plis.find((t) => t >= endedAt);
    const keyframe = decoded.find((f) => f.keyframe && f.at >= endedAt)!;
    const detail = JSON.stringify({
      firstPliMs: firstPli === undefined ? null : firstPli - endedAt,
      keyframeMs: keyframe.at - endedAt,
      plis: plis.length,
    });
    expect(firstPli, detail).toBeDefined();
    expect(keyframe.at, detail).toBeGreaterThan(firstPli!);
    expect(keyframe.at - endedAt, detail).toBeLessThan(2_000);
    // And the picture moves on: counted, not "in 500 ms" (6 frames decoded by node-av on a loaded
    // machine can take longer).
    await waitUntil(() => decoded.filter((f) => f.at > keyframe.at).length > 5, 5_000, 'frames decoded after the keyframe');
    expect(peer.pc.connectionState).toBe('connected');
    expect(peer.channel.readyState).toBe('open');
    // The runtime counted the picture loss and the keyframe it answered with (/metrics).
    const after = await runtimeCounters();
    expect(after.pictureLoss, detail).toBeGreaterThan(before.pictureLoss);
    expect(after.keyframes, detail).toBeGreaterThan(before.keyframes);
  }, 10_000);

  /** The runtime's picture-loss and keyframe counters, summed over their labels. */
  async function runtimeCounters(): Promise<{ pictureLoss: number; keyframes: number }> {
    const text = await (await fetch(`${runtime.url}/metrics`)).text();
    return {
      pictureLoss: valueFromText(text, 'arclight_video_picture_loss_total'),
      keyframes: valueFromText(text, 'arclight_video_keyframes_total'),
    };
  }
});
