/**
 * Runtime CPU per 720p30 stream, fan-out to many viewers of one session, a stream at ~2 Mbit/s,
 * and how many 720p30 runtimes this machine holds before frames drop.
 *
 *   node --conditions=source --import tsx bench/runtime-cpu.ts [--rounds 3] [--seconds 10] [--settle 3]
 *        [--viewers 1,10] [--no-chromium] [--no-busy] [--max-runtimes 8] [--no-sweep] [--json out.json]
 *        [--sweep-model pattern[,busy]] [--sweep-viewer node|h264|vp8] [--sweep-recording off[,shared,own]] [--sweep-from 1]
 *        [--cpu-prof DIR]   (V8 CPU profile of the shared-session runtime, written when it stops)
 *
 * Every runtime is the real CLI (`bin/arclight.js serve <model>`) in a CHILD process; its CPU is
 * read from /proc/<pid>/stat (utime + stime, every thread: the JS main thread, libuv workers
 * running the encoders, werift's crypto) before and after each window, and split by thread from
 * /proc/<pid>/task/<tid>/stat. The clients run elsewhere (Node clients in this process, Chromium
 * in its own processes), so their decoding is not counted in the runtime's figure — but it runs
 * on the same 2 cores. Node viewers are ArclightClients (wrtc) that decode VP8 (wrtc has no
 * H.264) without handing frames to JavaScript; their decoded fps and bitrate come from getStats.
 *
 * Each round, on a fresh `pattern` runtime (models/examples/pattern, 720p30, ~0.9 Mbit/s H.264):
 *   idle                    runtime up, no session
 *   session, 0 subscribers  one Node client connected with its tracks paused (the model still draws)
 *   N × VP8 (Node, shared)  for each N in --viewers: Node clients join the same session
 *                           (`connect(undefined, {sessionId})`) until there are N, all receiving
 *                           main_video: one encode, N packet streams
 * with Chromium (needs root + iproute2; see test/support/netns.ts; the extra viewers leave first):
 *   1 × H.264 (Chromium)    the Node client paused; a Chromium page on the session receives main_video
 *   H.264 + VP8             the Node client resumes: two encodes
 * then, on a fresh `busy` runtime (bench/models/busy-model.ts: noise under the pattern overlays,
 * track bitrate 2,000 kbps, so the stream really is ~2 Mbit/s):
 *   busy: session, 0 subscribers / busy: 1 × VP8 (Node) / busy: 1 × H.264 (Chromium)
 * then (unless --no-recording), on a fresh `pattern` runtime with recording on (every other
 * runtime here runs with --no-recording, as the figures before recording existed did):
 *   recording: 1 × VP8 (Node)   — minus `1 × VP8 (Node, shared)`: what recording a stream costs
 * Per stream = a phase − its runtime's `session, 0 subscribers` (the model's drawing is not the
 * stream's cost). Audio (`tone`) stays paused everywhere: the figures are for the video stream.
 *
 * After the rounds, the sweep (once): N runtime PROCESSES (`pattern`, one per GPU in production,
 * each serving one session), each with one Node viewer, N = 1, 2, 3, ... up to --max-runtimes,
 * adding one runtime and its viewer per step, a window per step. A step fails when any runtime's
 * `arclight_frames_dropped_total` rises during the window, or any viewer decodes < 27 fps, or
 * any runtime's model emits < 27 fps (under the default `block` policy a runtime that cannot keep
 * up slows its model rather than counting drops). The answer is the largest N that passed.
 * The sweep's options (issue 26 part 5, sessions per machine):
 *   --sweep-model      `pattern` (default) or `busy` (noise at ~2 Mbit/s); a list runs one sweep each
 *   --sweep-viewer     `node` (default: the wrtc Node client above, VP8, decoding in this process),
 *                      `h264` (a werift peer offering only H.264 Constrained Baseline,
 *                      profile-level-id=42e01f, packetization-mode=1, as Chromium gets) or `vp8`
 *                      (the same, VP8): bench/support/rtp-viewer.ts; they count frames from the RTP
 *                      (a new timestamp = a frame) and decode nothing, so this process's share is
 *                      the receive path (werift: ICE, SRTP, RTCP), not a decoder
 *   --sweep-recording  `off` (default, --no-recording), `shared` (the CLI's default: the recorder
 *                      takes the live H.264 stream's frames when one runs), `own` (--recording-encoder
 *                      own: a second encode, H.264 High); a list runs one sweep each, in order. Each
 *                      recording runtime records into its own temp folder (removed when it stops);
 *                      its /events `recording_segment` events say which encoder made each segment
 *   --sweep-from N     start with N runtimes at once (default 1)
 * A step also fails when a runtime's main_video sent < 27 fps (`arclight_frames_sent_total`; one
 * viewer each, so frames sent to it). Drops for a paused or absent viewer (reasons `paused`,
 * `no_subscribers`) do not count.
 */

