/**
 * Media under network faults: how the `pattern` model's 720p30 video holds up for a Node client
 * (wrtc, VP8) when the link loses 1, 5 or 10 % of datagrams, has a 150 ms RTT, or goes dark
 * for 2 s or 4 s (both ways), or for 2 s from runtime to client only (the client's NACKs and PLIs
 * still reach the runtime, whose answers are lost).
 *
 *   node --conditions=source --import tsx bench/media-faults.ts [--runs 3] [--blackout-runs 5] [--seconds 8] [--recover-seconds 5] [--conditions baseline,loss1,...] [--json out.json]
 *
 * The faults are the runtime's test-only network impairment (`startRuntimeWithFaults(options, { network })`,
 * runtime/faults/network-faults.ts: every datagram in and out of the runtime's peer sockets;
 * loss is drawn each way, delay is one way). netem is not available on the machines this runs
 * on. The impairment is switched in the runtime's process, so the runtime runs in-process here
 * (unlike command-rtt's child runtime) and shares its event loop with the client.
 *
 * Each repetition of a condition gets a fresh runtime and client: 2 s of clean video, then the
 * condition for `--seconds` (a blackout: the blackout, then `--recover-seconds`). Per
 * condition: decoded frames per second in that window (and vs the baseline), the longest gap
 * between decoded frames (a freeze), the client's PLIs, NACK packets and keyframes decoded
 * (wrtc getStats), the runtime's NACK retransmissions (/metrics), the time from the end of a
 * blackout to the next decoded frame, and whether the session survived (the client still
 * `ready` and a command answered within 5 s).
 */

import { parseArgs } from 'node:util';
import pattern from '../models/examples/pattern/index.ts';
import type { Runtime } from '../runtime/index.ts';
import { startRuntimeWithFaults } from '../runtime/faults/start-runtime-with-faults.ts';
import { NetworkFaults, type NetworkImpairment } from '../runtime/faults/network-faults.ts';
import {
  connectWatchedClient,
  retransmittedPackets,
  type InboundVideoCounters,
  type WatchedClient,
} from '../test/support/media-fault-probe.ts';
import { waitUntil } from '../test/support/video-probe.ts';
import { loadavg, median, sleep } from './support/measure.ts';
import { finishReport, runBench, runInfo } from './support/report.ts';

const HOST = '127.0.0.1';
const WARMUP_MS = 2_000;

interface Condition {
  readonly name: string;
  readonly label: string;
  readonly impairment?: NetworkImpairment;
  readonly blackoutMs?: number;
  /** Default both ways; 'outbound' = runtime → client only (the client's RTCP still arrives). */
  readonly blackoutDirection?: 'outbound';
}

const CONDITIONS: readonly Condition[] = [
  { name: 'baseline', label: 'no fault' },
  { name: 'loss1', label: '1 % loss each way', impairment: { lossPercent: 1 } },
  { name: 'loss5', label: '5 % loss each way', impairment: { lossPercent: 5 } },
  { name: 'loss10', label: '10 % loss each way', impairment: { lossPercent: 10 } },
  { name: 'rtt150', label: '150 ms RTT (75 ms each way)', impairment: { delayMs: 75 } },
  { name: 'blackout2s', label: '2 s blackout', blackoutMs: 2_000 },
  { name: 'blackout4s', label: '4 s blackout', blackoutMs: 4_000 },
  { name: 'downlink2s', label: '2 s blackout runtime → client only', blackoutMs: 2_000, blackoutDirection: 'outbound' },
];

const { values: args } = parseArgs({
  options: {
    runs: { type: 'string', default: '3' },
    'blackout-runs': { type: 'string', default: '5' },
    seconds: { type: 'string', default: '8' },
    'recover-seconds': { type: 'string', default: '5' },
    conditions: { type: 'string', default: CONDITIONS.map((c) => c.name).join(',') },
    json: { type: 'string' },
  },
});

/** One repetition of one condition. */
interface Sample {
  readonly fps: number;
  readonly longestGapMs: number;
  readonly plis: number;
  readonly nackPackets: number;
  readonly keyframesDecoded: number;
  readonly retransmitted: number;
  /** Blackout end → first decoded frame, ms; undefined when none came. */
  readonly recoverMs?: number;
  readonly survived: boolean;
  readonly datagramsDropped: number;
}

const delta = (after: InboundVideoCounters, before: InboundVideoCounters, key: keyof InboundVideoCounters): number =>
  after[key] - before[key];

async function commandAnswered(watched: WatchedClient): Promise<boolean> {
  const reply = watched.client.sendCommand('set_color', { color: '#00ff00' }).then(
    (r) => r?.type === 'color_changed',
    () => false,
  );
  return Promise.race([reply, sleep(5_000).then(() => false)]);
}

