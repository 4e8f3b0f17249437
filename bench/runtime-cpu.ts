/**
 * Runtime CPU per 720p30 stream: the `pattern` runtime's CPU time, as % of one core, while
 * idle, with a session but no subscriber, and with one and two subscribers sharing the session.
 *
 *   node --conditions=source --import tsx bench/runtime-cpu.ts [--rounds 3] [--seconds 20] [--settle 3] [--no-chromium] [--json out.json]
 *
 * The runtime is the real CLI (`bin/arclight.js serve models/examples/pattern`) in a CHILD
 * process; its CPU is read from /proc/<pid>/stat (utime + stime, every thread: the JS main thread,
 * libuv workers running the encoders, werift's crypto) before and after each window, and split
 * by thread from /proc/<pid>/task/<tid>/stat. The clients run elsewhere (Node clients in this
 * process, Chromium in its own processes), so their decoding is not counted.
 *
 * Phases, each after a settle period:
 *   idle                    runtime up, no session
 *   session, 0 subscribers  one Node client connected with its tracks paused (the model still draws)
 *   1 × VP8                 that client receives main_video (Node clients get VP8: wrtc has no H.264)
 *   2 × VP8                 a second Node client joins the same session (`connect(undefined, {sessionId})`)
 *                           and receives main_video too: one encode, two packet streams
 * and, with Chromium (needs root + iproute2; see test/support/netns.ts):
 *   1 × H.264 (Chromium)    both Node clients paused; a Chromium page on the session receives
 *                           main_video, offering H.264 first (Chromium's default offer gets VP8)
 *   H.264 + VP8             one Node client resumes: two encodes
 * Audio (`tone`) stays paused everywhere: the figures are for the video stream.
 */

import type { Server } from 'node:http';
import { readdirSync, readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import type { Page } from 'playwright-core';
import { ArclightClient, wrtc } from '../client/node.ts';
import { launchChromiumInNamespace, type LaunchedChromium } from '../test/support/chromium.ts';
import { createTestNetwork, networkNamespaceUnavailableReason, type TestNetwork } from '../test/support/netns.ts';
import { startChildRuntime } from './support/child-runtime.ts';
import { loadavg, median, sleep, systemCpu } from './support/measure.ts';
import { PREFER_H264_SCRIPT, servePage } from './support/page-server.ts';
import { finishReport, runBench, runInfo } from './support/report.ts';

const CLOCK_TICK_MS = 10; // USER_HZ = 100 on Linux

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '20' },
    settle: { type: 'string', default: '3' },
    'no-chromium': { type: 'boolean', default: false },
    json: { type: 'string' },
  },
});
const ROUNDS = Number(args.rounds);
const WINDOW_MS = Number(args.seconds) * 1000;
const SETTLE_MS = Number(args.settle) * 1000;

// ---------------------------------------------------------------------------
// CPU of the runtime process, whole and per thread
// ---------------------------------------------------------------------------

function statTimes(path: string): { comm: string; ms: number } | undefined {
  try {
    const stat = readFileSync(path, 'utf8');
    const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { comm, ms: (Number(fields[11]) + Number(fields[12])) * CLOCK_TICK_MS };
  } catch {
    return undefined;
  }
}

interface CpuSnapshot {
  at: number;
  processMs: number;
  /** Per thread id: name and CPU ms. */
  threads: Map<string, { comm: string; ms: number }>;
  system: { busy: number; total: number };
}

function snapshot(pid: number): CpuSnapshot {
  const threads = new Map<string, { comm: string; ms: number }>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    const t = statTimes(`/proc/${pid}/task/${tid}/stat`);
    if (t) threads.set(tid, { comm: tid === String(pid) ? 'main (JS)' : t.comm, ms: t.ms });
  }
  return { at: performance.now(), processMs: statTimes(`/proc/${pid}/stat`)?.ms ?? NaN, threads, system: systemCpu() };
}

interface CpuWindow {
  /** Whole process, % of one core. */
  pct: number;
  /** By thread name (threads that ended during the window are missing), % of one core. */
  byThread: Record<string, number>;
  /** Whole machine busy, % of all cores. */
  machineBusyPct: number;
}