import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import os from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { Page } from 'playwright-core';
import { ArclightClient } from '../client/node.ts';
import { launchChromiumInNamespace, type LaunchedChromium } from '../test/support/chromium.ts';
import { readRuntimeEvents, type RuntimeEventReader } from '../test/support/event-stream-reader.ts';
import { createTestNetwork, networkNamespaceUnavailableReason, type TestNetwork } from '../test/support/netns.ts';
import { startChildRuntime, type ChildRuntime } from './support/child-runtime.ts';
import { loadavg, median, sleep } from './support/measure.ts';
import { cpuSnapshot as snapshot, type CpuSnapshot } from './support/process-probe.ts';
import { PREFER_H264_SCRIPT, servePage } from './support/page-server.ts';
import { finishReport, runBench, runInfo } from './support/report.ts';
import { openRtpViewer, type RtpViewerCodec } from './support/rtp-viewer.ts';

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '10' },
    settle: { type: 'string', default: '3' },
    /** Viewer counts for the shared-session phases, in order. */
    viewers: { type: 'string', default: '1,10' },
    'no-chromium': { type: 'boolean', default: false },
    'no-recording': { type: 'boolean', default: false },
    /** Skip the ~2 Mbit/s (`busy` model) phases. */
    'no-busy': { type: 'boolean', default: false },
    'max-runtimes': { type: 'string', default: '8' },
    /** Skip the runtimes-per-machine sweep. */
    'no-sweep': { type: 'boolean', default: false },
    /** The sweep's runtimes' model(s), comma-separated: `pattern`, `busy` (~2 Mbit/s noise). */
    'sweep-model': { type: 'string', default: 'pattern' },
    /**
     * The sweep's viewer: `node` (an ArclightClient on wrtc: VP8, decoded in this process), `h264` or
     * `vp8` (a werift peer that negotiates that codec and counts frames from the RTP, no decode).
     */
    'sweep-viewer': { type: 'string', default: 'node' },
    /** The sweep's recording, comma-separated, one sweep each in order: `off`, `shared` (the CLI's default), `own`. */
    'sweep-recording': { type: 'string', default: 'off' },
    /** The sweep's first step: this many runtimes at once. */
    'sweep-from': { type: 'string', default: '1' },
    json: { type: 'string' },
    /** Folder for V8 CPU profiles of the shared-session runtime (one file per run, on stop). */
    'cpu-prof': { type: 'string' },
  },
});
const ROUNDS = Number(args.rounds);
const WINDOW_MS = Number(args.seconds) * 1000;
const SETTLE_MS = Number(args.settle) * 1000;
const VIEWER_COUNTS = args.viewers.split(',').map(Number);
if (VIEWER_COUNTS.some((n, i) => !(Number.isInteger(n) && n >= 1 && (i === 0 || n > VIEWER_COUNTS[i - 1]!)))) {
  throw new Error('--viewers takes increasing counts, e.g. 1,10');
}
const MAX_RUNTIMES = Number(args['max-runtimes']);
const SWEEP_FROM = Number(args['sweep-from']);
if (!(Number.isInteger(SWEEP_FROM) && SWEEP_FROM >= 1)) throw new Error('--sweep-from takes a count ≥ 1');

const SWEEP_MODELS = { pattern: 'models/examples/pattern', busy: 'bench/models/busy-model.ts' } as const;
type SweepModel = keyof typeof SWEEP_MODELS;
type SweepViewer = 'node' | RtpViewerCodec;
type SweepRecording = 'off' | 'shared' | 'own';
function listOption<T extends string>(flag: string, value: string, allowed: readonly T[]): T[] {
  const out = value.split(',').map((v) => v.trim());
  for (const v of out) if (!allowed.includes(v as T)) throw new Error(`--${flag}: "${v}" is not one of ${allowed.join(', ')}`);
  return out as T[];
}
const SWEEP_MODEL_LIST = listOption<SweepModel>('sweep-model', args['sweep-model'], ['pattern', 'busy']);
const [SWEEP_VIEWER] = listOption<SweepViewer>('sweep-viewer', args['sweep-viewer'], ['node', 'h264', 'vp8']);
const SWEEP_RECORDING_LIST = listOption<SweepRecording>('sweep-recording', args['sweep-recording'], ['off', 'shared', 'own']);
/** Below this a viewer or a model counts as not keeping up (of 30 fps). */
const MIN_FPS = 27;

// ---------------------------------------------------------------------------
// CPU of the runtime process, whole and per thread
// ---------------------------------------------------------------------------

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

/** Per second, summed over every label set of a counter (e.g. all drop reasons) whose labels contain `labels`. */
function counterRate(a: Map<string, number>, b: Map<string, number>, name: string, seconds: number, labels = ''): number {
  let sum = 0;
  for (const [key, value] of b) {
    if ((key === name || key.startsWith(`${name}{`)) && key.includes(labels)) sum += value - (a.get(key) ?? 0);
  }
  return sum / seconds;
}

