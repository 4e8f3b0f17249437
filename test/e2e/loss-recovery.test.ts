/**
 * Loss recovery on a congested path (issue 25 part 4, docs/protocol.md "Loss recovery"): an
 * Arclight runtime streams fresh noise (its rate control spends its whole budget) to our Node
 * client through the network lab (docs/network-lab.md) with the downlink capped far below the
 * video's rate and a 200 ms tail-drop queue. The bottleneck drops most packets and the receiver
 * NACKs them all; the runtime must resend only within its retransmission budget — a share of the
 * media it sent — and refuse the rest, where before it resent everything (a retransmission storm
 * of several times the media rate, docs/performance.md).
 *
 * No wall-clock expectation: the bound is computed from what the lab's counters saw (bytes
 * offered to the downlink) and the runtime's metrics, over whatever time the window took.
 */

import { afterEach, describe, expect, it } from 'vitest';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import { grainModel } from '../support/grain-model.ts';
import { LOSS_RECOVERY } from '../../runtime/transport/send/loss-recovery.ts';
import { connectArclightThroughLab } from '../support/network-lab/arclight-receiver.ts';
import { seededRandom } from '../support/network-lab/clock.ts';
import { NetworkLab } from '../support/network-lab/network-lab.ts';
import { inboundVideo } from '../support/network-lab/stamped-receiver.ts';
import { waitUntil } from '../support/video-probe.ts';

const LOOPBACK = '127.0.0.1';
const WIDTH = 640;
const HEIGHT = 360;
const KBPS = 800;
const CAP_MBPS = 0.25;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const cleanups: Array<() => Promise<unknown> | unknown> = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface Snapshot {
  /** UDP payload bytes offered to the lab's downlink (media, resends, RTCP, STUN, SCTP). */
  readonly offered: number;
  readonly resentBytes: number;
  readonly resentPackets: number;
  readonly refused: Record<string, number>;
  /** Resends no NACK asked for, by reason (`feedback_loss`, `second_copy`). */
  readonly unasked: Record<string, number>;
  readonly lossKeyframes: number;
  readonly at: number;
}

async function snapshot(runtime: Runtime, lab: NetworkLab): Promise<Snapshot> {
  const text = await runtime.metrics.text();
  const value = (name: string, labels: string[] = []): number => {
    let sum = 0;
    for (const line of text.split('\n')) {
      if (!line.startsWith(`${name}{`) || !line.includes('track="main_video"')) continue;
      if (labels.every((l) => line.includes(l))) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
    }
    return sum;
  };
  const refused: Record<string, number> = {};
  for (const reason of ['not_in_history', 'too_old', 'within_rtt', 'budget'])
    refused[reason] = value('arclight_rtp_retransmissions_refused_total', [`reason="${reason}"`]);
  const unasked: Record<string, number> = {};
  for (const reason of ['feedback_loss', 'second_copy'])
    unasked[reason] = value('arclight_rtp_unasked_resends_total', [`reason="${reason}"`]);
  return {
    offered: lab.counters.down.bytesIn,
    resentBytes: value('arclight_rtp_retransmitted_bytes_total'),
    resentPackets: value('arclight_rtp_retransmitted_packets_total'),
    refused,
    unasked,
    lossKeyframes: value('arclight_video_loss_keyframe_requests_total'),
    at: performance.now(),
  };
}

/**
 * A runtime streaming `grainModel` to our Node client through a network lab whose random draws
 * start from `seed`, up to the first decoded frame; `beforeConnect` gets the lab first. All of it
 * is closed after the test.
 */
async function streamThroughLab(seed: number, beforeConnect?: (lab: NetworkLab) => void) {
  const runtime: Runtime = await startRuntime({
    model: grainModel('grain', WIDTH, HEIGHT, KBPS) as never,
    port: 0,
    host: LOOPBACK,
    ice: { hostAddresses: [LOOPBACK] },
    playground: false,
  });
  cleanups.push(() => runtime.close());
  const lab = await NetworkLab.start({ clientSideAddress: LOOPBACK, random: seededRandom(seed) });
  cleanups.push(() => lab.close());
  beforeConnect?.(lab);
  const ours = await connectArclightThroughLab(lab, runtime.url, { modelName: 'grain' });
  cleanups.push(() => ours.close());
  const video = await ours.video;
  await waitUntil(() => video.frames.length > 0, 15_000, 'the first decoded frame');
  return { runtime, lab, ours, video };
}

