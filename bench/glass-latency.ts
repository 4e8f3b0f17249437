/**
 * Emit → decoded ("glass") latency at 720p30 in Chromium.
 *
 *   node --conditions=source --import tsx bench/glass-latency.ts [--rounds 3] [--warmup 3] [--seconds 20]
 *        [--modes false,true] [--codecs auto,h264] [--json out.json]
 *
 * Needs root and iproute2 (a throwaway network namespace: headless Chromium gathers no loopback
 * ICE candidate, see test/support/netns.ts) and the Debian `chromium`.
 *
 * The runtime runs in this process with the `stamp` model (bench/models/stamp-model.ts): the
 * `pattern` picture, whose frame stamp (16 cells, LSB first) carries the frame id, and which
 * records `performance.timeOrigin + performance.now()` when it hands each frame to `emit()`.
 * A page served by a tiny node:http server on the namespace's host address loads the client
 * library (client/browser.ts, bundled here with esbuild), connects with
 * `new ArclightClient({modelName, local: true, localRuntimeUrl})`, plays `main_video` in a
 * <video>, and reads the stamp of every frame twice:
 *   decoded   = a MediaStreamTrackProcessor on a clone of the track: the decoded frame reaching
 *               page script (luma read with VideoFrame.copyTo), timed on arrival;
 *   presented = video.requestVideoFrameCallback: the stamp strip drawn to a canvas, timed at
 *               performance.timeOrigin + metadata.presentationTime (handed to the compositor);
 *               metadata.receiveTime (last packet arrived) splits it.
 * Latency = reading − emitted, on the same machine clock; the two processes' clocks are compared
 * anyway (Playwright round trip, best of 30) and the offset subtracted.
 *
 * Each round measures, on fresh runtimes and pages, every codec in --codecs (`auto`: what
 * Chromium negotiates as is; `h264`: the page offers H.264 first via setCodecPreferences) with
 * every --modes value of `playoutDelay`; 3 s warm-up after the first presented frame, then a 20 s
 * window. Lost = ids emitted between the first and last id seen that were never seen. Encode time
 * is the runtime's own `arclight_encode_duration_seconds` histogram over the window; Chromium's
 * inbound-rtp stats and the CPU of the runtime process, of our Chromium and of everything else
 * are printed with each window.
 */

import { execFileSync } from 'node:child_process';
import type { Server } from 'node:http';
import { readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { parseArgs } from 'node:util';
import type { Page } from 'playwright-core';
import { startRuntime, type Runtime } from '../runtime/index.ts';
import { createLogger } from '../runtime/log.ts';
import { launchChromiumInNamespace, type LaunchedChromium } from '../test/support/chromium.ts';
import { createTestNetwork, type TestNetwork } from '../test/support/netns.ts';
import stampModel, { emitSession, emitTimes, STAMP } from './models/stamp-model.ts';
import { loadavg, median, sleep, summarise, systemCpu, type Summary } from './support/measure.ts';
import { PREFER_H264_SCRIPT, servePage } from './support/page-server.ts';
import { finishReport, runBench, runInfo } from './support/report.ts';

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    warmup: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '20' },
    /** Which playoutDelay settings to measure each round, in order. */
    modes: { type: 'string', default: 'false,true' },
    /** `auto`: what the runtime negotiates with Chromium as is; `h264`: the page offers H.264 first. */
    codecs: { type: 'string', default: 'auto,h264' },
    json: { type: 'string' },
  },
});
const ROUNDS = Number(args.rounds);
const WARMUP_MS = Number(args.warmup) * 1000;
const WINDOW_MS = Number(args.seconds) * 1000;
const MODES = args.modes.split(',').map((m) => m.trim() === 'true');
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

/** CPU ms of this process's threads, by thread id (the main thread is the one whose id is the pid). */
function ownThreadsMs(): Map<string, number> {
  const out = new Map<string, number>();
  for (const tid of readdirSync('/proc/self/task')) {
    try {
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.set(tid, (Number(fields[11]) + Number(fields[12])) * CLOCK_TICK_MS);
    } catch {
      // thread ended
    }
  }
  return out;
}

