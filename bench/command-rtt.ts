/**
 * Command round-trip time: how long `client.sendCommand('set_speed', {speed})` takes from the
 * call to its correlated `command_ack`, against the `pattern` model on 127.0.0.1.
 *
 *   node --conditions=source --import tsx bench/command-rtt.ts [--runs 3] [--samples 1000] [--warmup 100] [--json out.json]
 *
 * Each run starts a fresh runtime as a child process (`bin/arclight.js serve models/examples/pattern`,
 * the real CLI), so the runtime's event loop is not shared with the clients'. Two peers join
 * the run's session over loopback:
 *
 *  - our Node client (`ArclightClient`, wrtc), which measures `sendCommand` as an app sees it;
 *  - a raw wrtc peer with only a data channel (test/support/raw-peer.ts), which measures
 *      · `ping` → `pong` (runtime scope: JSON parse + envelope check + reply) — the baseline;
 *      · `set_speed` written by hand → `command_ack` (the same command without the client library).
 *
 * The three kinds are interleaved sample by sample (the order rotates), so they see the same
 * load; the ratio command / ping is then what schema validation + dispatch into the model (and,
 * for `sendCommand`, the client library) add to a data-channel round trip. Every run measures
 * twice: while the client receives the 720p30 video (default) and with its tracks paused.
 * The runtime's own view (`arclight_command_duration_seconds`) is read from /metrics.
 */

import { parseArgs } from 'node:util';
import { ArclightClient, wrtc } from '../client/node.ts';
import { openRawPeer, type RawPeer } from '../test/support/raw-peer.ts';
import { startChildRuntime } from './support/child-runtime.ts';
import { loadavg, median, sleep, summarise, systemCpu, type Summary } from './support/measure.ts';
import { finishReport, runBench, runInfo } from './support/report.ts';

const HOST = '127.0.0.1';

const { values: args } = parseArgs({
  options: {
    runs: { type: 'string', default: '3' },
    samples: { type: 'string', default: '1000' },
    warmup: { type: 'string', default: '100' },
    json: { type: 'string' },
  },
});
const RUNS = Number(args.runs);
const SAMPLES = Number(args.samples);
const WARMUP = Number(args.warmup);

// ---------------------------------------------------------------------------
// the runtime's own view, from /metrics
// ---------------------------------------------------------------------------

/** `arclight_command_duration_seconds` buckets for one command, cumulative, from /metrics. */
async function commandHistogram(url: string, command: string): Promise<{ buckets: Map<number, number>; sum: number; count: number }> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const buckets = new Map<number, number>();
  let sum = 0;
  let count = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith('arclight_command_duration_seconds') || !line.includes(`command="${command}"`)) continue;
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (line.startsWith('arclight_command_duration_seconds_bucket')) {
      const le = /le="([^"]+)"/.exec(line)?.[1];
      buckets.set(le === '+Inf' ? Infinity : Number(le), value);
    } else if (line.startsWith('arclight_command_duration_seconds_sum')) sum = value;
    else if (line.startsWith('arclight_command_duration_seconds_count')) count = value;
  }
  return { buckets, sum, count };
}

/** The runtime-side distribution between two /metrics reads: mean, and the bucket holding p50/p99. */
function histogramDelta(
  before: Awaited<ReturnType<typeof commandHistogram>>,
  after: Awaited<ReturnType<typeof commandHistogram>>,
): { count: number; meanMs: number; p50BucketMs: string; p99BucketMs: string } {
  const count = after.count - before.count;
  const bounds = [...after.buckets.keys()].sort((a, b) => a - b);
  const bucketFor = (q: number): string => {
    let previous = 0;
    for (const le of bounds) {
      const n = (after.buckets.get(le) ?? 0) - (before.buckets.get(le) ?? 0);
      if (n >= q * count) return `${previous * 1000}–${le === Infinity ? '∞' : le * 1000}`;
      previous = le;
    }
    return '?';
  };
  return {
    count,
    meanMs: count ? ((after.sum - before.sum) / count) * 1000 : NaN,
    p50BucketMs: bucketFor(0.5),
    p99BucketMs: bucketFor(0.99),
  };
}

// ---------------------------------------------------------------------------
// one measurement
// ---------------------------------------------------------------------------

