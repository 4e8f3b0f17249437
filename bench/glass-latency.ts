/**
 * Emit → decoded / presented ("glass") latency of 720p30 or 1080p30 video in Chromium, per
 * latency mode.
 *
 *   node --conditions=source --import tsx bench/glass-latency.ts [--rounds 3] [--warmup 3] [--seconds 20]
 *        [--modes smooth,realtime] [--resolution 720p,1080p] [--codecs auto[,h264]] [--json out.json]
 *        [--queue-frames N] [--drop-policy block|drop-oldest|drop-newest] [--emit-fps F]   (diagnostics)
 *        [--alloc-sample]   (also: JavaScript bytes allocated per frame, sampled; see below)
 *
 * Needs root and iproute2 (a throwaway network namespace: headless Chromium gathers no loopback
 * ICE candidate, see test/support/netns.ts) and the Debian `chromium`.
 *
 * The runtime runs in this process with the `stamp` model (bench/models/stamp-model.ts): the
 * `pattern` picture at the chosen size, whose frame stamp (16 cells of 16 px, LSB first) carries
 * the frame id, and which records `performance.timeOrigin + performance.now()` when it hands each
 * frame to `emit()`. A page served by a tiny node:http server on the namespace's host address
 * loads the client library (client/browser.ts, bundled here with esbuild), connects with
 * `new ArclightClient({modelName, local: true, localRuntimeUrl})`, plays `main_video` in a
 * <video> of the frame's size, and reads the stamp of every frame twice:
 *   decoded   = a MediaStreamTrackProcessor on a clone of the track: the decoded frame reaching
 *               page script (luma read with VideoFrame.copyTo), timed on arrival;
 *   presented = video.requestVideoFrameCallback: the stamp strip drawn to a canvas, timed at
 *               performance.timeOrigin + metadata.presentationTime (handed to the compositor);
 *               metadata.receiveTime (last packet arrived) splits it.
 * Latency = reading − emitted, on the same machine clock; the two processes' clocks are compared
 * anyway (Playwright round trip, best of 30) and the offset subtracted.
 *
 * Each round measures, on fresh runtimes and pages, every --resolution × --codecs × --modes
 * (`latencyMode` of the runtime: `realtime` = playout-delay min = max = 0, `smooth` = min 0 /
 * max 200 ms; codec `auto`: what Chromium negotiates as is — H.264 since the runtime prefers it;
 * `h264`: the page also offers H.264 first via setCodecPreferences); 3 s warm-up after the first
 * presented frame, then a 20 s window. Lost = ids emitted between the first and last id seen that
 * were never seen. Encode time is the runtime's own `arclight_encode_duration_seconds` histogram
 * over the window; every encode is also recorded with its wall time and frame id
 * (`VideoEncoder.prototype.encode` is wrapped in this process; the frame's timestampUs names it),
 * so each frame's latency splits into queue (emit → encode start: the runtime's emission queue
 * and pacer), encode, and after-encode (packetize, send, network, jitter buffer, decode), and
 * the slowest frames show what dominates the tail. The diagnostic options change the stamp
 * model's track (`queueFrames`, `dropPolicy`) or the rate of its frame clock (`--emit-fps`, e.g.
 * 29.5 against the track's 30), to see how the emission queue behaves. Chromium's inbound-rtp stats and the CPU of
 * the runtime process, of our Chromium and of everything else are printed with each window.
 *
 * GC pauses are counted per window, also per minute and by kind (scavenge, mark-compact, …).
 * `--alloc-sample` runs V8's sampling heap profiler over each window (one sample per 4 KiB on
 * average, objects collected since counted too) and prints the JavaScript heap bytes this process
 * allocated per emitted frame: in all, and on the frame's way out (stacks through runtime/media/
 * or runtime/transport/, and the node:dgram continuations of their sends). It does not see
 * ArrayBuffer backing stores (Buffers' bytes), only their objects. It perturbs timing a little:
 * take latency figures from runs without it.
 */

import { execFileSync } from 'node:child_process';
import type { Server } from 'node:http';
import { readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { PerformanceObserver } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import type { Page } from 'playwright-core';
import { startRuntime, type Runtime } from '../runtime/index.ts';
import { createLogger } from '../server-kit/log.ts';
import { launchChromiumInNamespace, type LaunchedChromium } from '../test/support/chromium.ts';
import { createTestNetwork, type TestNetwork } from '../test/support/netns.ts';
import { streamEncoders, VideoEncoder } from '../runtime/media/video-encoder-factory.ts';
import type { VideoFrame } from '../runtime/media/frames.ts';
import type { DropPolicy } from '../runtime/index.ts';
import { createStampModel, emitSession, emitTimes, frameIds, stampGeometry, type StampModelOptions } from './models/stamp-model.ts';
import { loadavg, median, sleep, summarise, systemCpu, type Summary } from './support/measure.ts';
import { PREFER_H264_SCRIPT, servePage } from './support/page-server.ts';
import { parseResolutions, type Resolution } from './support/pictures.ts';
import { finishReport, runBench, runInfo } from './support/report.ts';

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    warmup: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '20' },
    /** Which latency modes to measure each round, in order. */
    modes: { type: 'string', default: 'smooth,realtime' },
    /** Frame sizes to measure each round, in order: 720p (1280x720@30) and/or 1080p (1920x1080@30). */
    resolution: { type: 'string', default: '720p,1080p' },
    /** `auto`: what the runtime negotiates with Chromium as is (H.264); `h264`: the page also offers H.264 first. */
    codecs: { type: 'string', default: 'auto' },
    json: { type: 'string' },
    'queue-frames': { type: 'string' },
    'drop-policy': { type: 'string' },
    'emit-fps': { type: 'string' },
    'alloc-sample': { type: 'boolean', default: false },
  },
});
const ALLOC_SAMPLE = args['alloc-sample'];
const MODEL_OPTIONS: StampModelOptions = {
  ...(args['queue-frames'] === undefined ? {} : { queueFrames: Number(args['queue-frames']) }),
  ...(args['drop-policy'] === undefined ? {} : { dropPolicy: args['drop-policy'] as DropPolicy }),
  ...(args['emit-fps'] === undefined ? {} : { emitFps: Number(args['emit-fps']) }),
};
const ROUNDS = Number(args.rounds);
const WARMUP_MS = Number(args.warmup) * 1000;
const WINDOW_MS = Number(args.seconds) * 1000;
type LatencyMode = 'realtime' | 'smooth';
const MODES = args.modes.split(',').map((m) => m.trim()) as LatencyMode[];
if (MODES.some((m) => m !== 'realtime' && m !== 'smooth')) throw new Error('--modes takes smooth and/or realtime');
const RESOLUTIONS = parseResolutions(args.resolution);
const CODECS = args.codecs.split(',').map((c) => c.trim()) as Array<'auto' | 'h264'>;
if (CODECS.some((c) => c !== 'auto' && c !== 'h264')) throw new Error('--codecs takes auto and/or h264');

