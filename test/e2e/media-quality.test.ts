/**
 * `media_stats` end to end in Node: our client (wrtc) against the `pattern` model over loopback.
 * On a clean link the runtime reports a high score; with 5 % of its outgoing RTP dropped
 * (`faults.outboundRtpLossPercent`, RTP only: the data channel is untouched) the video keeps
 * decoding, because the client NACKs what is missing and the runtime resends it from its
 * send history (counted in /metrics), and the report shows the loss and a lower score.
 */

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ArclightClient } from '../../client/node.ts';
import type { MediaQuality } from '../../client/stats.ts';
import pattern from '../../models/examples/pattern/index.ts';
import { startRuntime, type Runtime, type RuntimeOptions } from '../../runtime/index.ts';
import { VideoProbe, waitUntil } from '../support/video-probe.ts';

const LOOPBACK = '127.0.0.1';
const LOSS_PERCENT = 5;

const clients: ArclightClient[] = [];
const probes: VideoProbe[] = [];

afterEach(async () => {
  for (const probe of probes.splice(0)) probe.stop();
  for (const client of clients.splice(0)) await client.disconnect().catch(() => {});
});

function runtimeOptions(faults?: { outboundRtpLossPercent: number }): RuntimeOptions {
  // Not an object literal passed straight to startRuntime: `faults` type-checks whether or not
  // RuntimeOptions declares it yet; the loss test asserts that it reached the peers.
  const options = { model: pattern as never, port: 0, host: LOOPBACK, ice: { hostAddresses: [LOOPBACK] }, playground: false, ...(faults ? { faults } : {}) };
  return options;
}

interface Watched {
  readonly client: ArclightClient;
  readonly reports: MediaQuality[];
  readonly probe: Promise<VideoProbe>;
}

async function connectAndWatch(runtime: Runtime): Promise<Watched> {
  const client = new ArclightClient({ modelName: 'pattern', local: true, localRuntimeUrl: runtime.url });
  clients.push(client);
  const reports: MediaQuality[] = [];
  client.on('mediaStats', (quality) => reports.push(quality));
  const probe = new Promise<VideoProbe>((resolve) => {
    client.on('trackReceived', (name, track) => {
      if (name !== 'main_video' || track.kind !== 'video') return;
      const p = new VideoProbe(track);
      probes.push(p);
      resolve(p);
    });
  });
  await client.connect();
  return { client, reports, probe };
}

const mean = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;

describe('media_stats', () => {
  let cleanScore: number | undefined;

  describe('on a clean loopback link', () => {
    let runtime: Runtime;
    beforeAll(async () => {
      runtime = await startRuntime(runtimeOptions());
    });
    afterAll(async () => runtime?.close());

    it('reports a score ≥ 8 within 5 s, as an event, a runtime message and in getStats()', async () => {
      const { client, reports, probe } = await connectAndWatch(runtime);
      const runtimeMessages: string[] = [];
      client.on('runtimeMessage', (m) => runtimeMessages.push(m.type));
      const readyAt = Date.now();
      await waitUntil(() => reports.length > 0, 5_000, 'the first media_stats');
      expect(Date.now() - readyAt).toBeLessThan(5_000);
      const first = reports[0]!;
      expect(first.score).toBeGreaterThanOrEqual(8);
      expect(first.score).toBeLessThanOrEqual(10);
      expect(first).toMatchObject({ declared_fps: 30, freezes: 0 });
      expect(first.loss).toBeGreaterThanOrEqual(0);
      expect(first.jitter_ms).toBeGreaterThanOrEqual(0);
      expect(first.tracks['main_video']?.frames_sent).toBeGreaterThan(0);
      expect(Object.keys(first.tracks)).toEqual(['main_video']); // video tracks only; not `tone`
      expect(runtimeMessages).toContain('media_stats');
      expect(client.getStats()?.quality?.score).toBe(reports.at(-1)!.score);
      // A few more intervals: the link stays clean, frames flow at the model's rate.
      await waitUntil(() => reports.length >= 3, 7_000, 'three media_stats');
      const later = reports.slice(1);
      for (const report of later) {
        expect(report.score, JSON.stringify(report)).toBeGreaterThanOrEqual(8);
        expect(report.interval_ms).toBeGreaterThan(1_500);
        expect(report.interval_ms).toBeLessThan(3_000);
        expect(report.fps).toBeGreaterThan(20);
        expect(report.rtt_ms).toBeGreaterThanOrEqual(0);
      }
      const frames = reports.map((r) => r.tracks['main_video']!.frames_sent);
      expect(frames).toEqual([...frames].sort((a, b) => a - b));
      expect((await probe).frames).toBeGreaterThan(0);
      cleanScore = mean(reports.map((r) => r.score));
    });
  });

  describe(`with ${LOSS_PERCENT} % of outgoing RTP dropped`, () => {
    let runtime: Runtime;
    beforeAll(async () => {
      runtime = await startRuntime(runtimeOptions({ outboundRtpLossPercent: LOSS_PERCENT }));
    });
    afterAll(async () => runtime?.close());

    it('keeps video decoding (NACK retransmission) and reports the loss with a lower score', async () => {
      const { client, reports, probe: probePromise } = await connectAndWatch(runtime);
      expect(
        runtime.sessions.current?.peerOptions.faults?.outboundRtpLossPercent,
        'startRuntime must pass RuntimeOptions.faults to the peer options (server.ts)',
      ).toBe(LOSS_PERCENT);
      const probe = await probePromise;
      await waitUntil(() => probe.frames > 0, 10_000, 'the first decoded frame');
      // Frames keep arriving over 6 s: ~180 at 30 fps; well over half must decode.
      const start = probe.frames;
      const steps: number[] = [];
      for (let i = 0; i < 6; i++) {
        await new Promise((resolve) => setTimeout(resolve, 1_000));
        steps.push(probe.frames);
      }
      expect(probe.frames - start).toBeGreaterThanOrEqual(100);
      // No second without new frames: recovery keeps the picture moving.
      steps.forEach((frames, i) => expect(frames, `frames after ${i + 1} s: ${steps.join(', ')}`).toBeGreaterThan(i === 0 ? start : steps[i - 1]!));
      expect(reports.length).toBeGreaterThanOrEqual(2);
      const summary = JSON.stringify(reports);
      expect(Math.max(...reports.map((r) => r.loss)), summary).toBeGreaterThan(0);
      expect(mean(reports.map((r) => r.loss)), summary).toBeGreaterThan(0.01);
      const lossyScore = mean(reports.map((r) => r.score));
      expect(lossyScore, summary).toBeLessThan(cleanScore ?? 10);
      expect(lossyScore, summary).toBeLessThan(9.5);
      expect(client.getStats()?.quality?.loss).toBe(reports.at(-1)!.loss);
      // Recovery is by retransmission, not only by keyframes: the NACKed packets were resent.
      const exposition = await (await fetch(`${runtime.url}/metrics`)).text();
      const resent = [...exposition.matchAll(/^arclight_rtp_retransmitted_packets_total\{track="main_video"\} (\d+)$/gm)].map((m) => Number(m[1]));
      expect(resent[0] ?? 0, 'arclight_rtp_retransmitted_packets_total{track="main_video"}').toBeGreaterThan(10);
      // The data channel is not impaired: commands still get their replies.
      expect((await client.sendCommand('set_color', { color: '#00ff00' }))?.type).toBe('color_changed');
    });
  });
});
