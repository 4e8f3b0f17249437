/**
 * Step pacing (issue 24): how evenly a client receives the frames of a model that produces them in
 * chunks — 4 frames of 640x360 every 250 ms under a declared fps of 24 — with the track paced at
 * the fixed declared rate (today's behaviour, the baseline) and with `fps: 'adaptive'`.
 *
 *   node --conditions=source --import tsx bench/step-pacing.ts [--rounds 3] [--seconds 20] [--warmup 3] [--follow-seconds 6] [--json out.json]
 *
 * Each round starts a fresh runtime as a child process per pacing (the real CLI serving
 * test/fixtures/chunk-model.ts; ARCLIGHT_CHUNK_PACING picks the track's pacing), fixed and adaptive
 * alternating, so both see the same machine. Our Node client (wrtc) watches on 127.0.0.1 and
 * stamps each decoded frame's arrival (test/support/video-probe.ts). Per run:
 *  - steady: after the warm-up, the inter-frame intervals at the client for `--seconds`: mean,
 *    p95 of |interval − mean| (the jitter the issue measures: 78 ms today), longest gap;
 *  - added latency: emit → first packet sent, from the runtime's
 *    `arclight_video_emit_to_send_seconds` (mean over the window, and the share of frames within one
 *    step time, 250 ms — a histogram bucket bound; queue + pacing + encode);
 *  - follow (adaptive and fixed alike): `set_step {ms: 500}` (the step time doubles), then after
 *    `--follow-seconds` `set_step {ms: 250}` (it halves): how long until the mean of the last 4
 *    intervals at the client is within 10 % of the new rate's interval and stays there for 8
 *    intervals, and the longest gap meanwhile (a freeze), against the new step time; the emit →
 *    send mean over each follow window (latency must not grow when the model slows).
 */

import { parseArgs } from 'node:util';
import { ArclightClient } from '../client/node.ts';
import { VideoProbe, waitUntil } from '../test/support/video-probe.ts';
import { startChildRuntime } from './support/child-runtime.ts';
import { loadavg, median, sleep } from './support/measure.ts';
import { finishReport, runBench, runInfo } from './support/report.ts';

const HOST = '127.0.0.1';
const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '20' },
    warmup: { type: 'string', default: '3' },
    'follow-seconds': { type: 'string', default: '6' },
    json: { type: 'string' },
  },
});
const ROUNDS = Number(args.rounds);
const SECONDS = Number(args.seconds);
const WARMUP = Number(args.warmup);
const FOLLOW_SECONDS = Number(args['follow-seconds']);

type Pacing = 'fixed' | 'adaptive';

interface Follow {
  /** ms from the command to a steady rate within 10 % of the new one; undefined: not within the window. */
  settleMs: number | undefined;
  /** Longest gap between frames at the client in the window, ms. */
  longestGapMs: number;
  /** Mean emit → send in the window, ms. */
  emitToSendMs: number;
  /** Share of the window's frames whose emit → send took at most the new step time. */
  withinStepShare: number;
  /** Mean interval over the window's last 2 s, ms. */
  endIntervalMs: number;
}

interface RunResult {
  pacing: Pacing;
  frames: number;
  meanIntervalMs: number;
  /** p95 of |interval − mean|, ms. */
  p95JitterMs: number;
  p50JitterMs: number;
  longestGapMs: number;
  emitToSendMs: number;
  /** Share of frames whose emit → send took at most one step (250 ms). */
  withinStepShare: number;
  slower: Follow;
  faster: Follow;
  /** The steady window's intervals at the client, ms (raw, for the JSON). */
  intervalsMs: number[];
}

/** `arclight_video_emit_to_send_seconds` sum, count and cumulative buckets (by `le`, seconds), from /metrics. */
async function emitToSend(url: string): Promise<{ sum: number; count: number; buckets: Map<number, number> }> {
  const text = await (await fetch(`${url}/metrics`)).text();
  let sum = 0;
  let count = 0;
  const buckets = new Map<number, number>();
  for (const line of text.split('\n')) {
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (line.startsWith('arclight_video_emit_to_send_seconds_sum')) sum += value;
    if (line.startsWith('arclight_video_emit_to_send_seconds_count')) count += value;
    if (line.startsWith('arclight_video_emit_to_send_seconds_bucket')) {
      const le = /le="([^"]+)"/.exec(line)?.[1];
      if (le !== undefined)
        buckets.set(le === '+Inf' ? Infinity : Number(le), (buckets.get(le === '+Inf' ? Infinity : Number(le)) ?? 0) + value);
    }
  }
  return { sum, count, buckets };
}