interface WrtcNonstandard {
  nonstandard: { RTCVideoSink: new (track: MediaStreamTrack) => { onframe: (() => void) | null; stop(): void } };
}
const sinks: Array<{ stop(): void }> = [];

type Kind = 'sendCommand' | 'rawCommand' | 'rawPing';
const KINDS: readonly Kind[] = ['sendCommand', 'rawPing', 'rawCommand'];

let nextRequest = 0;

async function rawRoundTrip(peer: RawPeer, kind: 'rawCommand' | 'rawPing', speed: number): Promise<number> {
  const requestId = `b${++nextRequest}`;
  const text =
    kind === 'rawPing'
      ? JSON.stringify({ scope: 'runtime', data: { type: 'ping', request_id: requestId } })
      : JSON.stringify({ scope: 'application', data: { type: 'set_speed', data: { speed }, request_id: requestId } });
  const from = peer.messages.length;
  const started = performance.now();
  const done = peer.waitFor((m) => m.data?.request_id === requestId, 10_000, from);
  peer.sendRaw(text);
  const reply = await done;
  const elapsed = performance.now() - started;
  const expected = kind === 'rawPing' ? 'pong' : 'command_ack';
  if (reply.data.type !== expected) throw new Error(`${kind}: expected ${expected}, got ${JSON.stringify(reply)}`);
  return elapsed;
}

async function clientRoundTrip(client: ArclightClient, speed: number): Promise<number> {
  const started = performance.now();
  const reply = await client.sendCommand('set_speed', { speed });
  const elapsed = performance.now() - started;
  if (reply !== undefined) throw new Error(`set_speed: expected a bodyless ack, got ${JSON.stringify(reply)}`);
  return elapsed;
}

async function measure(client: ArclightClient, peer: RawPeer, count: number): Promise<Record<Kind, number[]>> {
  const samples: Record<Kind, number[]> = { sendCommand: [], rawCommand: [], rawPing: [] };
  for (let i = 0; i < count; i++) {
    const speed = (i % 8) + 1;
    for (let k = 0; k < KINDS.length; k++) {
      const kind = KINDS[(i + k) % KINDS.length]!;
      samples[kind].push(kind === 'sendCommand' ? await clientRoundTrip(client, speed) : await rawRoundTrip(peer, kind, speed));
    }
  }
  return samples;
}

interface PhaseResult {
  video: 'streaming' | 'paused';
  ms: Record<Kind, Summary>;
  ratio: { sendCommandOverPing: number; rawCommandOverPing: number };
  runtimeSide: ReturnType<typeof histogramDelta>;
  systemCpuBusyPct: number;
}

async function phase(url: string, client: ArclightClient, peer: RawPeer, video: PhaseResult['video']): Promise<PhaseResult> {
  await measure(client, peer, WARMUP);
  const before = await commandHistogram(url, 'set_speed');
  const cpu0 = systemCpu();
  const samples = await measure(client, peer, SAMPLES);
  const cpu1 = systemCpu();
  const after = await commandHistogram(url, 'set_speed');
  const ms = {
    sendCommand: summarise(samples.sendCommand),
    rawCommand: summarise(samples.rawCommand),
    rawPing: summarise(samples.rawPing),
  };
  return {
    video,
    ms,
    ratio: { sendCommandOverPing: ms.sendCommand.p50 / ms.rawPing.p50, rawCommandOverPing: ms.rawCommand.p50 / ms.rawPing.p50 },
    runtimeSide: histogramDelta(before, after),
    systemCpuBusyPct: (100 * (cpu1.busy - cpu0.busy)) / (cpu1.total - cpu0.total),
  };
}