// ---------------------------------------------------------------------------
// subscribers
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
  // Offer H.264 first (the runtime prefers it anyway).
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
  return {
    codec: inbound?.codecId ? report.get(inbound.codecId)?.mimeType ?? null : null,
    framesDecoded: inbound?.framesDecoded ?? 0,
    bytesReceived: inbound?.bytesReceived ?? 0,
  };
};
window.unsubscribe = () => window.client?.disconnect(true);
</script></body></html>`;

interface Received {
  frames: number;
  bytes: number;
}
type Subscriber = () => Promise<Received>;

/**
 * A Node client (wrtc) on a session. wrtc decodes the video whether or not a sink takes the
 * frames; no sink is attached, so no frame is copied into JavaScript: what it costs this process
 * is the VP8 decode (~6 % of a core at 720p30 here). Frames decoded and bytes come from getStats.
 */
class Viewer {
  readonly client: ArclightClient;

  constructor(url: string) {
    this.client = new ArclightClient({ modelName: 'pattern', local: true, localRuntimeUrl: url });
  }

  readonly received: Subscriber = async () => {
    const report = await this.client.getPeerConnection()?.getStats();
    let out: Received = { frames: 0, bytes: 0 };
    report?.forEach((s: Record<string, unknown>) => {
      if (s['type'] === 'inbound-rtp' && s['kind'] === 'video') {
        out = { frames: Number(s['framesDecoded'] ?? 0), bytes: Number(s['bytesReceived'] ?? 0) };
      }
    });
    return out;
  };

  async close(): Promise<void> {
    await this.client.disconnect().catch(() => {});
  }
}

async function waitFrames(what: string, subscriber: Subscriber, atLeast: number, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const start = (await subscriber()).frames;
  while ((await subscriber()).frames - start < atLeast) {
    if (Date.now() > deadline) throw new Error(`${what}: fewer than ${atLeast} frames decoded in ${timeoutMs} ms`);
    await sleep(100);
  }
}

// ---------------------------------------------------------------------------
// one phase
// ---------------------------------------------------------------------------

interface SubscriberResult {
  fps: number;
  kbps: number;
}

interface PhaseResult {
  phase: string;
  /** The runtime's model: `pattern` or `busy`. */
  model: string;
  cpu: CpuWindow;
  runtime: Record<string, string>;
  emittedFps: number;
  droppedPerSecond: number;
  /** Per subscriber, what it decoded during the window. */
  subscribers: Record<string, SubscriberResult>;
}

async function measurePhase(
  label: string,
  phase: string,
  model: string,
  runtime: ChildRuntime,
  subscribers: Record<string, Subscriber>,
): Promise<PhaseResult> {
  await sleep(SETTLE_MS);
  const names = Object.keys(subscribers);
  const received0 = await Promise.all(names.map((n) => subscribers[n]!()));
  const metrics0 = await runtimeCounters(runtime.url);
  const s0 = snapshot(runtime.pid);
  await sleep(WINDOW_MS);
  const s1 = snapshot(runtime.pid);
  const metrics1 = await runtimeCounters(runtime.url);
  const received1 = await Promise.all(names.map((n) => subscribers[n]!()));
  const seconds = (s1.at - s0.at) / 1000;
  const subs = Object.fromEntries(
    names.map((name, i) => [
      name,
      {
        fps: +((received1[i]!.frames - received0[i]!.frames) / seconds).toFixed(1),
        kbps: +(((received1[i]!.bytes - received0[i]!.bytes) * 8) / seconds / 1000).toFixed(0),
      },
    ]),
  );
  const result: PhaseResult = {
    phase,
    model,
    cpu: cpuBetween(s0, s1),
    runtime: countersBetween(metrics0, metrics1, seconds),
    emittedFps: counterRate(metrics0, metrics1, 'arclight_frames_emitted_total', seconds, 'track="main_video"'),
    droppedPerSecond: counterRate(metrics0, metrics1, 'arclight_frames_dropped_total', seconds),
    subscribers: subs,
  };
  const threads = Object.entries(result.cpu.byThread)
    .sort((x, y) => y[1] - x[1])
    .map(([k, v]) => `${k} ${v.toFixed(1)}`)
    .join(', ');
  const fps = Object.values(subs).map((s) => s.fps);
  const kbps = Object.values(subs).map((s) => s.kbps);
  process.stdout.write(
    `${label} | ${phase.padEnd(28)} runtime ${result.cpu.pct.toFixed(1).padStart(5)}% of a core  [${threads}]  machine busy ${result.cpu.machineBusyPct.toFixed(0)}%\n` +
      `        runtime: ${JSON.stringify(result.runtime)}\n` +
      (names.length
        ? `        ${names.length} subscriber(s) decoded fps min ${Math.min(...fps)} median ${median(fps)}, kbps median ${median(kbps)}` +
          (names.length <= 3 ? ` ${JSON.stringify(subs)}` : '') +
          '\n'
        : ''),
  );
  return result;
}

// ---------------------------------------------------------------------------
// one round
// ---------------------------------------------------------------------------

interface ChromeSetup {
  browser: LaunchedChromium;
  pageUrl: string;
}

/** A Chromium page subscribed to `sessionId` on `runtime`; returns its frame/byte counter and codec. */
async function chromiumSubscriber(
  chrome: ChromeSetup,
  runtime: ChildRuntime,
  sessionId: string,
): Promise<{ page: Page; received: Subscriber; codec: string | null }> {
  const page = await chrome.browser.newPage({ viewport: { width: 1280, height: 720 } });
  type W = {
    subscribe(u: string, s: string): Promise<void>;
    codecInfo(): Promise<{ codec: string | null; framesDecoded: number; bytesReceived: number }>;
  };
  await page.goto(chrome.pageUrl);
  await page.evaluate(([url, sid]) => (window as unknown as W).subscribe(url, sid), [runtime.url, sessionId] as const);
  const received: Subscriber = async () => {
    const info = await page.evaluate(() => (window as unknown as W).codecInfo());
    return { frames: info.framesDecoded, bytes: info.bytesReceived };
  };
  await waitFrames('Chromium', received, 30);
  const codec = (await page.evaluate(() => (window as unknown as W).codecInfo())).codec;
  if (codec !== 'video/H264') process.stdout.write(`        note: Chromium negotiated ${codec}, not H.264\n`);
  return { page, received, codec };
}

async function closePage(page: Page | undefined): Promise<void> {
  if (!page) return;
  await page.evaluate(() => (window as unknown as { unsubscribe(): Promise<void> }).unsubscribe()).catch(() => {});
  await page
    .context()
    .close()
    .catch(() => {});
}

const codecName = (codec: string | null): string => (codec === 'video/H264' ? 'H.264' : (codec ?? '?'));

async function patternRound(index: number, host: string, chrome: ChromeSetup | undefined): Promise<PhaseResult[]> {
  const label = `round ${index + 1}`;
  const runtime = await startChildRuntime(host, {
    graceSeconds: 600,
    stderrTailChars: 3_000,
    ...(args['cpu-prof'] ? { cpuProfileDir: args['cpu-prof'] } : {}),
  });
  const results: PhaseResult[] = [];
  const viewers: Viewer[] = [];
  let page: Page | undefined;
  try {
    results.push(await measurePhase(label, 'idle (no session)', 'pattern', runtime, {}));

    const first = new Viewer(runtime.url);
    viewers.push(first);
    await first.client.connect(undefined, { autoResumeTracks: false });
    const sessionId = first.client.getSessionId()!;
    results.push(await measurePhase(label, 'session, 0 subscribers', 'pattern', runtime, {}));

    first.client.resumeTrack('main_video');
    await waitFrames('viewer 1', first.received, 30);
    for (const count of VIEWER_COUNTS) {
      while (viewers.length < count) {
        const viewer = new Viewer(runtime.url);
        viewers.push(viewer);
        // Video only, like the first viewer: the figures are for the video stream.
        await viewer.client.connect(undefined, { sessionId, autoResumeTracks: false });
        viewer.client.resumeTrack('main_video');
      }
      await Promise.all(viewers.map((v, i) => waitFrames(`viewer ${i + 1}`, v.received, 30)));
      const subs = Object.fromEntries(viewers.map((v, i) => [`V${i + 1}`, v.received]));
      results.push(await measurePhase(label, `${count} × VP8 (Node, shared)`, 'pattern', runtime, subs));
    }

    if (chrome) {
      // The extra viewers leave; the first one stays, paused, as before.
      for (const viewer of viewers.splice(1)) await viewer.close();
      first.client.pauseTrack('main_video');
      const sub = await chromiumSubscriber(chrome, runtime, sessionId);
      page = sub.page;
      results.push(await measurePhase(label, `1 × ${codecName(sub.codec)} (Chromium)`, 'pattern', runtime, { chromium: sub.received }));
      first.client.resumeTrack('main_video');
      await waitFrames('viewer 1 again', first.received, 30);
      results.push(
        await measurePhase(label, `${codecName(sub.codec)} + VP8 (2 encodes)`, 'pattern', runtime, {
          chromium: sub.received,
          V1: first.received,
        }),
      );
    }
    return results;
  } finally {
    await closePage(page);
    for (const viewer of viewers) await viewer.close();
    await runtime.stop();
  }
}

/**
 * The recording's cost: a fresh `pattern` runtime with recording on (H.264 + AAC for clips),
 * one Node viewer; compare with the round's `1 × VP8 (Node, shared)` on a runtime without it.
 */
async function recordingRound(index: number, host: string): Promise<PhaseResult[]> {
  const label = `round ${index + 1}`;
  const runtime = await startChildRuntime(host, { graceSeconds: 600, stderrTailChars: 3_000, recording: true });
  const viewer = new Viewer(runtime.url);
  try {
    await viewer.client.connect(undefined, { autoResumeTracks: false });
    viewer.client.resumeTrack('main_video');
    await waitFrames('recording viewer', viewer.received, 30);
    return [await measurePhase(label, 'recording: 1 × VP8 (Node)', 'pattern', runtime, { V1: viewer.received })];
  } finally {
    await viewer.close();
    await runtime.stop();
  }
}

async function busyRound(index: number, host: string, chrome: ChromeSetup | undefined): Promise<PhaseResult[]> {
  const label = `round ${index + 1}`;
  const runtime = await startChildRuntime(host, { model: 'bench/models/busy-model.ts', graceSeconds: 600, stderrTailChars: 3_000 });
  const results: PhaseResult[] = [];
  const viewer = new Viewer(runtime.url);
  let page: Page | undefined;
  try {
    await viewer.client.connect(undefined, { autoResumeTracks: false });
    const sessionId = viewer.client.getSessionId()!;
    results.push(await measurePhase(label, 'busy: session, 0 subscribers', 'busy', runtime, {}));
    viewer.client.resumeTrack('main_video');
    await waitFrames('busy viewer', viewer.received, 30);
    results.push(await measurePhase(label, 'busy: 1 × VP8 (Node)', 'busy', runtime, { V1: viewer.received }));
    if (chrome) {
      viewer.client.pauseTrack('main_video');
      const sub = await chromiumSubscriber(chrome, runtime, sessionId);
      page = sub.page;
      results.push(await measurePhase(label, `busy: 1 × ${codecName(sub.codec)} (Chromium)`, 'busy', runtime, { chromium: sub.received }));
    }
    return results;
  } finally {
    await closePage(page);
    await viewer.close();
    await runtime.stop();
  }
}

// ---------------------------------------------------------------------------
// the sweep: N runtime processes, one session and one viewer each
// ---------------------------------------------------------------------------

interface SweepConfig {
  readonly model: SweepModel;
  readonly viewer: SweepViewer;
  readonly recording: SweepRecording;
}

const sweepName = (c: SweepConfig): string => `${c.model}, ${c.viewer} viewer, recording ${c.recording}`;

/** One runtime of the sweep: the process, its viewer, its recording folder and event stream. */
interface SweepSlot {
  runtime: ChildRuntime;
  received: () => Promise<Received>;
  close: () => Promise<void>;
  /** The negotiated video codec (RTP viewers) or `VP8 (wrtc)`. */
  codec: string;
  recordingDir?: string;
  events?: RuntimeEventReader;
}

interface SweepRuntime {
  cpuPct: number;
  emittedFps: number;
  /** The runtime's `arclight_frames_sent_total{track="main_video"}` over the window (one viewer: frames sent to it). */
  sentFps: number;
  droppedPerSecond: number;
  viewerFps: number;
  viewerKbps: number;
  /** Recording runs: `recording_segment` events in the window, by encoder (`live`: the live H.264 stream's frames; `own`: the recorder's encode). */
  segments?: { live: number; own: number };
  /** Recording runs: video samples in each segment file written during the window (60 = every frame of 2 s at 30 fps). */
  samplesPerSegment?: number[];
}

interface SweepStep {
  sweep: string;
  config: SweepConfig;
  runtimes: number;
  perRuntime: SweepRuntime[];
  machineBusyPct: number;
  /** Everything in this process (the viewers: wrtc decoding VP8, or werift receiving RTP), % of one core. */
  viewersCpuPct: number;
  /** Machine busy time not accounted for by the runtimes and this process (other users' work), % of one core. */
  othersCpuPct: number;
  loadavg: string;
  ok: boolean;
  why: string[];
}

/** Frames dropped per second for any reason but a paused or absent viewer (nothing to send then). */
function droppedRate(a: Map<string, number>, b: Map<string, number>, seconds: number): number {
  let sum = 0;
  for (const [key, value] of b) {
    if (key.startsWith('arclight_frames_dropped_total') && !/reason="(paused|no_subscribers)"/.test(key)) sum += value - (a.get(key) ?? 0);
  }
  return sum / seconds;
}

/** Segment files (`seg-*.m4s`) under `dir`, by path. */
function segmentFiles(dir: string): Set<string> {
  const out = new Set<string>();
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile() && /^seg-\d+\.m4s$/.test(entry.name)) out.add(join(entry.parentPath, entry.name));
  }
  return out;
}

/** Video samples in a segment (its first `trun`: the video track's; no audio is recorded here). */
function segmentSamples(path: string): number | undefined {
  try {
    const data = readFileSync(path);
    const at = data.indexOf('trun');
    return at >= 4 ? data.readUInt32BE(at + 8) : undefined;
  } catch {
    return undefined;
  }
}

async function openSweepSlot(host: string, config: SweepConfig, n: number): Promise<SweepSlot> {
  const recordingDir = config.recording === 'off' ? undefined : mkdtempSync(join(os.tmpdir(), 'arclight-sweep-recording-'));
  const runtime = await startChildRuntime(host, {
    model: SWEEP_MODELS[config.model],
    graceSeconds: 600,
    stderrTailChars: 2_000,
    recording: recordingDir !== undefined,
    ...(recordingDir
      ? { extraArgs: ['--recording-dir', recordingDir, ...(config.recording === 'own' ? ['--recording-encoder', 'own'] : [])] }
      : {}),
  });
  const events = recordingDir ? await readRuntimeEvents(runtime.url) : undefined;
  const cleanUp = async (): Promise<void> => {
    events?.stop();
    await runtime.stop();
    if (recordingDir) rmSync(recordingDir, { recursive: true, force: true });
  };
  try {
    // The Node client (VP8, decoded) connects once its slot exists; an RTP viewer is connected when opened.
    let viewer: { received: () => Promise<Received>; codec: string; close: () => Promise<void>; connect: () => Promise<void> };
    if (config.viewer === 'node') {
      const node = new Viewer(runtime.url);
      viewer = {
        received: node.received,
        codec: 'VP8 (wrtc, decoded)',
        close: () => node.close(),
        connect: async () => {
          await node.client.connect(undefined, { autoResumeTracks: false });
          node.client.resumeTrack('main_video');
        },
      };
    } else {
      const rtp = await openRtpViewer(runtime.url, host, config.viewer);
      viewer = { received: async () => rtp.received(), codec: rtp.negotiated, close: () => rtp.close(), connect: async () => {} };
    }
    const slot: SweepSlot = {
      runtime,
      received: viewer.received,
      codec: viewer.codec,
      close: async () => {
        await viewer.close();
        await cleanUp();
      },
      ...(recordingDir ? { recordingDir } : {}),
      ...(events ? { events } : {}),
    };
    try {
      await viewer.connect();
      await waitFrames(`sweep viewer ${n}`, viewer.received, 30, 30_000);
    } catch (error) {
      await slot.close();
      throw error;
    }
    return slot;
  } catch (error) {
    // openRtpViewer failed before a slot owned the runtime (a slot's own failure closed it already: stop() is idempotent).
    await cleanUp();
    throw error;
  }
}

async function sweep(host: string, config: SweepConfig): Promise<SweepStep[]> {
  const steps: SweepStep[] = [];
  const slots: SweepSlot[] = [];
  const name = sweepName(config);
  process.stdout.write(`\nsweep: ${name}; ${SWEEP_FROM}..${MAX_RUNTIMES} runtimes; loadavg ${loadavg()}\n`);
  try {
    for (let n = SWEEP_FROM; n <= MAX_RUNTIMES; n++) {
      while (slots.length < n) slots.push(await openSweepSlot(host, config, slots.length + 1));
      await sleep(SETTLE_MS);
      const r0 = await Promise.all(slots.map((v) => v.received()));
      const m0 = await Promise.all(slots.map((s) => runtimeCounters(s.runtime.url)));
      const files0 = slots.map((s) => (s.recordingDir ? segmentFiles(s.recordingDir) : new Set<string>()));
      const events0 = slots.map((s) => s.events?.all().length ?? 0);
      const s0 = slots.map((s) => snapshot(s.runtime.pid));
      const own0 = process.cpuUsage();
      const t0 = performance.now();
      await sleep(WINDOW_MS);
      const seconds = (performance.now() - t0) / 1000;
      const own = process.cpuUsage(own0);
      const s1 = slots.map((s) => snapshot(s.runtime.pid));
      const m1 = await Promise.all(slots.map((s) => runtimeCounters(s.runtime.url)));
      const r1 = await Promise.all(slots.map((v) => v.received()));
      const perRuntime: SweepRuntime[] = slots.map((slot, i) => {
        const out: SweepRuntime = {
          cpuPct: +cpuBetween(s0[i]!, s1[i]!).pct.toFixed(1),
          emittedFps: +counterRate(m0[i]!, m1[i]!, 'arclight_frames_emitted_total', seconds, 'track="main_video"').toFixed(1),
          sentFps: +counterRate(m0[i]!, m1[i]!, 'arclight_frames_sent_total', seconds, 'track="main_video"').toFixed(1),
          droppedPerSecond: +droppedRate(m0[i]!, m1[i]!, seconds).toFixed(2),
          viewerFps: +((r1[i]!.frames - r0[i]!.frames) / seconds).toFixed(1),
          viewerKbps: +(((r1[i]!.bytes - r0[i]!.bytes) * 8) / seconds / 1000).toFixed(0),
        };
        if (slot.events) {
          const segments = { live: 0, own: 0 };
          for (const e of slot.events.all().slice(events0[i]!)) if (e.type === 'recording_segment') segments[e.encoder]++;
          out.segments = segments;
        }
        if (slot.recordingDir) {
          const fresh = [...segmentFiles(slot.recordingDir)].filter((f) => !files0[i]!.has(f));
          out.samplesPerSegment = fresh.map(segmentSamples).filter((x): x is number => x !== undefined);
        }
        return out;
      });
      const why: string[] = [];
      perRuntime.forEach((p, i) => {
        if (p.droppedPerSecond > 0) why.push(`runtime ${i + 1} dropped ${p.droppedPerSecond}/s`);
        if (p.sentFps < MIN_FPS) why.push(`runtime ${i + 1} sent ${p.sentFps} fps`);
        if (p.viewerFps < MIN_FPS) why.push(`viewer ${i + 1} counted ${p.viewerFps} fps`);
        if (p.emittedFps < MIN_FPS) why.push(`model ${i + 1} emitted ${p.emittedFps} fps`);
      });
      const machineBusyPct = cpuBetween(s0[0]!, s1[0]!).machineBusyPct;
      const viewersCpuPct = ((own.user + own.system) / 1000 / (seconds * 1000)) * 100;
      const runtimesPct = perRuntime.reduce((sum, p) => sum + p.cpuPct, 0);
      const step: SweepStep = {
        sweep: name,
        config,
        runtimes: n,
        perRuntime,
        machineBusyPct: +machineBusyPct.toFixed(0),
        viewersCpuPct: +viewersCpuPct.toFixed(1),
        othersCpuPct: +(machineBusyPct * os.availableParallelism() - runtimesPct - viewersCpuPct).toFixed(0),
        loadavg: loadavg(),
        ok: why.length === 0,
        why,
      };
      steps.push(step);
      const segs = perRuntime.filter((p) => p.segments);
      const samples = perRuntime.flatMap((p) => p.samplesPerSegment ?? []);
      process.stdout.write(
        `sweep | ${n} runtime(s): ${step.ok ? 'ok' : `FAILS (${why.join('; ')})`}; machine busy ${step.machineBusyPct}%, runtimes ${runtimesPct.toFixed(0)}%, viewers (this process) ${step.viewersCpuPct}%, others ${step.othersCpuPct}% of a core; load ${step.loadavg.split(' ')[0]}\n` +
          `        per runtime CPU ${perRuntime.map((p) => p.cpuPct).join(', ')}; model fps ${perRuntime.map((p) => p.emittedFps).join(', ')}; ` +
          `sent fps ${perRuntime.map((p) => p.sentFps).join(', ')}; drops/s ${perRuntime.map((p) => p.droppedPerSecond).join(', ')}; ` +
          `viewer fps ${perRuntime.map((p) => p.viewerFps).join(', ')}; viewer kbit/s median ${median(perRuntime.map((p) => p.viewerKbps))} (${slots[0]!.codec})\n` +
          (segs.length
            ? `        recording: segments in the window live ${segs.reduce((a, p) => a + p.segments!.live, 0)}, own ${segs.reduce((a, p) => a + p.segments!.own, 0)}; ` +
              `video samples per segment median ${samples.length ? median(samples) : '-'} (min ${samples.length ? Math.min(...samples) : '-'})\n`
            : ''),
      );
      if (!step.ok) break;
    }
    return steps;
  } finally {
    for (const slot of slots) await slot.close().catch(() => {});
  }
}

/** The largest N at which every runtime held (the steps run from --sweep-from up, stopping at the first failure). */
function density(steps: readonly SweepStep[]): { held: number; note: string } {
  const passed = steps.filter((s) => s.ok).map((s) => s.runtimes);
  const held = passed.length ? Math.max(...passed) : 0;
  const last = steps.at(-1);
  const note = !last
    ? 'no step ran'
    : last.ok
      ? `all held up to --max-runtimes ${MAX_RUNTIMES}`
      : passed.length === 0 && last.runtimes > 1
        ? `fewer than ${last.runtimes} (the first step, ${last.runtimes}, failed: ${last.why.join('; ')})`
        : `${last.runtimes}: ${last.why.join('; ')}`;
  return { held, note };
}

// ---------------------------------------------------------------------------
// main
// ---------------------------------------------------------------------------

async function main(): Promise<void> {
  const info = runInfo();
  const noNamespace = networkNamespaceUnavailableReason();
  const withChromium = !args['no-chromium'] && noNamespace === null;
  process.stdout.write(
    `runtime-cpu: ${ROUNDS} rounds, ${SETTLE_MS / 1000} s settle + ${WINDOW_MS / 1000} s window per phase; viewers {${VIEWER_COUNTS.join(', ')}}; ` +
      `Chromium phases: ${withChromium ? 'yes' : `no (${args['no-chromium'] ? '--no-chromium' : noNamespace})`}; busy phases: ${args['no-busy'] ? 'no' : 'yes'}; ` +
      `sweep: ${args['no-sweep'] ? 'no' : `${SWEEP_FROM}..${MAX_RUNTIMES} runtimes, model ${SWEEP_MODEL_LIST.join(' then ')}, viewer ${SWEEP_VIEWER}, recording ${SWEEP_RECORDING_LIST.join(' then ')}`}\n${JSON.stringify(info)}\n`,
  );
  let net: TestNetwork | undefined;
  let browser: LaunchedChromium | undefined;
  let server: Server | undefined;
  const rounds: PhaseResult[][] = [];
  const steps: SweepStep[] = [];
  const started = performance.now();
  try {
    let host = '127.0.0.1';
    let chrome: ChromeSetup | undefined;
    if (withChromium) {
      net = await createTestNetwork();
      host = net.hostAddress;
      const served = await servePage(host, PAGE);
      server = served.server;
      browser = await launchChromiumInNamespace(net);
      chrome = { browser, pageUrl: served.url };
    }
    for (let i = 0; i < ROUNDS; i++) {
      const results = await patternRound(i, host, chrome);
      if (!args['no-busy']) results.push(...(await busyRound(i, host, chrome)));
      if (!args['no-recording']) results.push(...(await recordingRound(i, host)));
      rounds.push(results);
    }
    // The sweep needs no browser: close it first, so its renderer's idle CPU is not in the way.
    await browser?.close().catch(() => {});
    if (!args['no-sweep']) {
      for (const model of SWEEP_MODEL_LIST) {
        for (const recording of SWEEP_RECORDING_LIST) steps.push(...(await sweep(host, { model, viewer: SWEEP_VIEWER!, recording })));
      }
    }
  } finally {
    await browser?.close().catch(() => {});
    server?.close();
    await net?.close();
  }
  const loadavgAfter = loadavg();

  process.stdout.write(
    `\n== runtime CPU, % of one core: median over rounds (spread min–max); took ${((performance.now() - started) / 60_000).toFixed(1)} min ==\n`,
  );
  // --rounds 0: the sweep only.
  const phases = rounds[0]?.map((p) => p.phase) ?? [];
  const medians: Record<string, number> = {};
  const spread = (values: number[]): string =>
    `${median(values).toFixed(1).padStart(5)}  (${Math.min(...values).toFixed(1)}–${Math.max(...values).toFixed(1)})`;
  for (const [i, phase] of phases.entries()) {
    const rs = rounds.map((r) => r[i]!);
    const values = rs.map((r) => r.cpu.pct);
    medians[phase] = median(values);
    const main = median(rs.map((r) => r.cpu.byThread['main (JS)'] ?? 0));
    const fps = rs.flatMap((r) => Object.values(r.subscribers).map((s) => s.fps));
    const kbps = rs.flatMap((r) => Object.values(r.subscribers).map((s) => s.kbps));
    process.stdout.write(
      `${phase.padEnd(30)} ${spread(values)}   main (JS) ${main.toFixed(1)}   machine busy ${median(rs.map((r) => r.cpu.machineBusyPct)).toFixed(0)}%` +
        (fps.length ? `   subscribers: fps min ${Math.min(...fps)}, kbps median ${median(kbps)}` : '') +
        '\n',
    );
  }
  const base = medians['session, 0 subscribers'] ?? NaN;
  const perVp8 = (medians[`${VIEWER_COUNTS[0]} × VP8 (Node, shared)`] ?? NaN) - base;
  if (rounds.length) process.stdout.write(`\nper VP8 stream, pattern (1 subscriber − 0 subscribers): ${perVp8.toFixed(1)}% of a core\n`);
  const one = medians['1 × VP8 (Node, shared)'];
  const ten = medians['10 × VP8 (Node, shared)'];
  if (one !== undefined && ten !== undefined) {
    const ratios = rounds.map(
      (r) => r.find((p) => p.phase === '10 × VP8 (Node, shared)')!.cpu.pct / r.find((p) => p.phase === '1 × VP8 (Node, shared)')!.cpu.pct,
    );
    process.stdout.write(
      `10 viewers vs 1 on one session: CPU(10)/CPU(1) = ${(ten / one).toFixed(2)} (per round ${ratios.map((x) => x.toFixed(2)).join(', ')}) → ${ten / one <= 1.3 ? 'MET' : 'NOT MET'} (goal ≤ 1.3); ` +
        `over the no-subscriber baseline (10 − 0)/(1 − 0) = ${((ten - base) / (one - base)).toFixed(2)}\n`,
    );
  }
  const chromeOne = phases.find((p) => !p.startsWith('busy') && p.endsWith('(Chromium)'));
  if (chromeOne)
    process.stdout.write(
      `per ${chromeOne.split(' ')[2]} stream, pattern (Chromium − 0 subscribers): ${(medians[chromeOne]! - base).toFixed(1)}% of a core\n`,
    );
  const busyBase = medians['busy: session, 0 subscribers'];
  if (busyBase !== undefined) {
    for (const phase of phases.filter((p) => p.startsWith('busy: 1 ×'))) {
      const rs = rounds.map((r) => r.find((p) => p.phase === phase)!);
      const kbps = median(rs.flatMap((r) => Object.values(r.subscribers).map((s) => s.kbps)));
      const perStream = medians[phase]! - busyBase;
      process.stdout.write(
        `per 720p30 stream at ~2 Mbit/s, ${phase.slice(6)}: ${perStream.toFixed(1)}% of a core over the runtime's no-subscriber ${busyBase.toFixed(1)}% ` +
          `(runtime total ${medians[phase]!.toFixed(1)}%), received ${kbps} kbps → ${perStream <= 20 ? 'MET' : 'NOT MET'} (goal ≤ 20 %)\n`,
      );
    }
  }
  const recorded = medians['recording: 1 × VP8 (Node)'];
  if (recorded !== undefined && one !== undefined) {
    const extra = rounds.map(
      (r) => r.find((p) => p.phase === 'recording: 1 × VP8 (Node)')!.cpu.pct - r.find((p) => p.phase === '1 × VP8 (Node, shared)')!.cpu.pct,
    );
    process.stdout.write(
      `recording one 720p30 session (H.264 + AAC): +${(recorded - one).toFixed(1)}% of a core (runtime ${recorded.toFixed(1)}% vs ${one.toFixed(1)}% without; per round +${extra.map((x) => x.toFixed(1)).join(', +')})\n`,
    );
  }
  const sweeps = [...new Set(steps.map((s) => s.sweep))];
  const densities: Record<string, { held: number; note: string }> = {};
  for (const name of sweeps) {
    const these = steps.filter((s) => s.sweep === name);
    const d = density(these);
    densities[name] = d;
    const at = these.find((s) => s.runtimes === d.held);
    const viewer =
      these[0]!.config.viewer === 'node'
        ? 'one Node (wrtc, VP8, decoding) viewer'
        : `one ${these[0]!.config.viewer.toUpperCase()} RTP-counting viewer`;
    process.stdout.write(
      `sessions per machine, ${name} (one runtime process + session + ${viewer} each): ${d.held}` +
        ` (${d.note})` +
        (at
          ? `; at ${d.held}: runtime CPU median ${median(at.perRuntime.map((p) => p.cpuPct)).toFixed(1)}% of a core, viewers ${at.viewersCpuPct}%, machine busy ${at.machineBusyPct}%`
          : '') +
        '\n',
    );
  }
  finishReport(info, loadavgAfter, args.json, { rounds, sweep: steps, densities });
}

await runBench('runtime-cpu', main);