// ---------------------------------------------------------------------------
// CPU of our Chromium and of this process's threads
// ---------------------------------------------------------------------------

const CLOCK_TICK_MS = 10; // USER_HZ = 100 on Linux

/** CPU time (ms) of every process in the namespace: our Chromium (browser, renderer, GPU/utility). */
function namespaceCpuMs(net: TestNetwork): number {
  let pids: string[] = [];
  try {
    pids = execFileSync('ip', ['netns', 'pids', net.namespace], { encoding: 'utf8' }).split('\n').filter(Boolean);
  } catch {
    return NaN;
  }
  let ticks = 0;
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(fields[11]) + Number(fields[12]); // utime, stime
    } catch {
      // exited meanwhile
    }
  }
  return ticks * CLOCK_TICK_MS;
}

/** CPU ms of this process's threads, by thread id (the main thread is the one whose id is the pid), with their names. */
function ownThreadsMs(): Map<string, { comm: string; ms: number }> {
  const out = new Map<string, { comm: string; ms: number }>();
  for (const tid of readdirSync('/proc/self/task')) {
    try {
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.set(tid, {
        comm: tid === String(process.pid) ? 'main (JS)' : comm,
        ms: (Number(fields[11]) + Number(fields[12])) * CLOCK_TICK_MS,
      });
    } catch {
      // thread ended
    }
  }
  return out;
}

/** % of one core per thread name between two `ownThreadsMs` readings (names under 0.5 % left out). */
function threadsByName(
  a: Map<string, { comm: string; ms: number }>,
  b: Map<string, { comm: string; ms: number }>,
  windowMs: number,
): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [tid, t] of b) out[t.comm] = (out[t.comm] ?? 0) + ((t.ms - (a.get(tid)?.ms ?? 0)) * 100) / windowMs;
  for (const key of Object.keys(out))
    if (out[key]! < 0.5) delete out[key];
    else out[key] = +out[key]!.toFixed(1);
  return out;
}

/** Garbage collections in this process (runtime + model + bench): every pause, with when it ended. */
const gcPauses: Array<{ end: number; ms: number; kind?: string }> = [];
/** perf_hooks' NODE_PERFORMANCE_GC_* kinds. */
const GC_KINDS: Record<number, string> = { 1: 'scavenge', 2: 'mark-compact', 4: 'incremental', 8: 'weak-callbacks' };
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    const kind = (entry as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind;
    gcPauses.push({
      end: performance.timeOrigin + entry.startTime + entry.duration,
      ms: entry.duration,
      ...(kind === undefined ? {} : { kind: GC_KINDS[kind] ?? String(kind) }),
    });
  }
}).observe({ entryTypes: ['gc'] });

// ---------------------------------------------------------------------------
// bytes allocated per frame (--alloc-sample)
// ---------------------------------------------------------------------------

interface SamplingNode {
  callFrame: { functionName: string; url: string };
  selfSize: number;
  children: SamplingNode[];
}

/** JavaScript heap bytes allocated during a window, sampled: in all, and on a frame's way out. */
interface AllocationSample {
  totalBytes: number;
  /** Stacks through runtime/media/ or runtime/transport/, or a node:dgram send's continuation. */
  mediaPathBytes: number;
  /** The media path's bytes by the file nearest the allocation (runtime/… or node:…). */
  mediaPathBySite: Record<string, number>;
}

const allocationSession = ALLOC_SAMPLE ? new (await import('node:inspector/promises')).Session() : undefined;
allocationSession?.connect();

async function startAllocationSample(): Promise<void> {
  await allocationSession?.post('HeapProfiler.startSampling', {
    samplingInterval: 4096,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  } as { samplingInterval: number });
}