function cpuBetween(a: CpuSnapshot, b: CpuSnapshot): CpuWindow {
  const wall = b.at - a.at;
  const byThread: Record<string, number> = {};
  for (const [tid, t] of b.threads) {
    const before = a.threads.get(tid)?.ms ?? 0;
    byThread[t.comm] = (byThread[t.comm] ?? 0) + ((t.ms - before) * 100) / wall;
  }
  for (const key of Object.keys(byThread)) if (byThread[key]! < 0.5) delete byThread[key];
  return {
    pct: ((b.processMs - a.processMs) * 100) / wall,
    byThread,
    machineBusyPct: (100 * (b.system.busy - a.system.busy)) / (b.system.total - a.system.total),
  };
}

// ---------------------------------------------------------------------------
// the runtime's own view, from /metrics
// ---------------------------------------------------------------------------

/** Counters and histogram sums from /metrics that explain a phase. */
async function runtimeCounters(url: string): Promise<Map<string, number>> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (
      line.startsWith('arclight_frames_sent_total') ||
      line.startsWith('arclight_frames_emitted_total') ||
      line.startsWith('arclight_frames_dropped_total') ||
      line.startsWith('arclight_encode_duration_seconds_sum') ||
      line.startsWith('arclight_encode_duration_seconds_count')
    ) {
      const space = line.lastIndexOf(' ');
      out.set(line.slice(0, space), Number(line.slice(space + 1)));
    }
  }
  return out;
}

function countersBetween(a: Map<string, number>, b: Map<string, number>, seconds: number): Record<string, string> {
  const rate = (key: string): number => ((b.get(key) ?? 0) - (a.get(key) ?? 0)) / seconds;
  const out: Record<string, string> = {};
  for (const key of b.keys()) {
    if (key.startsWith('arclight_encode_duration_seconds')) continue;
    const r = rate(key);
    if (r > 0) out[key.replace('arclight_', '').replace('_total', '')] = `${r.toFixed(1)}/s`;
  }
  for (const codec of ['h264', 'vp8']) {
    const n = rate(`arclight_encode_duration_seconds_count{codec="${codec}"}`);
    const sum = rate(`arclight_encode_duration_seconds_sum{codec="${codec}"}`);
    if (n > 0) out[`encode_${codec}`] = `${n.toFixed(1)} frames/s, mean ${((sum / n) * 1000).toFixed(2)} ms`;
  }
  return out;
}

// ---------------------------------------------------------------------------
// the Chromium subscriber
// ---------------------------------------------------------------------------

const PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><title>runtime-cpu subscriber</title></head>
<body style="margin:0;background:#000">
<video id="v" autoplay muted playsinline width="1280" height="720"></video>
<script type="module">
import { ArclightClient } from '/arclight-client.js';
const video = document.getElementById('v');
${PREFER_H264_SCRIPT}
window.subscribe = async (runtimeUrl, sessionId) => {
  // Offer H.264 first: the runtime answers in the offer's codec order.
  preferH264();
  const client = new ArclightClient({ modelName: 'pattern', local: true, localRuntimeUrl: runtimeUrl });
  window.client = client;
  client.on('trackReceived', (name, track) => {
    if (name !== 'main_video') return;
    video.srcObject = new MediaStream([track]);
    video.play().catch(() => {});
  });
  await client.connect(undefined, { sessionId, autoResumeTracks: false });
  client.resumeTrack('main_video');
};
window.codecInfo = async () => {
  const report = await window.client.getPeerConnection().getStats();
  let inbound = null;
  report.forEach((s) => { if (s.type === 'inbound-rtp' && s.kind === 'video') inbound = s; });
  return { codec: inbound?.codecId ? report.get(inbound.codecId)?.mimeType ?? null : null, framesDecoded: inbound?.framesDecoded ?? 0 };
};
window.unsubscribe = () => window.client?.disconnect(true);
</script></body></html>`;

// ---------------------------------------------------------------------------
// one round
// ---------------------------------------------------------------------------

interface WrtcNonstandard {
  nonstandard: { RTCVideoSink: new (track: MediaStreamTrack) => { onframe: (() => void) | null; stop(): void } };
}

/** A Node client whose decoded main_video frames are counted (so "subscribed" is checked, not assumed). */
class CountingClient {
  readonly client: ArclightClient;
  frames = 0;
  #sink: { stop(): void } | undefined;

  constructor(url: string) {
    this.client = new ArclightClient({ modelName: 'pattern', local: true, localRuntimeUrl: url });
    this.client.on('trackReceived', (name, track) => {
      if (name !== 'main_video') return;
      const sink = new (wrtc as unknown as WrtcNonstandard).nonstandard.RTCVideoSink(track);
      sink.onframe = () => void this.frames++;
      this.#sink = sink;
    });
  }

  async close(): Promise<void> {
    this.#sink?.stop();
    await this.client.disconnect().catch(() => {});
  }
}

interface PhaseResult {
  phase: string;
  cpu: CpuWindow;
  runtime: Record<string, string>;
  /** Frames per second each subscriber decoded during the window. */
  subscriberFps: Record<string, number>;
}

async function waitFrames(what: string, count: () => number | Promise<number>, atLeast: number, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const start = await count();
  while ((await count()) - start < atLeast) {
    if (Date.now() > deadline) throw new Error(`${what}: fewer than ${atLeast} frames decoded in ${timeoutMs} ms`);
    await sleep(100);
  }
}

async function round(index: number, host: string, chrome: { browser: LaunchedChromium; pageUrl: string } | undefined): Promise<PhaseResult[]> {
  const runtime = await startChildRuntime(host, { graceSeconds: 600, stderrTailChars: 3_000 });
  const results: PhaseResult[] = [];
  const a = new CountingClient(runtime.url);
  const b = new CountingClient(runtime.url);
  let page: Page | undefined;
  const pageFrames = async (): Promise<number> =>
    page ? ((await page.evaluate(() => (window as unknown as { codecInfo(): Promise<{ framesDecoded: number }> }).codecInfo())).framesDecoded) : 0;

  const measure = async (phase: string, subscribers: Record<string, () => number | Promise<number>>): Promise<void> => {
    await sleep(SETTLE_MS);
    const counts0 = await Promise.all(Object.values(subscribers).map((c) => c()));
    const metrics0 = await runtimeCounters(runtime.url);
    const s0 = snapshot(runtime.pid);
    await sleep(WINDOW_MS);
    const s1 = snapshot(runtime.pid);
    const metrics1 = await runtimeCounters(runtime.url);
    const counts1 = await Promise.all(Object.values(subscribers).map((c) => c()));
    const seconds = (s1.at - s0.at) / 1000;
    const subscriberFps = Object.fromEntries(Object.keys(subscribers).map((name, i) => [name, +((counts1[i]! - counts0[i]!) / seconds).toFixed(1)]));
    const result = { phase, cpu: cpuBetween(s0, s1), runtime: countersBetween(metrics0, metrics1, seconds), subscriberFps };
    results.push(result);
    const threads = Object.entries(result.cpu.byThread).sort((x, y) => y[1] - x[1]).map(([k, v]) => `${k} ${v.toFixed(1)}`).join(', ');
    process.stdout.write(
      `round ${index + 1} | ${phase.padEnd(26)} runtime ${result.cpu.pct.toFixed(1).padStart(5)}% of a core  [${threads}]  machine busy ${result.cpu.machineBusyPct.toFixed(0)}%\n` +
        `        runtime: ${JSON.stringify(result.runtime)}  subscribers decoded fps: ${JSON.stringify(subscriberFps)}\n`,
    );
  };

  try {
    await measure('idle (no session)', {});

    await a.client.connect(undefined, { autoResumeTracks: false });
    const sessionId = a.client.getSessionId()!;
    await measure('session, 0 subscribers', {});

    a.client.resumeTrack('main_video');
    await waitFrames('client A', () => a.frames, 30);
    await measure('1 × VP8 (Node)', { A: () => a.frames });

    await b.client.connect(undefined, { sessionId, autoResumeTracks: false });
    b.client.resumeTrack('main_video');
    await waitFrames('client B', () => b.frames, 30);
    await measure('2 × VP8 (Node, shared)', { A: () => a.frames, B: () => b.frames });

    if (chrome) {
      a.client.pauseTrack('main_video');
      b.client.pauseTrack('main_video');
      page = await chrome.browser.newPage({ viewport: { width: 1280, height: 720 } });
      await page.goto(chrome.pageUrl);
      await page.evaluate(([url, sid]) => (window as unknown as { subscribe(u: string, s: string): Promise<void> }).subscribe(url, sid), [runtime.url, sessionId] as const);
      await waitFrames('Chromium', pageFrames, 30);
      const codec = (await page.evaluate(() => (window as unknown as { codecInfo(): Promise<{ codec: string | null }> }).codecInfo())).codec;
      if (codec !== 'video/H264') process.stdout.write(`        note: Chromium negotiated ${codec}, not H.264\n`);
      await measure(`1 × ${codec === 'video/H264' ? 'H.264' : codec} (Chromium)`, { chromium: pageFrames });

      a.client.resumeTrack('main_video');
      await waitFrames('client A again', () => a.frames, 30);
      await measure(`${codec === 'video/H264' ? 'H.264' : codec} + VP8 (2 encodes)`, { chromium: pageFrames, A: () => a.frames });
    }
    return results;
  } finally {
    if (page) {
      await page.evaluate(() => (window as unknown as { unsubscribe(): Promise<void> }).unsubscribe()).catch(() => {});
      await page.context().close().catch(() => {});
    }
    await b.close();
    await a.close();
    await runtime.stop();
  }
}

// ---------------------------------------------------------------------------
// main
// ---------------------------------------------------------------------------

async function main(): Promise<void> {
  const info = runInfo();
  const noNamespace = networkNamespaceUnavailableReason();
  const withChromium = !args['no-chromium'] && noNamespace === null;
  process.stdout.write(
    `runtime-cpu: ${ROUNDS} rounds, ${SETTLE_MS / 1000} s settle + ${WINDOW_MS / 1000} s window per phase; Chromium phases: ${withChromium ? 'yes' : `no (${args['no-chromium'] ? '--no-chromium' : noNamespace})`}\n` +
      `${JSON.stringify(info)}\n`,
  );
  let net: TestNetwork | undefined;
  let browser: LaunchedChromium | undefined;
  let server: Server | undefined;
  const rounds: PhaseResult[][] = [];
  try {
    let host = '127.0.0.1';
    let chrome: { browser: LaunchedChromium; pageUrl: string } | undefined;
    if (withChromium) {
      net = await createTestNetwork();
      host = net.hostAddress;
      const served = await servePage(host, PAGE);
      server = served.server;
      browser = await launchChromiumInNamespace(net);
      chrome = { browser, pageUrl: served.url };
    }
    for (let i = 0; i < ROUNDS; i++) rounds.push(await round(i, host, chrome));
  } finally {
    await browser?.close().catch(() => {});
    server?.close();
    await net?.close();
  }
  const loadavgAfter = loadavg();

  process.stdout.write('\n== runtime CPU, % of one core: median over rounds (spread min–max) ==\n');
  const phases = rounds[0]!.map((p) => p.phase);
  const medians: Record<string, number> = {};
  for (const [i, phase] of phases.entries()) {
    const values = rounds.map((r) => r[i]!.cpu.pct);
    medians[phase] = median(values);
    const busy = rounds.map((r) => r[i]!.cpu.machineBusyPct);
    process.stdout.write(
      `${phase.padEnd(28)} ${median(values).toFixed(1).padStart(5)}  (${Math.min(...values).toFixed(1)}–${Math.max(...values).toFixed(1)})   machine busy ${median(busy).toFixed(0)}%\n`,
    );
  }
  const base = medians['session, 0 subscribers']!;
  const one = medians['1 × VP8 (Node)']!;
  const two = medians['2 × VP8 (Node, shared)']!;
  process.stdout.write(
    `\nper VP8 stream (1 subscriber − 0 subscribers): ${(one - base).toFixed(1)}% of a core\n` +
      `second subscriber on the same session (2 − 1): ${(two - one).toFixed(1)}% of a core; ratio (2 − 0)/(1 − 0) = ${((two - base) / (one - base)).toFixed(2)} (1.00 = fan-out is free)\n`,
  );
  const chromeOne = phases.find((p) => p.endsWith('(Chromium)'));
  if (chromeOne) process.stdout.write(`per ${chromeOne.split(' ')[2]} stream (Chromium − 0 subscribers): ${(medians[chromeOne]! - base).toFixed(1)}% of a core\n`);
  finishReport(info, loadavgAfter, args.json, { rounds });
}

await runBench('runtime-cpu', main);