async function run(index: number): Promise<PhaseResult[]> {
  const runtime = await startChildRuntime(HOST);
  const client = new ArclightClient({ modelName: 'pattern', local: true, localRuntimeUrl: runtime.url });
  let peer: RawPeer | undefined;
  try {
    let videoFrames = 0;
    client.on('trackReceived', (name, track) => {
      if (name !== 'main_video') return;
      // Count decoded frames, so "streaming" is known to be true (wrtc decodes VP8 here).
      const sink = new (wrtc as unknown as WrtcNonstandard).nonstandard.RTCVideoSink(track);
      sink.onframe = () => void videoFrames++;
      sinks.push(sink);
    });
    await client.connect();
    peer = await openRawPeer(runtime.url, client.getSessionId()!, { tracks: [] });
    const started = Date.now();
    while (videoFrames < 30 && Date.now() - started < 15_000) await sleep(100);
    if (videoFrames < 30) throw new Error(`the client decoded only ${videoFrames} frames in 15 s`);
    const results: PhaseResult[] = [];
    const framesBefore = videoFrames;
    const t0 = performance.now();
    results.push(await phase(runtime.url, client, peer, 'streaming'));
    const fps = ((videoFrames - framesBefore) * 1000) / (performance.now() - t0);
    process.stdout.write(`run ${index + 1}: video streaming (${fps.toFixed(1)} decoded fps during the phase) done\n`);
    client.pauseTrack('main_video');
    client.pauseTrack('tone');
    await sleep(500);
    results.push(await phase(runtime.url, client, peer, 'paused'));
    process.stdout.write(`run ${index + 1}: video paused done\n`);
    return results;
  } finally {
    for (const sink of sinks.splice(0)) sink.stop();
    peer?.close();
    await client.disconnect().catch(() => {});
    await runtime.stop();
  }
}

// ---------------------------------------------------------------------------
// main
// ---------------------------------------------------------------------------

const fmt = (x: number): string => x.toFixed(3);

async function main(): Promise<void> {
  const info = runInfo();
  process.stdout.write(
    `command-rtt: ${RUNS} runs × (${WARMUP} warm-up + ${SAMPLES} samples) per kind and phase\n${JSON.stringify(info)}\n`,
  );
  const runs: PhaseResult[][] = [];
  for (let i = 0; i < RUNS; i++) runs.push(await run(i));
  const loadavgAfter = loadavg();

  for (const video of ['streaming', 'paused'] as const) {
    process.stdout.write(`\n== video ${video} ==\n`);
    process.stdout.write('run  kind         p50     p90     p99     max     mean   (ms)\n');
    runs.forEach((phases, i) => {
      const p = phases.find((x) => x.video === video)!;
      for (const kind of KINDS) {
        const s = p.ms[kind];
        process.stdout.write(`${i + 1}    ${kind.padEnd(12)} ${fmt(s.p50)}  ${fmt(s.p90)}  ${fmt(s.p99)}  ${fmt(s.max)}  ${fmt(s.mean)}\n`);
      }
      process.stdout.write(
        `     ratio p50 sendCommand/ping ${p.ratio.sendCommandOverPing.toFixed(2)}, rawCommand/ping ${p.ratio.rawCommandOverPing.toFixed(2)}; ` +
          `runtime-side set_speed (sendCommand + raw command) mean ${fmt(p.runtimeSide.meanMs)} ms (p50 bucket ${p.runtimeSide.p50BucketMs} ms, p99 bucket ${p.runtimeSide.p99BucketMs} ms, n=${p.runtimeSide.count}); ` +
          `machine CPU busy ${p.systemCpuBusyPct.toFixed(0)}%\n`,
      );
    });
    for (const kind of KINDS) {
      const p50s = runs.map((phases) => phases.find((x) => x.video === video)!.ms[kind].p50);
      const p99s = runs.map((phases) => phases.find((x) => x.video === video)!.ms[kind].p99);
      process.stdout.write(
        `median p50 ${kind.padEnd(12)} ${fmt(median(p50s))} ms (spread ${fmt(Math.min(...p50s))}–${fmt(Math.max(...p50s))}); ` +
          `median p99 ${fmt(median(p99s))} ms (spread ${fmt(Math.min(...p99s))}–${fmt(Math.max(...p99s))})\n`,
      );
    }
    const ratios = runs.map((phases) => phases.find((x) => x.video === video)!.ratio.sendCommandOverPing);
    process.stdout.write(
      `median ratio sendCommand/ping p50: ${median(ratios).toFixed(2)} (spread ${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)})\n`,
    );
    const target = median(runs.map((phases) => phases.find((x) => x.video === video)!.ms.sendCommand.p50));
    process.stdout.write(`target sendCommand p50 ≤ 1 ms: ${target <= 1 ? 'MET' : 'NOT MET'} (${fmt(target)} ms)\n`);
  }
  process.stdout.write('\n');
  finishReport(info, loadavgAfter, args.json, { runs });
}

await runBench('command-rtt', main);
