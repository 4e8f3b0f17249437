/**
 * Adaptive playout under a model whose steps vary (issue 24): the `diffuse` example — chunks of 4–8
 * frames, each step's compute drawn from 0.8–1.2 × its mean (60 ms a frame by default) — watched by
 * our Node client (wrtc) on 127.0.0.1, which stamps each decoded frame's arrival. What a viewer of a
 * real generative model sees, where bench/step-pacing.ts measures a perfectly steady one.
 *
 *   node --conditions=source --import tsx bench/playout-variance.ts [--rounds 3] [--seconds 20] [--warmup 3] [--json out.json]
 *
 * Per round (a fresh runtime, the real CLI in a child process): the rate at the client, the p50 and
 * p95 of |interval − mean|, the longest gap, gaps over 100 ms per minute, and the runtime's
 * `arclight_video_playout_fps` / `arclight_video_production_fps` read every 2.5 s (their range).
 * No goal of its own: the pacer's cushion is capped at one frame interval so that pacing adds at
 * most one step of latency (the goal), and this measures what that cap costs when steps vary.
 */

import { parseArgs } from 'node:util';
import { ArclightClient } from '../client/node.ts';
import { VideoProbe, waitUntil } from '../test/support/video-probe.ts';
import { startChildRuntime } from './support/child-runtime.ts';
import { loadavg, median, sleep } from './support/measure.ts';
import { finishReport, runBench, runInfo } from './support/report.ts';

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '20' },
    warmup: { type: 'string', default: '3' },
    json: { type: 'string' },
  },
});
const ROUNDS = Number(args.rounds);
const SECONDS = Number(args.seconds);
const WARMUP = Number(args.warmup);

interface Round {
  clientFps: number;
  p50DevMs: number;
  p95DevMs: number;
  longestGapMs: number;
  gapsOver100PerMinute: number;
  playoutFps: [number, number];
  productionFps: [number, number];
}

function gauge(text: string, name: string): number {
  const line = text.split('\n').find((l) => l.startsWith(name));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : NaN;
}

const percentile = (sorted: readonly number[], q: number): number =>
  sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;

async function runOnce(): Promise<Round> {
  const runtime = await startChildRuntime('127.0.0.1', { model: 'models/examples/diffuse/index.ts' });
  const client = new ArclightClient({ modelName: 'diffuse', local: true, localRuntimeUrl: runtime.url });
  let probe: VideoProbe | undefined;
  try {
    const probed = new Promise<VideoProbe>((resolve) => client.on('trackReceived', (_n, track) => resolve(new VideoProbe(track))));
    await client.connect();
    probe = await probed;
    await waitUntil(() => probe!.frames > 0, 20_000, 'the first frame');
    await sleep(WARMUP * 1000);
    const from = performance.now();
    const playout: number[] = [];
    const production: number[] = [];
    while (performance.now() - from < SECONDS * 1000) {
      await sleep(2_500);
      const text = await (await fetch(`${runtime.url}/metrics`)).text();
      playout.push(gauge(text, 'arclight_video_playout_fps'));
      production.push(gauge(text, 'arclight_video_production_fps'));
    }
    const times = probe.arrivals.filter((t) => t >= from);
    const gaps = times.slice(1).map((t, i) => t - times[i]!);
    const mean = gaps.reduce((a, b) => a + b, 0) / gaps.length;
    const deviations = gaps.map((g) => Math.abs(g - mean)).sort((a, b) => a - b);
    const minutes = (times.at(-1)! - times[0]!) / 60_000;
    return {
      clientFps: 1000 / mean,
      p50DevMs: percentile(deviations, 0.5),
      p95DevMs: percentile(deviations, 0.95),
      longestGapMs: Math.max(...gaps),
      gapsOver100PerMinute: gaps.filter((g) => g > 100).length / minutes,
      playoutFps: [Math.min(...playout), Math.max(...playout)],
      productionFps: [Math.min(...production), Math.max(...production)],
    };
  } finally {
    probe?.stop();
    await client.disconnect().catch(() => {});
    await runtime.stop();
  }
}

const fmt = (xs: readonly number[], digits = 1): string =>
  `${median(xs).toFixed(digits)} (${Math.min(...xs).toFixed(digits)}–${Math.max(...xs).toFixed(digits)})`;

await runBench('playout-variance', async () => {
  const info = runInfo();
  process.stdout.write(`playout-variance: ${ROUNDS} rounds × ${SECONDS} s of the diffuse example (adaptive), after ${WARMUP} s\n`);
  const rounds: Round[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    rounds.push(await runOnce());
    process.stdout.write(`round ${i + 1}: ${JSON.stringify(rounds.at(-1))}\n`);
  }
  process.stdout.write(
    `\nmedian (min–max) over ${ROUNDS} rounds:\n` +
      `  rate at the client         ${fmt(rounds.map((r) => r.clientFps))} fps\n` +
      `  |interval − mean| p50      ${fmt(rounds.map((r) => r.p50DevMs))} ms\n` +
      `  |interval − mean| p95      ${fmt(rounds.map((r) => r.p95DevMs))} ms\n` +
      `  longest gap                ${fmt(
        rounds.map((r) => r.longestGapMs),
        0,
      )} ms\n` +
      `  gaps > 100 ms per minute   ${fmt(rounds.map((r) => r.gapsOver100PerMinute))}\n` +
      `  playout fps read (range)   ${Math.min(...rounds.map((r) => r.playoutFps[0])).toFixed(1)}–${Math.max(...rounds.map((r) => r.playoutFps[1])).toFixed(1)}\n` +
      `  production fps read        ${Math.min(...rounds.map((r) => r.productionFps[0])).toFixed(1)}–${Math.max(...rounds.map((r) => r.productionFps[1])).toFixed(1)}\n`,
  );
  finishReport(info, loadavg(), args.json, { rounds });
});