async function stopAllocationSample(): Promise<AllocationSample | undefined> {
  if (!allocationSession) return undefined;
  const { profile } = (await allocationSession.post('HeapProfiler.stopSampling')) as unknown as { profile: { head: SamplingNode } };
  const out: AllocationSample = { totalBytes: 0, mediaPathBytes: 0, mediaPathBySite: {} };
  const MEDIA = /\/runtime\/(media|transport)\//;
  const SEND_CONTINUATION = /^node:(dgram|dns|internal\/dgram)/;
  const walk = (node: SamplingNode, stack: string[]): void => {
    const url = node.callFrame.url;
    const here = [...stack, url];
    if (node.selfSize > 0) {
      out.totalBytes += node.selfSize;
      const onPath = here.some((u) => MEDIA.test(u)) || here.some((u) => SEND_CONTINUATION.test(u));
      if (onPath) {
        out.mediaPathBytes += node.selfSize;
        const nearest = [...here].reverse().find((u) => MEDIA.test(u) || u.startsWith('node:')) ?? '';
        const site = nearest.replace(/^.*\/runtime\//, 'runtime/');
        out.mediaPathBySite[site] = (out.mediaPathBySite[site] ?? 0) + node.selfSize;
      }
    }
    for (const child of node.children) walk(child, here);
  };
  walk(profile.head, []);
  return out;
}

// ---------------------------------------------------------------------------
// the page
// ---------------------------------------------------------------------------

const PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><title>glass latency</title></head>
<body style="margin:0;background:#000">
<video id="v" autoplay muted playsinline></video>
<script type="module">
import { ArclightClient } from '/arclight-client.js';
let STAMP = { x: 0, y: 0 }; // set by benchStart (depends on the frame size)
const CELLS = 16, CELL = 16;
const video = document.getElementById('v');
const canvas = new OffscreenCanvas(CELLS * CELL, CELL);
const ctx = canvas.getContext('2d', { willReadFrequently: true });
const state = { presented: [], decoded: [], windowOpen: false, frames: 0, decodedFrames: 0, client: null, errors: [] };
window.__bench = state;

function lumaCells(lumaAt) {
  let id = 0, clear = true;
  for (let bit = 0; bit < CELLS; bit++) {
    const luma = lumaAt(bit * CELL + CELL / 2, CELL / 2);
    if (luma > 64 && luma < 192) clear = false;
    if (luma > 128) id |= 1 << bit;
  }
  return { id, clear };
}

function readStampFrom(source) {
  ctx.drawImage(source, STAMP.x, STAMP.y, CELLS * CELL, CELL, 0, 0, CELLS * CELL, CELL);
  const px = ctx.getImageData(0, 0, CELLS * CELL, CELL).data;
  return lumaCells((x, y) => { const i = (y * CELLS * CELL + x) * 4; return 0.299 * px[i] + 0.587 * px[i + 1] + 0.114 * px[i + 2]; });
}

// Presented: every frame the <video> hands to the compositor.
function onFrame(now, meta) {
  state.frames++;
  if (state.windowOpen) {
    const { id, clear } = readStampFrom(video);
    state.presented.push({
      id, clear,
      t: performance.timeOrigin + meta.presentationTime,
      callback: performance.timeOrigin + now,
      received: meta.receiveTime === undefined ? null : performance.timeOrigin + meta.receiveTime,
      processingMs: meta.processingDuration === undefined ? null : meta.processingDuration * 1000,
    });
  }
  video.requestVideoFrameCallback(onFrame);
}

// Decoded: every frame the decoder delivers to the track, read before any compositing.
const lumaBuffer = new Uint8Array(CELLS * CELL * CELL * 4);
async function readDecoded(track) {
  const reader = new MediaStreamTrackProcessor({ track }).readable.getReader();
  for (;;) {
    const { value: frame, done } = await reader.read();
    if (done) return;
    const t = performance.timeOrigin + performance.now();
    state.decodedFrames++;
    try {
      if (state.windowOpen) {
        let stamp;
        if (frame.format === 'I420' || frame.format === 'NV12' || frame.format === 'I420A') {
          const rect = { x: STAMP.x, y: STAMP.y, width: CELLS * CELL, height: CELL };
          const layout = await frame.copyTo(lumaBuffer, { rect });
          stamp = lumaCells((x, y) => lumaBuffer[layout[0].offset + y * layout[0].stride + x]);
        } else {
          stamp = readStampFrom(frame);
        }
        state.decoded.push({ id: stamp.id, clear: stamp.clear, t, format: frame.format });
      }
    } catch (e) {
      state.errors.push(String(e));
    } finally {
      frame.close();
    }
  }
}

// preferH264(): offer H.264 (Constrained Baseline, packetization-mode 1) first: the runtime answers in the offer's order.
${PREFER_H264_SCRIPT}
async function inboundVideo() {
  const pc = state.client?.getPeerConnection();
  if (!pc) return null;
  const report = await pc.getStats();
  let inbound = null, codec = null, pair = null;
  report.forEach((s) => {
    if (s.type === 'inbound-rtp' && s.kind === 'video') inbound = s;
    if (s.type === 'candidate-pair' && s.nominated) pair = s;
  });
  if (inbound?.codecId) codec = report.get(inbound.codecId)?.mimeType ?? null;
  const pick = (k) => (inbound && typeof inbound[k] === 'number' ? inbound[k] : null);
  return {
    codec, decoder: inbound?.decoderImplementation ?? null,
    framesReceived: pick('framesReceived'), framesDecoded: pick('framesDecoded'), framesDropped: pick('framesDropped'),
    packetsLost: pick('packetsLost'), packetsReceived: pick('packetsReceived'), nackCount: pick('nackCount'), pliCount: pick('pliCount'),
    jitterBufferDelay: pick('jitterBufferDelay'), jitterBufferTargetDelay: pick('jitterBufferTargetDelay'),
    jitterBufferMinimumDelay: pick('jitterBufferMinimumDelay'), jitterBufferEmittedCount: pick('jitterBufferEmittedCount'),
    totalDecodeTime: pick('totalDecodeTime'), totalProcessingDelay: pick('totalProcessingDelay'),
    totalAssemblyTime: pick('totalAssemblyTime'), framesAssembledFromMultiplePackets: pick('framesAssembledFromMultiplePackets'),
    bytesReceived: pick('bytesReceived'), frameWidth: pick('frameWidth'), frameHeight: pick('frameHeight'),
    rttMs: pair && typeof pair.currentRoundTripTime === 'number' ? pair.currentRoundTripTime * 1000 : null,
  };
}

window.benchStart = async (runtimeUrl, codec, geometry) => {
  STAMP = geometry.stamp;
  video.width = geometry.width;
  video.height = geometry.height;
  if (codec === 'h264') preferH264();
  const client = new ArclightClient({ modelName: 'stamp', local: true, localRuntimeUrl: runtimeUrl });
  state.client = client;
  client.on('trackReceived', (name, track) => {
    if (name !== 'main_video') return;
    video.srcObject = new MediaStream([track]);
    video.play().catch((e) => state.errors.push(String(e)));
    readDecoded(track.clone()).catch((e) => state.errors.push(String(e)));
  });
  video.requestVideoFrameCallback(onFrame);
  await client.connect();
  const sdp = client.getPeerConnection()?.remoteDescription?.sdp ?? '';
  return { playoutDelayNegotiated: sdp.includes('playout-delay') };
};
window.benchOpen = async () => {
  const s = await inboundVideo();
  state.presented = [];
  state.decoded = [];
  state.windowOpen = true;
  return s;
};
window.benchClose = async () => {
  state.windowOpen = false;
  return { presented: state.presented, decoded: state.decoded, errors: state.errors.slice(0, 10), stats: await inboundVideo() };
};
window.benchStop = () => state.client?.disconnect();
</script></body></html>`;

// ---------------------------------------------------------------------------
// clocks and encode time
// ---------------------------------------------------------------------------

/** page epoch-ms clock − this process's, from the Playwright round trip with the smallest RTT. */
async function clockOffset(page: Page): Promise<{ offsetMs: number; uncertaintyMs: number }> {
  let best = { offsetMs: 0, uncertaintyMs: Infinity };
  for (let i = 0; i < 30; i++) {
    const t0 = performance.timeOrigin + performance.now();
    const pageNow = await page.evaluate(() => performance.timeOrigin + performance.now());
    const t1 = performance.timeOrigin + performance.now();
    if ((t1 - t0) / 2 < best.uncertaintyMs) best = { offsetMs: pageNow - (t0 + t1) / 2, uncertaintyMs: (t1 - t0) / 2 };
  }
  return best;
}

interface HistogramSnapshot {
  buckets: Map<number, number>;
  sum: number;
  count: number;
}

/** The runtime's time waiting for viewers' links (arclight_send_budget_wait_seconds_total), s. */
async function sendBudgetWaitSeconds(runtime: Runtime): Promise<number> {
  return (await runtime.metrics.sendBudgetWait.get()).values.reduce((sum, v) => sum + v.value, 0);
}

async function encodeHistogram(runtime: Runtime, codec: string): Promise<HistogramSnapshot> {
  const metric = await runtime.metrics.encodeDuration.get();
  const snap: HistogramSnapshot = { buckets: new Map(), sum: 0, count: 0 };
  for (const v of metric.values) {
    const labels = v.labels as Record<string, string | number | undefined>;
    if (labels['codec'] !== codec) continue;
    if (v.metricName?.endsWith('_bucket')) snap.buckets.set(labels['le'] === '+Inf' ? Infinity : Number(labels['le']), v.value);
    else if (v.metricName?.endsWith('_sum')) snap.sum = v.value;
    else if (v.metricName?.endsWith('_count')) snap.count = v.value;
  }
  return snap;
}

/** Mean and linearly interpolated quantiles (ms) of the observations between two snapshots. */
function histogramDelta(a: HistogramSnapshot, b: HistogramSnapshot): { count: number; meanMs: number; p50Ms: number; p99Ms: number } {
  const count = b.count - a.count;
  const bounds = [...b.buckets.keys()].sort((x, y) => x - y);
  const quantile = (q: number): number => {
    let lower = 0;
    let below = 0;
    for (const le of bounds) {
      const cumulative = (b.buckets.get(le) ?? 0) - (a.buckets.get(le) ?? 0);
      if (cumulative >= q * count) {
        if (le === Infinity) return lower * 1000;
        const inBucket = cumulative - below;
        return (lower + (inBucket ? ((q * count - below) / inBucket) * (le - lower) : 0)) * 1000;
      }
      lower = le;
      below = cumulative;
    }
    return NaN;
  };
  return { count, meanMs: count ? ((b.sum - a.sum) / count) * 1000 : NaN, p50Ms: quantile(0.5), p99Ms: quantile(0.99) };
}

// ---------------------------------------------------------------------------
// one measurement
// ---------------------------------------------------------------------------

interface PresentedSample {
  id: number;
  clear: boolean;
  t: number;
  callback: number;
  received: number | null;
  processingMs: number | null;
}

interface DecodedSample {
  id: number;
  clear: boolean;
  t: number;
  format: string;
}

type InboundStats = Record<string, number | string | null>;

/** One encode, as the runtime's histogram saw it (epoch ms). */
interface EncodeSpan {
  start: number;
  end: number;
}

/** Where one frame's time went, ms: emit → encode start (queue, pacing), encode, encode end → reading. */
interface FrameSplit {
  total: number;
  queue: number;
  encode: number;
  afterEncode: number;
  /** Presented path only: encode end → last packet received, and received → presented. */
  toReceive?: number;
  receiveToPresent?: number;
}

/** Medians of each part, over all frames and over the slowest 2 % (at least 3 frames). */
interface TailSplit {
  frames: number;
  tailFrames: number;
  /** Latency of the fastest frame in the tail. */
  tailFromMs: number;
  all: Record<string, number>;
  tail: Record<string, number>;
}

/** One path (decoded or presented): latency against emit time, and frames that never showed up. */
interface PathResult {
  latencyMs: Summary;
  frames: number;
  emittedInRange: number;
  lost: number;
  unreadable: number;
  unmatched: number;
  split: TailSplit;
}

interface Measurement {
  resolution: Resolution;
  width: number;
  height: number;
  codecRequested: 'auto' | 'h264';
  latencyMode: LatencyMode;
  /** The playout-delay header extension was negotiated (it carries the latency mode). */
  playoutDelayNegotiated: boolean;
  codec: string | null;
  decoder: string | null;
  frameFormat: string | null;
  clock: { offsetMs: number; uncertaintyMs: number };
  /** requestVideoFrameCallback: `metadata.presentationTime` (handed to the compositor). */
  presented: PathResult;
  /** MediaStreamTrackProcessor: the decoded frame reaching page script, before compositing. */
  decoded: PathResult;
  emitToReceiveMs: Summary;
  receiveToPresentMs: Summary;
  decodeMs: Summary;
  encode: ReturnType<typeof histogramDelta>;
  /** Encodes per codec during the window (one codec is expected: a second one means a second encode per frame). */
  encodesByCodec: Record<string, number>;
  /** From the recorded encode spans of the window (exact, not bucketed). */
  encodeSpansMs: Summary;
  chrome: {
    jitterBufferDelayMs: number | null;
    jitterBufferTargetDelayMs: number | null;
    framesReceived: number | null;
    framesDecoded: number | null;
    framesDropped: number | null;
    packetsLost: number | null;
    nackCount: number | null;
    pliCount: number | null;
    bitrateKbps: number | null;
    rttMs: number | null;
  };
  pageErrors: string[];
  systemCpuBusyPct: number;
  /** This process (runtime + model + bench bookkeeping), % of one core. */
  runtimeProcessCpuPct: number;
  /** Of which the JS main thread (model drawing, packetizing, werift SRTP/UDP, bench bookkeeping). */
  runtimeMainThreadCpuPct: number;
  /** This process by thread name (`node` = libuv workers running the encoders, V8 helpers), % of one core. */
  runtimeThreadsPct: Record<string, number>;
  /** Our Chromium (every process in the namespace), % of one core. */
  chromiumCpuPct: number;
  /** Everything else on the machine (other users' work), % of one core. */
  othersCpuPct: number;
  /** Frames the model emitted per second during the window (30 when it keeps up). */
  emittedFps: number;
  /** ms the track's pacer took nothing because the viewer's link was behind (send-budget.ts): 0 on a clean link. */
  sendBudgetWaitMs: number;
  /** GC pauses of this process during the window, and the JS heap in use at its end. */
  gc: {
    count: number;
    totalMs: number;
    maxMs: number;
    p99Ms: number;
    heapUsedMiB: number;
    /** Pauses and their total per minute of the window. */
    perMinute: number;
    msPerMinute: number;
    byKind: Record<string, number>;
  };
  /** `--alloc-sample`: sampled JavaScript heap bytes allocated per emitted frame in the window. */
  allocatedPerFrame?: { totalBytes: number; mediaPathBytes: number; mediaPathBySite: Record<string, number> };
  /** Open file descriptors (sockets included) of this process at the window's end: a leak from earlier runtimes shows here. */
  openFds: number;
  /** `process.getActiveResourcesInfo()` by type at the window's end (timers, sockets, ...). */
  activeResources: Record<string, number>;
}

const num = (v: number | string | null | undefined): number | null => (typeof v === 'number' ? v : null);
const diff = (b: InboundStats, a: InboundStats, key: string): number | null => {
  const x = num(b[key]);
  const y = num(a[key]);
  return x === null || y === null ? null : x - y;
};

/**
 * Every encode of a stamp-model frame, by frame id (its first encode), with its wall-clock span:
 * every encoder `VideoEncoder.create` opens in this process has its `encode` wrapped. Black frames
 * the runtime makes itself carry no known timestamp and are left out.
 */
const encodeSpans = new Map<number, EncodeSpan>();
const allEncodes: EncodeSpan[] = [];
{
  /** Wraps `encode` of each encoder an opener returns. */
  const timed = <E extends { encode(frame: VideoFrame): Promise<unknown> }>(encoder: E): E => {
    const encode = encoder.encode.bind(encoder);
    encoder.encode = (frame) => {
      const start = performance.timeOrigin + performance.now();
      const id = frame.timestampUs === undefined ? undefined : frameIds.get(frame.timestampUs);
      const result = encode(frame);
      void result.then(
        () => {
          const span = { start, end: performance.timeOrigin + performance.now() };
          allEncodes.push(span);
          if (id !== undefined && !encodeSpans.has(id)) encodeSpans.set(id, span);
        },
        () => {},
      );
      return result;
    };
    return encoder;
  };
  // The runtime's streams open theirs through streamEncoders (video-encoder-factory.ts); tools through VideoEncoder.create.
  const open = streamEncoders.open;
  streamEncoders.open = async (options, backends) => timed(await open(options, backends));
  const create = VideoEncoder.create;
  VideoEncoder.create = async (options) => timed(await create(options));
}

function tailSplit(splits: readonly FrameSplit[]): TailSplit {
  const sorted = [...splits].sort((a, b) => b.total - a.total);
  const tail = sorted.slice(0, Math.max(3, Math.ceil(sorted.length * 0.02)));
  const parts = (rows: readonly FrameSplit[]): Record<string, number> => {
    const out: Record<string, number> = {};
    for (const key of ['total', 'queue', 'encode', 'afterEncode', 'toReceive', 'receiveToPresent'] as const) {
      const values = rows.map((r) => r[key]).filter((v): v is number => v !== undefined);
      if (values.length) out[key] = median(values);
    }
    return out;
  };
  return { frames: splits.length, tailFrames: tail.length, tailFromMs: tail.at(-1)?.total ?? NaN, all: parts(splits), tail: parts(tail) };
}

/** Matches a path's samples (page clock) to emit times; a frame id seen twice keeps its first sighting. */
function analysePath(
  samples: ReadonlyArray<{ id: number; clear: boolean; t: number; received?: number | null }>,
  offsetMs: number,
  onMatch?: (index: number, emitted: number) => void,
): PathResult {
  const seen = new Set<number>();
  const latency: number[] = [];
  const splits: FrameSplit[] = [];
  let unreadable = 0;
  let unmatched = 0;
  let firstId = Infinity;
  let lastId = -Infinity;
  samples.forEach((s, index) => {
    if (!s.clear) {
      unreadable++;
      return;
    }
    if (seen.has(s.id)) return;
    const emitted = emitTimes.get(s.id);
    const at = s.t - offsetMs;
    // A misread stamp names a frame from long ago or one not yet emitted.
    if (emitted === undefined || at < emitted || at - emitted > 5_000) {
      unmatched++;
      return;
    }
    seen.add(s.id);
    firstId = Math.min(firstId, s.id);
    lastId = Math.max(lastId, s.id);
    latency.push(at - emitted);
    const span = encodeSpans.get(s.id);
    if (span && span.start >= emitted && span.end <= at) {
      const split: FrameSplit = {
        total: at - emitted,
        queue: span.start - emitted,
        encode: span.end - span.start,
        afterEncode: at - span.end,
      };
      if (s.received !== undefined && s.received !== null) {
        const received = s.received - offsetMs;
        split.toReceive = received - span.end;
        split.receiveToPresent = at - received;
      }
      splits.push(split);
    }
    onMatch?.(index, emitted);
  });
  let emittedInRange = 0;
  for (let id = firstId; id <= lastId; id++) if (emitTimes.has(id)) emittedInRange++;
  return {
    latencyMs: summarise(latency),
    frames: seen.size,
    emittedInRange,
    lost: emittedInRange - seen.size,
    unreadable,
    unmatched,
    split: tailSplit(splits),
  };
}

async function measure(
  chrome: LaunchedChromium,
  net: TestNetwork,
  pageUrl: string,
  resolution: Resolution,
  codecRequested: 'auto' | 'h264',
  latencyMode: LatencyMode,
): Promise<Measurement> {
  const geometry = stampGeometry(resolution);
  const runtime = await startRuntime({
    model: createStampModel(resolution, MODEL_OPTIONS) as never,
    port: 0,
    host: net.hostAddress,
    ice: { hostAddresses: [net.hostAddress] },
    latencyMode,
    playground: false,
    logger: createLogger({ bench: 'glass-latency' }, 'warn'),
  });
  encodeSpans.clear();
  allEncodes.length = 0;
  const page = await chrome.newPage({ viewport: { width: geometry.width, height: geometry.height } });
  const pageLog: string[] = [];
  page.on('console', (m) => pageLog.push(`[${m.type()}] ${m.text()}`));
  page.on('pageerror', (e) => pageLog.push(`[pageerror] ${e.message}`));
  type BenchWindow = {
    benchStart(url: string, codec: string, g: typeof geometry): Promise<{ playoutDelayNegotiated: boolean }>;
    benchOpen(): Promise<InboundStats | null>;
    benchClose(): Promise<{ presented: PresentedSample[]; decoded: DecodedSample[]; errors: string[]; stats: InboundStats | null }>;
    benchStop(): Promise<void>;
    __bench: { frames: number; decodedFrames: number };
  };
  try {
    await page.goto(pageUrl);
    const started = await page.evaluate(([url, codec, g]) => (window as unknown as BenchWindow).benchStart(url, codec, g), [
      runtime.url,
      codecRequested,
      geometry,
    ] as const);
    const deadline = Date.now() + 20_000;
    while (
      !(await page.evaluate(
        () => (window as unknown as BenchWindow).__bench.frames > 0 && (window as unknown as BenchWindow).__bench.decodedFrames > 0,
      ))
    ) {
      if (Date.now() > deadline) throw new Error(`no video frame presented in 20 s\n${pageLog.join('\n')}`);
      await sleep(100);
    }
    await sleep(WARMUP_MS);
    const clock = await clockOffset(page);
    const encodeCodecs = ['h264', 'vp8'];
    const encode0 = await Promise.all(encodeCodecs.map((c) => encodeHistogram(runtime, c)));
    const cpu0 = systemCpu();
    const own0 = process.cpuUsage();
    const chrome0 = namespaceCpuMs(net);
    const threads0 = ownThreadsMs();
    const emitted0 = emitTimes.size;
    const spans0 = allEncodes.length;
    const gc0 = gcPauses.length;
    const budgetWait0 = await sendBudgetWaitSeconds(runtime);
    const stats0 = (await page.evaluate(() => (window as unknown as BenchWindow).benchOpen())) ?? {};
    await startAllocationSample();
    await sleep(WINDOW_MS);
    const allocated = await stopAllocationSample();
    const closed = await page.evaluate(() => (window as unknown as BenchWindow).benchClose());
    const cpu1 = systemCpu();
    const own1 = process.cpuUsage(own0);
    const chromeCpuPct = ((namespaceCpuMs(net) - chrome0) * 100) / WINDOW_MS;
    const threads1 = ownThreadsMs();
    const mainTid = String(process.pid);
    const mainThreadCpuPct = (((threads1.get(mainTid)?.ms ?? 0) - (threads0.get(mainTid)?.ms ?? 0)) * 100) / WINDOW_MS;
    const emittedFps = ((emitTimes.size - emitted0) * 1000) / WINDOW_MS;
    const encode1 = await Promise.all(encodeCodecs.map((c) => encodeHistogram(runtime, c)));
    const sendBudgetWaitMs = ((await sendBudgetWaitSeconds(runtime)) - budgetWait0) * 1000;
    const session = runtime.sessions.current?.id;
    if (!session || session !== emitSession) throw new Error("the emit-time map does not belong to this run's session");
    const systemBusyPct = (100 * (cpu1.busy - cpu0.busy)) / (cpu1.total - cpu0.total);
    const runtimeProcessCpuPct = (100 * (own1.user + own1.system)) / 1000 / WINDOW_MS;

    const toReceive: number[] = [];
    const toPresent: number[] = [];
    const decode: number[] = [];
    const presented = analysePath(closed.presented, clock.offsetMs, (index, emitted) => {
      const s = closed.presented[index]!;
      if (s.received !== null) {
        toReceive.push(s.received - clock.offsetMs - emitted);
        toPresent.push(s.t - s.received);
      }
      if (s.processingMs !== null) decode.push(s.processingMs);
    });
    const decoded = analysePath(closed.decoded, clock.offsetMs);
    const stats1 = closed.stats ?? {};
    const jbEmitted = diff(stats1, stats0, 'jitterBufferEmittedCount');
    const bytes = diff(stats1, stats0, 'bytesReceived');
    // The codec the runtime actually encoded during the window.
    const encodes = encodeCodecs.map((_, i) => histogramDelta(encode0[i]!, encode1[i]!));
    const encode = encodes.reduce((a, b) => (b.count > a.count ? b : a));
    return {
      resolution,
      width: geometry.width,
      height: geometry.height,
      codecRequested,
      latencyMode,
      playoutDelayNegotiated: started.playoutDelayNegotiated,
      codec: (stats1['codec'] as string | null) ?? null,
      decoder: (stats1['decoder'] as string | null) ?? null,
      frameFormat: closed.decoded[0]?.format ?? null,
      clock,
      presented,
      decoded,
      emitToReceiveMs: summarise(toReceive),
      receiveToPresentMs: summarise(toPresent),
      decodeMs: summarise(decode),
      encode,
      encodesByCodec: Object.fromEntries(encodeCodecs.map((c, i) => [c, encodes[i]!.count])),
      encodeSpansMs: summarise(allEncodes.slice(spans0).map((s) => s.end - s.start)),
      chrome: {
        jitterBufferDelayMs: jbEmitted ? ((diff(stats1, stats0, 'jitterBufferDelay') ?? NaN) / jbEmitted) * 1000 : null,
        jitterBufferTargetDelayMs: jbEmitted ? ((diff(stats1, stats0, 'jitterBufferTargetDelay') ?? NaN) / jbEmitted) * 1000 : null,
        framesReceived: diff(stats1, stats0, 'framesReceived'),
        framesDecoded: diff(stats1, stats0, 'framesDecoded'),
        framesDropped: diff(stats1, stats0, 'framesDropped'),
        packetsLost: diff(stats1, stats0, 'packetsLost'),
        nackCount: diff(stats1, stats0, 'nackCount'),
        pliCount: diff(stats1, stats0, 'pliCount'),
        bitrateKbps: bytes === null ? null : (bytes * 8) / (WINDOW_MS / 1000) / 1000,
        rttMs: num(stats1['rttMs']),
      },
      pageErrors: [...closed.errors, ...pageLog.filter((l) => l.startsWith('[pageerror]') || l.startsWith('[error]')).slice(0, 10)],
      systemCpuBusyPct: systemBusyPct,
      runtimeProcessCpuPct,
      runtimeMainThreadCpuPct: mainThreadCpuPct,
      runtimeThreadsPct: threadsByName(threads0, threads1, WINDOW_MS),
      chromiumCpuPct: chromeCpuPct,
      othersCpuPct: systemBusyPct * os.availableParallelism() - runtimeProcessCpuPct - chromeCpuPct,
      emittedFps,
      sendBudgetWaitMs,
      gc: (() => {
        const pauses = gcPauses.slice(gc0).map((g) => g.ms);
        const byKind: Record<string, number> = {};
        for (const g of gcPauses.slice(gc0)) byKind[g.kind ?? '?'] = (byKind[g.kind ?? '?'] ?? 0) + 1;
        const totalMs = pauses.reduce((a, b) => a + b, 0);
        return {
          count: pauses.length,
          totalMs,
          maxMs: pauses.length ? Math.max(...pauses) : 0,
          p99Ms: summarise(pauses).p99,
          heapUsedMiB: process.memoryUsage().heapUsed / 2 ** 20,
          perMinute: (pauses.length * 60_000) / WINDOW_MS,
          msPerMinute: (totalMs * 60_000) / WINDOW_MS,
          byKind,
        };
      })(),
      ...(allocated === undefined
        ? {}
        : (() => {
            const frames = Math.max(1, emitTimes.size - emitted0);
            const perFrame = (bytes: number): number => Math.round(bytes / frames);
            return {
              allocatedPerFrame: {
                totalBytes: perFrame(allocated.totalBytes),
                mediaPathBytes: perFrame(allocated.mediaPathBytes),
                mediaPathBySite: Object.fromEntries(
                  Object.entries(allocated.mediaPathBySite)
                    .sort((a, b) => b[1] - a[1])
                    .map(([site, bytes]) => [site, perFrame(bytes)]),
                ),
              },
            };
          })()),
      openFds: readdirSync('/proc/self/fd').length,
      activeResources: process
        .getActiveResourcesInfo()
        .reduce<Record<string, number>>((out, type) => ({ ...out, [type]: (out[type] ?? 0) + 1 }), {}),
    };
  } finally {
    await page.evaluate(() => (window as unknown as BenchWindow).benchStop()).catch(() => {});
    await page
      .context()
      .close()
      .catch(() => {});
    await runtime.close();
  }
}

// ---------------------------------------------------------------------------
// main
// ---------------------------------------------------------------------------

const f = (x: number | null | undefined, digits = 1): string =>
  x === null || x === undefined || Number.isNaN(x) ? '–' : x.toFixed(digits);

const splitText = (parts: Record<string, number>): string =>
  `queue ${f(parts['queue'])} + encode ${f(parts['encode'])} + after-encode ${f(parts['afterEncode'])}` +
  (parts['toReceive'] === undefined ? '' : ` (to received ${f(parts['toReceive'])}, received→presented ${f(parts['receiveToPresent'])})`);

function report(m: Measurement, label: string): void {
  const path = (name: string, p: PathResult): string =>
    `  emit→${name} ms: p50 ${f(p.latencyMs.p50)}  p90 ${f(p.latencyMs.p90)}  p99 ${f(p.latencyMs.p99)}  max ${f(p.latencyMs.max)}  mean ${f(p.latencyMs.mean)}` +
    `  | frames ${p.frames} of ${p.emittedInRange} emitted in range, lost ${p.lost}, unreadable ${p.unreadable}, unmatched ${p.unmatched}\n` +
    `    split, median of all ${p.split.frames}: ${splitText(p.split.all)}; slowest ${p.split.tailFrames} (≥ ${f(p.split.tailFromMs)} ms): ${splitText(p.split.tail)}\n`;
  process.stdout.write(
    `${label} ${m.resolution} codec=${m.codec} (asked: ${m.codecRequested}) latencyMode=${m.latencyMode} (playout-delay negotiated: ${m.playoutDelayNegotiated}) decoder=${m.decoder} frames=${m.frameFormat}\n` +
      path('decoded  ', m.decoded) +
      path('presented', m.presented) +
      `  presented split p50: emit→received ${f(m.emitToReceiveMs.p50)}, received→presented ${f(m.receiveToPresentMs.p50)} (decode ${f(m.decodeMs.p50)}); ` +
      `runtime encode mean ${f(m.encode.meanMs, 2)} ms (p50 ${f(m.encodeSpansMs.p50, 2)}, p99 ${f(m.encodeSpansMs.p99, 2)}, max ${f(m.encodeSpansMs.max, 1)}, n=${m.encode.count}; encodes by codec ${JSON.stringify(m.encodesByCodec)})\n` +
      `  chrome: jitter-buffer delay ${f(m.chrome.jitterBufferDelayMs)} ms (target ${f(m.chrome.jitterBufferTargetDelayMs)}), received ${m.chrome.framesReceived}, decoded ${m.chrome.framesDecoded}, ` +
      `dropped ${m.chrome.framesDropped}, packets lost ${m.chrome.packetsLost}, NACK ${m.chrome.nackCount}, PLI ${m.chrome.pliCount}, ${f(m.chrome.bitrateKbps, 0)} kbps\n` +
      `  clock offset page−node ${f(m.clock.offsetMs, 2)} ± ${f(m.clock.uncertaintyMs, 2)} ms; machine CPU busy ${f(m.systemCpuBusyPct, 0)}%, ` +
      `runtime process ${f(m.runtimeProcessCpuPct, 0)}% (${JSON.stringify(m.runtimeThreadsPct)}), chromium ${f(m.chromiumCpuPct, 0)}%, others ${f(m.othersCpuPct, 0)}% (of one core); model emitted ${f(m.emittedFps)} fps; ` +
      `waited ${f(m.sendBudgetWaitMs, 0)} ms for the send budget\n` +
      `  GC in this process: ${m.gc.count} pauses, ${f(m.gc.totalMs, 0)} ms in all, max ${f(m.gc.maxMs)} ms; heap in use ${f(m.gc.heapUsedMiB, 0)} MiB; ${m.openFds} open fds; active ${JSON.stringify(m.activeResources)}` +
      `\n  GC per minute: ${f(m.gc.perMinute)} pauses, ${f(m.gc.msPerMinute)} ms; by kind ${JSON.stringify(m.gc.byKind)}` +
      (m.allocatedPerFrame
        ? `\n  JS heap allocated per emitted frame (sampled): ${m.allocatedPerFrame.totalBytes} B in all, ${m.allocatedPerFrame.mediaPathBytes} B on the way out ${JSON.stringify(m.allocatedPerFrame.mediaPathBySite)}`
        : '') +
      (m.pageErrors.length ? `\n  page errors: ${m.pageErrors.join(' | ')}` : '') +
      '\n',
  );
}

/** Issue 3 goals (720p30, Chromium), ms. */
const GOALS: Record<LatencyMode, { p50: number; p99?: number }> = {
  realtime: { p50: 10, p99: 25 },
  smooth: { p50: 30 },
};

async function main(): Promise<void> {
  const info = runInfo();
  process.stdout.write(
    `glass-latency: ${ROUNDS} rounds × resolution {${RESOLUTIONS.join(', ')}} × codecs {${CODECS.join(', ')}} × latencyMode {${MODES.join(', ')}}, ` +
      `${WARMUP_MS / 1000} s warm-up + ${WINDOW_MS / 1000} s window` +
      `${Object.keys(MODEL_OPTIONS).length ? `; stamp model ${JSON.stringify(MODEL_OPTIONS)}` : ''}\n${JSON.stringify(info)}\n`,
  );
  const net = await createTestNetwork();
  let chrome: LaunchedChromium | undefined;
  let server: Server | undefined;
  const results: Measurement[] = [];
  let relaunches = 0;
  try {
    const served = await servePage(net.hostAddress, PAGE);
    server = served.server;
    chrome = await launchChromiumInNamespace(net);
    for (let round = 0; round < ROUNDS; round++) {
      for (const resolution of RESOLUTIONS) {
        for (const codec of CODECS) {
          for (const mode of MODES) {
            let m: Measurement;
            try {
              m = await measure(chrome, net, served.url, resolution, codec, mode);
            } catch (error) {
              // Chromium gone (crashed, or killed from outside — the machine is shared): start a
              // fresh one and measure this configuration again, once.
              if (chrome.browser.isConnected()) throw error;
              process.stdout.write(`  Chromium went away (${(error as Error).message.split('\n')[0]}); relaunching and measuring again\n`);
              await chrome.close().catch(() => {});
              chrome = await launchChromiumInNamespace(net);
              relaunches++;
              m = await measure(chrome, net, served.url, resolution, codec, mode);
            }
            results.push(m);
            report(m, `round ${round + 1}`);
          }
        }
      }
    }
  } finally {
    await chrome?.close().catch(() => {});
    server?.close();
    await net.close();
  }
  const loadavgAfter = loadavg();
  process.stdout.write('\n== summary: median over rounds (spread min–max), ms ==\n');
  const line = (values: number[]): string => `${f(median(values))} (${f(Math.min(...values))}–${f(Math.max(...values))})`;
  const goals: string[] = [];
  for (const resolution of RESOLUTIONS) {
    for (const codec of CODECS) {
      const medians: Partial<Record<LatencyMode, { decoded: number; presented: number }>> = {};
      for (const mode of MODES) {
        const rs = results.filter((r) => r.resolution === resolution && r.codecRequested === codec && r.latencyMode === mode);
        const p50 = {
          decoded: median(rs.map((r) => r.decoded.latencyMs.p50)),
          presented: median(rs.map((r) => r.presented.latencyMs.p50)),
        };
        const p99 = {
          decoded: median(rs.map((r) => r.decoded.latencyMs.p99)),
          presented: median(rs.map((r) => r.presented.latencyMs.p99)),
        };
        medians[mode] = p50;
        const tail = (pick: (r: Measurement) => PathResult): string =>
          `all ${splitText(medianParts(rs.map((r) => pick(r).split.all)))}; slowest 2 %: ${splitText(medianParts(rs.map((r) => pick(r).split.tail)))}`;
        process.stdout.write(
          `${resolution} codec ${codec} (${[...new Set(rs.map((r) => r.codec))].join('/')}), latencyMode=${mode}:\n` +
            `  decoded   p50 ${line(rs.map((r) => r.decoded.latencyMs.p50))}  p90 ${line(rs.map((r) => r.decoded.latencyMs.p90))}  p99 ${line(rs.map((r) => r.decoded.latencyMs.p99))}  lost ${rs.map((r) => `${r.decoded.lost}/${r.decoded.emittedInRange}`).join(', ')}\n` +
            `    split: ${tail((r) => r.decoded)}\n` +
            `  presented p50 ${line(rs.map((r) => r.presented.latencyMs.p50))}  p90 ${line(rs.map((r) => r.presented.latencyMs.p90))}  p99 ${line(rs.map((r) => r.presented.latencyMs.p99))}  lost ${rs.map((r) => `${r.presented.lost}/${r.presented.emittedInRange}`).join(', ')}\n` +
            `    split: ${tail((r) => r.presented)}\n` +
            `  encode mean ${line(rs.map((r) => r.encode.meanMs))}, p99 ${line(rs.map((r) => r.encodeSpansMs.p99))}; jitter buffer ${line(rs.map((r) => r.chrome.jitterBufferDelayMs ?? NaN))}; ` +
            `${line(rs.map((r) => r.chrome.bitrateKbps ?? NaN))} kbps; machine busy ${line(rs.map((r) => r.systemCpuBusyPct))}%, others ${line(rs.map((r) => r.othersCpuPct))}% of a core\n`,
        );
        process.stdout.write(
          `  GC per minute: ${line(rs.map((r) => r.gc.perMinute))} pauses, ${line(rs.map((r) => r.gc.msPerMinute))} ms; max pause ${line(rs.map((r) => r.gc.maxMs))} ms\n` +
            (rs.every((r) => r.allocatedPerFrame)
              ? `  JS heap allocated per frame (sampled), bytes: ${line(rs.map((r) => r.allocatedPerFrame!.totalBytes))} in all, ${line(rs.map((r) => r.allocatedPerFrame!.mediaPathBytes))} on the way out\n`
              : ''),
        );
        const goal = GOALS[mode];
        const verdict = (p: 'decoded' | 'presented'): string => {
          const ok = p50[p] <= goal.p50 && (goal.p99 === undefined || p99[p] <= goal.p99);
          return `${p} p50 ${f(p50[p])}${goal.p99 === undefined ? '' : `, p99 ${f(p99[p])}`} → ${ok ? 'MET' : 'NOT MET'}`;
        };
        goals.push(
          `${resolution} ${codec} ${mode} (goal at 720p30: p50 ≤ ${goal.p50}${goal.p99 === undefined ? '' : `, p99 ≤ ${goal.p99}`} ms)${resolution === '720p' ? '' : ' [for reference]'}: ${verdict('decoded')}; ${verdict('presented')}`,
        );
      }
      const smooth = medians.smooth;
      const realtime = medians.realtime;
      if (smooth && realtime) {
        process.stdout.write(
          `  ratio p50 smooth / realtime (${resolution}, codec ${codec}): decoded ${(smooth.decoded / realtime.decoded).toFixed(2)}, presented ${(smooth.presented / realtime.presented).toFixed(2)}\n`,
        );
      }
    }
  }
  process.stdout.write(`\n== goals ==\n${goals.join('\n')}\n`);
  if (relaunches) process.stdout.write(`Chromium was relaunched ${relaunches} time(s) during the run\n`);
  finishReport(info, loadavgAfter, args.json, { modelOptions: MODEL_OPTIONS, chromiumRelaunches: relaunches, results });
}

/** Per part, the median over rounds of the per-round medians. */
function medianParts(rows: ReadonlyArray<Record<string, number>>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const key of new Set(rows.flatMap((r) => Object.keys(r)))) {
    const values = rows.map((r) => r[key]).filter((v): v is number => v !== undefined);
    if (values.length) out[key] = median(values);
  }
  return out;
}

await runBench('glass-latency', main);