async function measureOnce(condition: Condition, windowMs: number, recoverMs: number): Promise<Sample> {
  const network = new NetworkFaults();
  let runtime: Runtime | undefined;
  let watched: WatchedClient | undefined;
  try {
    runtime = await startRuntimeWithFaults(
      { model: pattern as never, port: 0, host: HOST, ice: { hostAddresses: [HOST] }, playground: false },
      { network },
    );
    watched = await connectWatchedClient(runtime.url);
    const client = watched;
    await waitUntil(() => client.frames.count > 0, 10_000, 'the first decoded frame');
    await sleep(WARMUP_MS);
    const before = await watched.counters();
    const resentBefore = await retransmittedPackets(runtime.url);
    const from = performance.now();
    let recover: number | undefined;
    let to: number;
    if (condition.blackoutMs !== undefined) {
      network.blackout(condition.blackoutMs, condition.blackoutDirection ?? 'both');
      await sleep(condition.blackoutMs);
      const endedAt = performance.now();
      await sleep(recoverMs);
      to = performance.now();
      const first = watched.frames.firstAfter(endedAt);
      recover = first === undefined ? undefined : first - endedAt;
    } else {
      if (condition.impairment) network.set(condition.impairment);
      await sleep(windowMs);
      to = performance.now();
    }
    const after = await watched.counters();
    const resent = (await retransmittedPackets(runtime.url)) - resentBefore;
    const dropped = network.counters.dropped;
    network.clear();
    const survived = watched.client.getStatus() === 'ready' && (await commandAnswered(watched));
    return {
      fps: (watched.frames.between(from, to) * 1000) / (to - from),
      longestGapMs: watched.frames.longestGap(from, to),
      plis: delta(after, before, 'pliCount'),
      nackPackets: delta(after, before, 'nackCount'),
      keyframesDecoded: delta(after, before, 'keyFramesDecoded'),
      retransmitted: resent,
      ...(recover === undefined ? {} : { recoverMs: recover }),
      survived,
      datagramsDropped: dropped,
    };
  } finally {
    await watched?.close();
    await runtime?.close();
  }
}

const fmt = (value: number, digits = 0): string => (Number.isFinite(value) ? value.toFixed(digits) : '–');
const spread = (values: readonly number[], digits = 0): string =>
  values.length === 0 ? '–' : `${fmt(median(values), digits)} (${fmt(Math.min(...values), digits)}–${fmt(Math.max(...values), digits)})`;

async function main(): Promise<void> {
  const info = runInfo();
  const windowMs = Number(args.seconds) * 1000;
  const recoverMs = Number(args['recover-seconds']) * 1000;
  const wanted = new Set(args.conditions.split(','));
  const conditions = CONDITIONS.filter((c) => wanted.has(c.name));
  process.stdout.write(
    `media-faults: ${JSON.stringify(info.machine)} source ${info.source.commit}${info.source.modified.length ? ` (+${info.source.modified.length} modified)` : ''}\n`,
  );
  const results: Record<string, Sample[]> = {};
  for (const condition of conditions) {
    const runs = Number(condition.blackoutMs === undefined ? args.runs : args['blackout-runs']);
    const samples: Sample[] = [];
    for (let run = 0; run < runs; run++) {
      const sample = await measureOnce(condition, windowMs, recoverMs);
      samples.push(sample);
      process.stdout.write(`  ${condition.name} run ${run + 1}/${runs}: ${JSON.stringify(sample)}\n`);
    }
    results[condition.name] = samples;
  }

  const baselineFps = median((results['baseline'] ?? []).map((s) => s.fps));
  const rows = conditions.map((condition) => {
    const samples = results[condition.name]!;
    const fps = median(samples.map((s) => s.fps));
    const recover = samples.flatMap((s) => (s.recoverMs === undefined ? [] : [s.recoverMs]));
    return [
      condition.label,
      String(samples.length),
      `${fmt(fps, 1)}${Number.isFinite(baselineFps) ? ` (${fmt((100 * fps) / baselineFps)} %)` : ''}`,
      spread(samples.map((s) => s.longestGapMs)),
      spread(samples.map((s) => s.plis)),
      spread(samples.map((s) => s.keyframesDecoded)),
      spread(samples.map((s) => s.nackPackets)),
      spread(samples.map((s) => s.retransmitted)),
      condition.blackoutMs === undefined
        ? ''
        : `${spread(recover)}${recover.length < samples.length ? ` (${samples.length - recover.length} never)` : ''}`,
      `${samples.filter((s) => s.survived).length}/${samples.length}`,
    ];
  });
  const header = [
    'condition',
    'runs',
    'decoded fps (vs baseline)',
    'longest gap ms',
    'PLIs sent',
    'keyframes decoded',
    'NACK packets',
    'packets resent',
    'recover ms',
    'survived',
  ];
  process.stdout.write(`\n| ${header.join(' | ')} |\n|${header.map(() => '---').join('|')}|\n`);
  for (const row of rows) process.stdout.write(`| ${row.join(' | ')} |\n`);
  process.stdout.write(
    `\nmedian (min–max) over runs; window ${windowMs / 1000} s per run (blackouts: the blackout + ${recoverMs / 1000} s)\n`,
  );
  finishReport(info, loadavg(), args.json, { windowMs, recoverMs, results });
}

await runBench('media-faults', main);