/** Share of the frames sent between two reads whose emit → send took at most `le` seconds (a bucket bound). */
function shareWithin(before: Awaited<ReturnType<typeof emitToSend>>, after: Awaited<ReturnType<typeof emitToSend>>, le: number): number {
  const count = after.count - before.count;
  return count > 0 ? ((after.buckets.get(le) ?? 0) - (before.buckets.get(le) ?? 0)) / count : NaN;
}

const meanOf = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
const intervalsOf = (times: readonly number[]): number[] => times.slice(1).map((t, i) => t - times[i]!);

/** Arrivals at the client within [from, to). */
function arrivalsBetween(probe: VideoProbe, from: number, to: number): number[] {
  return probe.arrivals.filter((t) => t >= from && t < to);
}

async function follow(client: ArclightClient, probe: VideoProbe, url: string, stepMs: number): Promise<Follow> {
  const target = stepMs / 4;
  const before = await emitToSend(url);
  const from = performance.now();
  await client.sendCommand('set_step', { ms: stepMs });
  await sleep(FOLLOW_SECONDS * 1000);
  const to = performance.now();
  const after = await emitToSend(url);
  const times = arrivalsBetween(probe, from, to);
  const gaps = intervalsOf(times);
  // The first frame after which the mean of every 4 consecutive intervals stays within 10 % for 8 intervals.
  let settleMs: number | undefined;
  for (let i = 4; i + 8 <= gaps.length; i++) {
    let steady = true;
    for (let j = i; j < i + 8 && steady; j++) {
      const m = meanOf(gaps.slice(j - 4, j));
      if (Math.abs(m - target) > 0.1 * target) steady = false;
    }
    if (steady) {
      settleMs = times[i - 4]! - from;
      break;
    }
  }
  const tail = intervalsOf(arrivalsBetween(probe, to - 2_000, to));
  return {
    settleMs,
    longestGapMs: Math.max(...gaps, 0),
    emitToSendMs: after.count > before.count ? ((after.sum - before.sum) / (after.count - before.count)) * 1000 : NaN,
    withinStepShare: shareWithin(before, after, stepMs / 1000),
    endIntervalMs: tail.length > 0 ? meanOf(tail) : NaN,
  };
}

async function runOnce(pacing: Pacing): Promise<RunResult> {
  process.env['ARCLIGHT_CHUNK_PACING'] = pacing;
  const runtime = await startChildRuntime(HOST, { model: 'test/fixtures/chunk-model.ts' });
  const client = new ArclightClient({ modelName: 'chunks', local: true, localRuntimeUrl: runtime.url });
  let probe: VideoProbe | undefined;
  try {
    const probed = new Promise<VideoProbe>((resolve) => client.on('trackReceived', (_n, track) => resolve(new VideoProbe(track))));
    await client.connect();
    probe = await probed;
    await waitUntil(() => probe!.frames > 0, 20_000, 'the first frame');
    await sleep(WARMUP * 1000);
    const before = await emitToSend(runtime.url);
    const from = performance.now();
    await sleep(SECONDS * 1000);
    const to = performance.now();
    const after = await emitToSend(runtime.url);
    const gaps = intervalsOf(arrivalsBetween(probe, from, to));
    const mean = meanOf(gaps);
    const deviations = gaps.map((g) => Math.abs(g - mean));
    const slower = await follow(client, probe, runtime.url, 500);
    const faster = await follow(client, probe, runtime.url, 250);
    return {
      pacing,
      frames: gaps.length + 1,
      meanIntervalMs: mean,
      p95JitterMs: percentile(deviations, 0.95),
      p50JitterMs: percentile(deviations, 0.5),
      longestGapMs: Math.max(...gaps),
      emitToSendMs: ((after.sum - before.sum) / (after.count - before.count)) * 1000,
      withinStepShare: shareWithin(before, after, 0.25),
      slower,
      faster,
      intervalsMs: gaps.map((g) => Math.round(g * 100) / 100),
    };
  } finally {
    probe?.stop();
    await client.disconnect().catch(() => {});
    await runtime.stop();
  }
}