// ---------------------------------------------------------------------------
// the page
// ---------------------------------------------------------------------------

const PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><title>glass latency</title></head>
<body style="margin:0;background:#000">
<video id="v" autoplay muted playsinline width="1280" height="720"></video>
<script type="module">
import { ArclightClient } from '/arclight-client.js';
const STAMP = ${JSON.stringify(STAMP)};
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

window.benchStart = async (runtimeUrl, codec) => {
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

/** One path (decoded or presented): latency against emit time, and frames that never showed up. */
interface PathResult {
  latencyMs: Summary;
  frames: number;
  emittedInRange: number;
  lost: number;
  unreadable: number;
  unmatched: number;
}

interface Measurement {
  codecRequested: 'auto' | 'h264';
  playoutDelay: boolean;
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
  /** Our Chromium (every process in the namespace), % of one core. */
  chromiumCpuPct: number;
  /** Everything else on the machine (other users' work), % of one core. */
  othersCpuPct: number;
  /** Frames the model emitted per second during the window (30 when it keeps up). */
  emittedFps: number;
}

const num = (v: number | string | null | undefined): number | null => (typeof v === 'number' ? v : null);
const diff = (b: InboundStats, a: InboundStats, key: string): number | null => {
  const x = num(b[key]);
  const y = num(a[key]);
  return x === null || y === null ? null : x - y;
};

/** Matches a path's samples (page clock) to emit times; a frame id seen twice keeps its first sighting. */
function analysePath(samples: ReadonlyArray<{ id: number; clear: boolean; t: number }>, offsetMs: number, onMatch?: (index: number, emitted: number) => void): PathResult {
  const seen = new Set<number>();
  const latency: number[] = [];
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
    onMatch?.(index, emitted);
  });
  let emittedInRange = 0;
  for (let id = firstId; id <= lastId; id++) if (emitTimes.has(id)) emittedInRange++;
  return { latencyMs: summarise(latency), frames: seen.size, emittedInRange, lost: emittedInRange - seen.size, unreadable, unmatched };
}

async function measure(chrome: LaunchedChromium, net: TestNetwork, pageUrl: string, codecRequested: 'auto' | 'h264', playoutDelay: boolean): Promise<Measurement> {
  const runtime = await startRuntime({
    model: stampModel as never,
    port: 0,
    host: net.hostAddress,
    ice: { hostAddresses: [net.hostAddress] },
    latencyMode: playoutDelay ? 'realtime' : 'smooth',
    playground: false,
    logger: createLogger({ bench: 'glass-latency' }, 'warn'),
  });
  const page = await chrome.newPage({ viewport: { width: 1280, height: 720 } });
  const pageLog: string[] = [];
  page.on('console', (m) => pageLog.push(`[${m.type()}] ${m.text()}`));
  page.on('pageerror', (e) => pageLog.push(`[pageerror] ${e.message}`));
  type BenchWindow = {
    benchStart(url: string, codec: string): Promise<{ playoutDelayNegotiated: boolean }>;
    benchOpen(): Promise<InboundStats | null>;
    benchClose(): Promise<{ presented: PresentedSample[]; decoded: DecodedSample[]; errors: string[]; stats: InboundStats | null }>;
    benchStop(): Promise<void>;
    __bench: { frames: number; decodedFrames: number };
  };
  try {
    await page.goto(pageUrl);
    const started = await page.evaluate(([url, codec]) => (window as unknown as BenchWindow).benchStart(url, codec), [runtime.url, codecRequested] as const);
    const deadline = Date.now() + 20_000;
    while (!(await page.evaluate(() => (window as unknown as BenchWindow).__bench.frames > 0 && (window as unknown as BenchWindow).__bench.decodedFrames > 0))) {
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
    const stats0 = (await page.evaluate(() => (window as unknown as BenchWindow).benchOpen())) ?? {};
    await sleep(WINDOW_MS);
    const closed = await page.evaluate(() => (window as unknown as BenchWindow).benchClose());
    const cpu1 = systemCpu();
    const own1 = process.cpuUsage(own0);
    const chromeCpuPct = ((namespaceCpuMs(net) - chrome0) * 100) / WINDOW_MS;
    const threads1 = ownThreadsMs();
    const mainTid = String(process.pid);
    const mainThreadCpuPct = (((threads1.get(mainTid) ?? 0) - (threads0.get(mainTid) ?? 0)) * 100) / WINDOW_MS;
    const emittedFps = ((emitTimes.size - emitted0) * 1000) / WINDOW_MS;
    const encode1 = await Promise.all(encodeCodecs.map((c) => encodeHistogram(runtime, c)));
    const session = runtime.sessions.current?.id;
    if (!session || session !== emitSession) throw new Error('the emit-time map does not belong to this run\'s session');
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
      codecRequested,
      playoutDelay,
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
      chromiumCpuPct: chromeCpuPct,
      othersCpuPct: (systemBusyPct * os.availableParallelism()) - runtimeProcessCpuPct - chromeCpuPct,
      emittedFps,
    };
  } finally {
    await page.evaluate(() => (window as unknown as BenchWindow).benchStop()).catch(() => {});
    await page.context().close().catch(() => {});
    await runtime.close();
  }
}