describe('loss recovery through the network lab', () => {
  it('keeps resends within the retransmission budget when a bottleneck drops most of the video', async () => {
    const { runtime, lab } = await streamThroughLab(254);

    lab.set({ down: { capMbps: CAP_MBPS, queueMs: 200 } });
    const before = await snapshot(runtime, lab); // the budget's rate window reaches back 1 s from `from`
    await sleep(1_000);
    const from = await snapshot(runtime, lab);
    await sleep(6_000);
    const to = await snapshot(runtime, lab);

    const detail = JSON.stringify({ before, from, to, counters: lab.counters });
    const resent = to.resentBytes - from.resentBytes;
    // Media sent over [from − 1 s, to] is at most what the downlink was offered less the resends.
    const media = to.offered - before.offered - (to.resentBytes - before.resentBytes);
    const seconds = (to.at - from.at) / 1000;
    const rules = LOSS_RECOVERY;
    // Refill: share × media (each byte counts in 1 s of rate windows) + the floor over the window;
    // plus what the bucket held at `from`: at most 250 ms of its rate, or its minimum depth.
    const bound =
      rules.budgetShare * media +
      ((rules.minBudgetKbps * 1000) / 8) * seconds +
      Math.max(rules.minBudgetDepthBytes, rules.budgetShare * (rules.budgetDepthMs / 1000) * media);
    expect(media, detail).toBeGreaterThan(0);
    // The bottleneck dropped video and the receiver NACKed it: some was resent, more refused.
    expect(lab.counters.down.droppedQueue, detail).toBeGreaterThan(0);
    expect(resent, detail).toBeGreaterThan(0);
    expect(to.refused['budget']! - from.refused['budget']!, detail).toBeGreaterThan(0);
    expect(resent, detail).toBeLessThanOrEqual(bound);
    // Unrepaired losses asked for keyframes, at most one per second (plus the one at the start).
    const lossKeyframes = to.lossKeyframes - from.lossKeyframes;
    expect(lossKeyframes, detail).toBeGreaterThan(0);
    expect(lossKeyframes, detail).toBeLessThanOrEqual(Math.floor((to.at - from.at) / rules.lossKeyframeIntervalMs) + 1);
  }, 60_000);

  it('repairs random loss with RTX (RFC 4588): resends on the RTX stream, none on the media stream, and the picture keeps on', async () => {
    // Every datagram the runtime sends, as it enters the downlink (before the loss).
    const rtp: Array<{ ssrc: number; payloadType: number; sequenceNumber: number }> = [];
    const { runtime, lab, ours, video } = await streamThroughLab(4588, (lab) => {
      const down = lab.down.send.bind(lab.down);
      lab.down.send = (datagram, bytes) => {
        const data = datagram.data;
        const payloadType = (data[1] ?? 0) & 0x7f;
        // RTP (RFC 7983: first byte 128–191), not RTCP (payload types 64–95 under the marker bit).
        if (data.length >= 12 && data[0]! >> 6 === 2 && (payloadType < 64 || payloadType > 95))
          rtp.push({ ssrc: data.readUInt32BE(8), payloadType, sequenceNumber: data.readUInt16BE(2) });
        down(datagram, bytes);
      };
    });
    // The answer's RTX: `a=ssrc-group:FID <media> <rtx>` and `rtx/90000` with apt= the codec.
    const answer = ours.peer()!.remoteDescription!.sdp;
    const fid = /^a=ssrc-group:FID (\d+) (\d+)\r?$/m.exec(answer);
    const rtxType = /^a=rtpmap:(\d+) rtx\/90000\r?$/m.exec(answer);
    expect(fid, answer).not.toBeNull();
    expect(rtxType, answer).not.toBeNull();
    const mediaSsrc = Number(fid![1]);
    const rtxSsrc = Number(fid![2]);

    const statsBefore = await inboundVideo(ours.peer()!);
    const framesBefore = video.frames.length;
    const resentBefore = (await snapshot(runtime, lab)).resentPackets;
    const seen = rtp.length;
    lab.set({ down: { lossPercent: 3 } });
    await sleep(4_000);
    lab.set({ down: { lossPercent: 0 } });
    await sleep(500);
    const statsAfter = await inboundVideo(ours.peer()!);
    const resent = (await snapshot(runtime, lab)).resentPackets - resentBefore;
    const window = rtp.slice(seen);
    const onRtx = window.filter((p) => p.ssrc === rtxSsrc);
    const media = window.filter((p) => p.ssrc === mediaSsrc);
    const repeated = media.length - new Set(media.map((p) => p.sequenceNumber)).size;
    const detail = JSON.stringify({
      resent,
      onRtx: onRtx.length,
      media: media.length,
      repeated,
      statsBefore,
      statsAfter,
      down: lab.counters.down,
    });

    expect(lab.counters.down.droppedRandom, detail).toBeGreaterThan(0);
    expect(resent, detail).toBeGreaterThan(0);
    // Every resend went out on the RTX stream with its payload type, numbered in a row; none on the
    // media stream. The RTX stream also carries bandwidth probes' padding (bandwidth-probe.ts): any
    // RTX packet beyond the resends belongs to a probe (each one ends within a second).
    expect(onRtx.length, detail).toBeGreaterThanOrEqual(resent);
    if (onRtx.length > resent) {
      await sleep(1_200);
      const probes = (await runtime.metrics.bandwidthProbes.get()).values.reduce((sum, v) => sum + v.value, 0);
      expect(probes, detail).toBeGreaterThan(0);
    }
    expect(
      onRtx.every((p) => p.payloadType === Number(rtxType![1])),
      detail,
    ).toBe(true);
    expect(
      onRtx.every((p, i) => i === 0 || p.sequenceNumber === ((onRtx[i - 1]!.sequenceNumber + 1) & 0xffff)),
      detail,
    ).toBe(true);
    expect(repeated, detail).toBe(0);
    // The client asked for the losses and took the resends: repaired losses need no keyframe (an
    // unrepaired one each would ask for one; a resend lost as well may, once or twice).
    expect(statsAfter.nackCount - statsBefore.nackCount, detail).toBeGreaterThan(0);
    expect(statsAfter.pliCount - statsBefore.pliCount, detail).toBeLessThanOrEqual(2);
    expect(video.frames.length - framesBefore, detail).toBeGreaterThan(100); // 4.5 s at 30 fps: 135
  }, 60_000);

  it('sends each resend twice on a path that loses without queueing', async () => {
    const { runtime, lab, video } = await streamThroughLab(2525);
    await sleep(1_500); // past the stream's start (its first second decodes slower)
    const before = await snapshot(runtime, lab);
    const framesBefore = video.frames.length;
    lab.set({ down: { lossPercent: 3 } });
    await sleep(4_000);
    lab.set({ down: { lossPercent: 0 } });
    await sleep(500);
    const after = await snapshot(runtime, lab);
    const secondCopies = after.unasked['second_copy']! - before.unasked['second_copy']!;
    const resent = after.resentPackets - before.resentPackets;
    const detail = JSON.stringify({ before, after, counters: lab.counters });

    expect(lab.counters.down.droppedRandom, detail).toBeGreaterThan(0);
    expect(secondCopies, detail).toBeGreaterThan(0);
    // A second copy follows a first: at most half of what was resent. (Resends the transport-wide
    // feedback asked for without a NACK are in `resent` too — rare here, with no NACK lost; the
    // unit tests in runtime/transport/send/reported-loss.test.ts hold that path, and the network
    // lab's 2 % scenario counts them against Chromium: docs/performance.md.)
    expect(secondCopies, detail).toBeLessThanOrEqual(resent / 2);
    // 4.5 s at 30 fps: 135 frames.
    expect(video.frames.length - framesBefore, detail).toBeGreaterThan(100);
  }, 60_000);
});