/** Nearest-rank percentile. */
function percentile(values: readonly number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

const fmt = (x: number | undefined, digits = 1): string => (x === undefined || Number.isNaN(x) ? '—' : x.toFixed(digits));

function spread(values: readonly (number | undefined)[], digits = 1): string {
  const xs = values.filter((x): x is number => x !== undefined && !Number.isNaN(x));
  if (xs.length === 0) return '—';
  return `${fmt(median(xs), digits)} (${fmt(Math.min(...xs), digits)}–${fmt(Math.max(...xs), digits)})${xs.length < values.length ? ` [${values.length - xs.length} not settled]` : ''}`;
}

await runBench('step-pacing', async () => {
  const info = runInfo();
  process.stdout.write(
    `step-pacing: ${ROUNDS} rounds × (fixed, adaptive), ${SECONDS} s steady + 2 × ${FOLLOW_SECONDS} s follow each; 4 frames / 250 ms, 640x360, fps 24\n`,
  );
  const results: RunResult[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    for (const pacing of ['fixed', 'adaptive'] as const) {
      const result = await runOnce(pacing);
      results.push(result);
      process.stdout.write(
        `round ${round + 1} ${pacing.padEnd(8)} frames ${result.frames}  mean ${fmt(result.meanIntervalMs)} ms  |Δ| p50 ${fmt(result.p50JitterMs)} p95 ${fmt(result.p95JitterMs)} ms  longest gap ${fmt(result.longestGapMs)} ms  emit→send ${fmt(result.emitToSendMs)} ms (≤ 250 ms: ${fmt(result.withinStepShare * 100)} %)  ` +
          `| 2× slower: settled ${fmt(result.slower.settleMs, 0)} ms, longest gap ${fmt(result.slower.longestGapMs, 0)} ms, emit→send ${fmt(result.slower.emitToSendMs)} ms (≤ 500 ms: ${fmt(result.slower.withinStepShare * 100)} %), end interval ${fmt(result.slower.endIntervalMs)} ms ` +
          `| 2× faster: settled ${fmt(result.faster.settleMs, 0)} ms, longest gap ${fmt(result.faster.longestGapMs, 0)} ms, emit→send ${fmt(result.faster.emitToSendMs)} ms, end interval ${fmt(result.faster.endIntervalMs)} ms\n`,
      );
    }
  }
  process.stdout.write('\nmedian over rounds (min–max):\n');
  process.stdout.write(
    '| pacing | mean interval ms | p95 |interval − mean| ms | longest gap ms | emit→send ms (≤ 250 ms) | 2× slower: settle ms / longest gap ms / emit→send ms | 2× faster: settle ms / emit→send ms |\n|---|---|---|---|---|---|---|\n',
  );
  for (const pacing of ['fixed', 'adaptive'] as const) {
    const rs = results.filter((r) => r.pacing === pacing);
    process.stdout.write(
      `| ${pacing} | ${spread(rs.map((r) => r.meanIntervalMs))} | ${spread(rs.map((r) => r.p95JitterMs))} | ${spread(
        rs.map((r) => r.longestGapMs),
        0,
      )} | ${spread(rs.map((r) => r.emitToSendMs))} (${spread(rs.map((r) => r.withinStepShare * 100))} %) | ` +
        `${spread(
          rs.map((r) => r.slower.settleMs),
          0,
        )} / ${spread(
          rs.map((r) => r.slower.longestGapMs),
          0,
        )} / ${spread(rs.map((r) => r.slower.emitToSendMs))} | ` +
        `${spread(
          rs.map((r) => r.faster.settleMs),
          0,
        )} / ${spread(rs.map((r) => r.faster.emitToSendMs))} |\n`,
    );
  }
  finishReport(info, loadavg(), args.json, { rounds: ROUNDS, seconds: SECONDS, warmup: WARMUP, followSeconds: FOLLOW_SECONDS, results });
});