// ---------------------------------------------------------------------------
// main
// ---------------------------------------------------------------------------

const f = (x: number | null | undefined, digits = 1): string => (x === null || x === undefined || Number.isNaN(x) ? '–' : x.toFixed(digits));

function report(m: Measurement, label: string): void {
  const path = (name: string, p: PathResult): string =>
    `  emit→${name} ms: p50 ${f(p.latencyMs.p50)}  p90 ${f(p.latencyMs.p90)}  p99 ${f(p.latencyMs.p99)}  max ${f(p.latencyMs.max)}  mean ${f(p.latencyMs.mean)}` +
    `  | frames ${p.frames} of ${p.emittedInRange} emitted in range, lost ${p.lost}, unreadable ${p.unreadable}, unmatched ${p.unmatched}\n`;
  process.stdout.write(
    `${label} codec=${m.codec} (asked: ${m.codecRequested}) playoutDelay=${m.playoutDelay} (negotiated: ${m.playoutDelayNegotiated}) decoder=${m.decoder} frames=${m.frameFormat}\n` +
      path('decoded  ', m.decoded) +
      path('presented', m.presented) +
      `  presented split p50: emit→received ${f(m.emitToReceiveMs.p50)}, received→presented ${f(m.receiveToPresentMs.p50)} (decode ${f(m.decodeMs.p50)}); ` +
      `runtime encode mean ${f(m.encode.meanMs, 2)} ms (p50≈${f(m.encode.p50Ms, 2)}, p99≈${f(m.encode.p99Ms, 2)}, n=${m.encode.count})\n` +
      `  chrome: jitter-buffer delay ${f(m.chrome.jitterBufferDelayMs)} ms (target ${f(m.chrome.jitterBufferTargetDelayMs)}), received ${m.chrome.framesReceived}, decoded ${m.chrome.framesDecoded}, ` +
      `dropped ${m.chrome.framesDropped}, packets lost ${m.chrome.packetsLost}, NACK ${m.chrome.nackCount}, PLI ${m.chrome.pliCount}, ${f(m.chrome.bitrateKbps, 0)} kbps\n` +
      `  clock offset page−node ${f(m.clock.offsetMs, 2)} ± ${f(m.clock.uncertaintyMs, 2)} ms; machine CPU busy ${f(m.systemCpuBusyPct, 0)}%, ` +
      `runtime process ${f(m.runtimeProcessCpuPct, 0)}% (main thread ${f(m.runtimeMainThreadCpuPct, 0)}%), chromium ${f(m.chromiumCpuPct, 0)}%, others ${f(m.othersCpuPct, 0)}% (of one core); model emitted ${f(m.emittedFps)} fps` +
      (m.pageErrors.length ? `\n  page errors: ${m.pageErrors.join(' | ')}` : '') +
      '\n',
  );
}

async function main(): Promise<void> {
  const info = runInfo();
  process.stdout.write(
    `glass-latency: ${ROUNDS} rounds × codecs {${CODECS.join(', ')}} × playoutDelay {${MODES.join(', ')}}, ${WARMUP_MS / 1000} s warm-up + ${WINDOW_MS / 1000} s window\n${JSON.stringify(info)}\n`,
  );
  const net = await createTestNetwork();
  let chrome: LaunchedChromium | undefined;
  let server: Server | undefined;
  const results: Measurement[] = [];
  try {
    const served = await servePage(net.hostAddress, PAGE);
    server = served.server;
    chrome = await launchChromiumInNamespace(net);
    for (let round = 0; round < ROUNDS; round++) {
      for (const codec of CODECS) {
        for (const playoutDelay of MODES) {
          const m = await measure(chrome, net, served.url, codec, playoutDelay);
          results.push(m);
          report(m, `round ${round + 1}`);
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
  const medians: Record<string, { decoded: number; presented: number }> = {};
  for (const codec of CODECS) {
    for (const pd of MODES) {
      const rs = results.filter((r) => r.codecRequested === codec && r.playoutDelay === pd);
      const key = `${codec}/${pd}`;
      medians[key] = { decoded: median(rs.map((r) => r.decoded.latencyMs.p50)), presented: median(rs.map((r) => r.presented.latencyMs.p50)) };
      process.stdout.write(
        `codec ${codec} (${[...new Set(rs.map((r) => r.codec))].join('/')}), playoutDelay=${pd}:\n` +
          `  decoded   p50 ${line(rs.map((r) => r.decoded.latencyMs.p50))}  p90 ${line(rs.map((r) => r.decoded.latencyMs.p90))}  p99 ${line(rs.map((r) => r.decoded.latencyMs.p99))}  lost ${rs.map((r) => `${r.decoded.lost}/${r.decoded.emittedInRange}`).join(', ')}\n` +
          `  presented p50 ${line(rs.map((r) => r.presented.latencyMs.p50))}  p90 ${line(rs.map((r) => r.presented.latencyMs.p90))}  p99 ${line(rs.map((r) => r.presented.latencyMs.p99))}  lost ${rs.map((r) => `${r.presented.lost}/${r.presented.emittedInRange}`).join(', ')}\n` +
          `  encode mean ${line(rs.map((r) => r.encode.meanMs))}; jitter buffer ${line(rs.map((r) => r.chrome.jitterBufferDelayMs ?? NaN))}; machine busy ${line(rs.map((r) => r.systemCpuBusyPct))}%, others ${line(rs.map((r) => r.othersCpuPct))}% of a core\n`,
      );
    }
    const off = medians[`${codec}/false`];
    const on = medians[`${codec}/true`];
    if (off && on) {
      process.stdout.write(
        `  ratio p50 playoutDelay false/true (codec ${codec}): decoded ${(off.decoded / on.decoded).toFixed(2)}, presented ${(off.presented / on.presented).toFixed(2)}\n` +
          `  target emit→decoded p50 ≤ 30 ms (codec ${codec}): default ${off.decoded <= 30 ? 'MET' : 'NOT MET'} (decoded ${f(off.decoded)}, presented ${f(off.presented)}); ` +
          `playoutDelay ${on.decoded <= 30 ? 'MET' : 'NOT MET'} (decoded ${f(on.decoded)}, presented ${f(on.presented)})\n`,
      );
    }
  }
  finishReport(info, loadavgAfter, args.json, { results });
}

await runBench('glass-latency', main);
