/**
 * What recording a session costs the runtime (issue 26 part 2), on content an encoder cannot
 * skip: the `busy` models (fresh noise every frame) at 720p30 and 1080p30, and `pattern` (nearly
 * static) for comparison.
 *
 *   node --conditions=source --import tsx bench/recording-cost.ts [--rounds 4] [--seconds 10] [--settle 3]
 *        [--loads busy-720p,busy-1080p,pattern-720p] [--modes off,shared,own] [--chromium] [--no-runtime]
 *        [--no-encoders] [--encoder-rounds 3] [--encoder-frames 300] [--json out.json]
 *
 * Part 1, the runtime. Per round and load, one fresh runtime (the real CLI in a child process,
 * bench/support/child-runtime.ts) per mode in --modes, one after the other, the order rotated
 * every round (round 1 off, shared, own; round 2 shared, own, off; ...) so none always runs first
 * or last:
 *   off      `--no-recording`
 *   shared   recording, the CLI's default (`--recording-encoder shared`): the recorder takes the
 *            live H.264 stream's encoded frames when the track sends one (issue 26 part 2), and
 *            encodes itself (H.264 High) while none runs — the VP8-only phase below
 *   own      `--recording-encoder own`: the recorder always encodes itself (H.264 High, the
 *            track's bitrate, a keyframe every 2 s): the second encode every recording had before
 * Recordings go to 2 s fMP4 segments in a fresh folder, removed after. Each runtime is measured in
 * phases of --settle + --seconds:
 *   0 viewers            one Node client connected, main_video paused: the model draws, nothing
 *                        is encoded — nor recorded (the recorder sees only frames that are sent)
 *   1 × VP8 (Node)       that client receives main_video (wrtc offers no H.264, so the live
 *                        stream is VP8: no live H.264 to share, so `shared` encodes as `own` does)
 *   1 × H.264 (Chromium) with --chromium (root + iproute2): the Node client paused, a Chromium
 *                        page in a network namespace receives main_video as H.264 (Constrained
 *                        Baseline) instead: `shared` records that stream's frames, `own` encodes
 * CPU is the runtime process's utime + stime from /proc/<pid>/stat over the window (every thread),
 * split by thread name from /proc/<pid>/task/*\/stat; the live encoder's time per frame comes from
 * the runtime's /metrics (`arclight_encode_duration_seconds`; the recorder's encoder is not in
 * it); what the recording writes is the growth of its folder over the window; which encoder made
 * each segment written in the window (`live` or `own`) comes from the runtime's /events
 * (`recording_segment`). Per round, the figures are each mode minus `off` for the same phase, and
 * mode / off.
 *
 * Part 2, the encoders alone (in this process, no runtime): the same pictures drawn as the models
 * draw them, encoded frame by frame as the runtime's encoders are configured — the recorder's
 * (H.264 High on the thread pool, a keyframe every 2 s), the live VP8 and the live H.264
 * (Constrained Baseline, keyframes only when asked: here the first) — CPU per frame from
 * process.cpuUsage() around each encode (every thread of this process, x264's slice threads
 * included), bytes per second and keyframes' share. Plus the live H.264 with a keyframe every
 * 2 s: what the live stream would pay if the recording cut its segments at the live stream's
 * keyframes.
 */

import type { Server } from 'node:http';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { Page } from 'playwright-core';
import { ArclightClient } from '../client/node.ts';
import { VideoEncoder } from '../runtime/media/video-encoder-factory.ts';
import type { H264Profile, VideoCodec } from '../runtime/media/video-encoder.ts';
import { launchChromiumInNamespace, type LaunchedChromium } from '../test/support/chromium.ts';
import { readRuntimeEvents, type RuntimeEventReader } from '../test/support/event-stream-reader.ts';
import { createTestNetwork, networkNamespaceUnavailableReason, type TestNetwork } from '../test/support/netns.ts';
import { startChildRuntime, type ChildRuntime } from './support/child-runtime.ts';
import { loadavg, median, sleep } from './support/measure.ts';
import { cpuSnapshot as snapshot, type CpuSnapshot } from './support/process-probe.ts';
import { PREFER_H264_SCRIPT, servePage } from './support/page-server.ts';
import { PictureDrawer, type Picture } from './support/pictures.ts';
import { finishReport, runBench, runInfo } from './support/report.ts';

const FPS = 30;

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '4' },
    seconds: { type: 'string', default: '10' },
    settle: { type: 'string', default: '3' },
    loads: { type: 'string', default: 'busy-720p,busy-1080p,pattern-720p' },
    /** Runtimes per round and load, one per mode, order rotated each round: off (--no-recording), shared (default recording), own (--recording-encoder own). */
    modes: { type: 'string', default: 'off,shared,own' },
    chromium: { type: 'boolean', default: false },
    'no-runtime': { type: 'boolean', default: false },
    'no-encoders': { type: 'boolean', default: false },
    'encoder-rounds': { type: 'string', default: '3' },
    'encoder-frames': { type: 'string', default: '300' },
    json: { type: 'string' },
  },
});
const ROUNDS = Number(args.rounds);
const WINDOW_MS = Number(args.seconds) * 1000;
const SETTLE_MS = Number(args.settle) * 1000;
const ENCODER_ROUNDS = Number(args['encoder-rounds']);
const ENCODER_FRAMES = Number(args['encoder-frames']);

interface Load {
  readonly name: string;
  readonly model: string;
  readonly picture: Picture;
  readonly width: number;
  readonly height: number;
  /** The track's bitrate: the live encoders' target and the recording's (it takes the track's). */
  readonly bitrateKbps: number;
}

const LOADS: Record<string, Load> = {
  'busy-720p': { name: 'busy-720p', model: 'bench/models/busy-model.ts', picture: 'grain', width: 1280, height: 720, bitrateKbps: 2000 },
  'busy-1080p': {
    name: 'busy-1080p',
    model: 'bench/models/busy-1080p-model.ts',
    picture: 'grain',
    width: 1920,
    height: 1080,
    bitrateKbps: 4500,
  },
  // No bitrate on its track: the runtime's default, 2,500 kbit/s at 720p.
  'pattern-720p': {
    name: 'pattern-720p',
    model: 'models/examples/pattern',
    picture: 'pattern',
    width: 1280,
    height: 720,
    bitrateKbps: 2500,
  },
};
type Mode = 'off' | 'shared' | 'own';
const MODES = args.modes.split(',').map((m) => {
  const mode = m.trim();
  if (mode !== 'off' && mode !== 'shared' && mode !== 'own') throw new Error(`unknown mode "${m}": use off, shared, own`);
  return mode as Mode;
});
if (new Set(MODES).size !== MODES.length) throw new Error('--modes: each mode once');

const loads = args.loads.split(',').map((name) => {
  const load = LOADS[name.trim()];
  if (!load) throw new Error(`unknown load "${name}": use ${Object.keys(LOADS).join(', ')}`);
  return load;
});

// ---------------------------------------------------------------------------
// CPU of the runtime process, whole and per thread name
// ---------------------------------------------------------------------------

interface CpuWindow {
  /** Whole process, % of one core. */
  pct: number;
  /** By thread name (threads that ended during the window are missing), % of one core. */
  byThread: Record<string, number>;
  /** Whole machine busy, % of all cores. */
  machineBusyPct: number;
  /** The busiest threads one by one (`name#tid`), % of one core: which pool thread does the extra work. */
  topThreads: Record<string, number>;
}

function cpuBetween(a: CpuSnapshot, b: CpuSnapshot): CpuWindow {
  const wall = b.at - a.at;
  const byThread: Record<string, number> = {};
  for (const [tid, t] of b.threads) byThread[t.comm] = (byThread[t.comm] ?? 0) + ((t.ms - (a.threads.get(tid)?.ms ?? 0)) * 100) / wall;
  for (const key of Object.keys(byThread)) byThread[key] = +byThread[key]!.toFixed(1);
  const each = [...b.threads].map(([tid, t]) => [`${t.comm}#${tid}`, ((t.ms - (a.threads.get(tid)?.ms ?? 0)) * 100) / wall] as const);
  const topThreads = Object.fromEntries(
    each
      .sort((x, y) => y[1] - x[1])
      .slice(0, 6)
      .filter(([, v]) => v >= 0.5)
      .map(([k, v]) => [k, +v.toFixed(1)]),
  );
  return {
    pct: ((b.processMs - a.processMs) * 100) / wall,
    byThread,
    topThreads,
    machineBusyPct: (100 * (b.system.busy - a.system.busy)) / (b.system.total - a.system.total),
  };
}

/** Counters and sums from /metrics this script reads. */
async function runtimeCounters(url: string): Promise<Map<string, number>> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (/^arclight_(frames_emitted_total|frames_dropped_total|encode_duration_seconds_(sum|count))/.test(line)) {
      const space = line.lastIndexOf(' ');
      out.set(line.slice(0, space), Number(line.slice(space + 1)));
    }
  }
  return out;
}

function counterRate(a: Map<string, number>, b: Map<string, number>, name: string, seconds: number, labels = ''): number {
  let sum = 0;
  for (const [key, value] of b) if ((key === name || key.startsWith(`${name}{`)) && key.includes(labels)) sum += value - (a.get(key) ?? 0);
  return sum / seconds;
}

/** Frames dropped per second for any reason but a paused or absent viewer (nothing to send then). */
function droppedRate(a: Map<string, number>, b: Map<string, number>, seconds: number): number {
  let sum = 0;
  for (const [key, value] of b) {
    if (key.startsWith('arclight_frames_dropped_total') && !/reason="(paused|no_subscribers)"/.test(key)) sum += value - (a.get(key) ?? 0);
  }
  return sum / seconds;
}

/** Bytes under `dir`, recursively (the recording's segments). */
function folderBytes(dir: string): number {
  let bytes = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) {
      try {
        bytes += statSync(join(entry.parentPath, entry.name)).size;
      } catch {
        // deleted meanwhile
      }
    }
  }
  return bytes;
}

/**
 * Video samples per finished segment of the recording in `dir` (the first `trun` of each
 * `seg-*.m4s`: the video track's; no audio is recorded here, the tone stays paused): 60 means the
 * recorder encoded every frame of a 2 s segment at 30 fps.
 */
function samplesPerSegment(dir: string): number[] {
  const counts: number[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile() || !/^seg-\d+\.m4s$/.test(entry.name)) continue;
    const data = readFileSync(join(entry.parentPath, entry.name));
    const at = data.indexOf('trun');
    // box type, then version + flags (4 bytes), then sample_count.
    if (at >= 4) counts.push(data.readUInt32BE(at + 8));
  }
  return counts;
}

// ---------------------------------------------------------------------------
// viewers
// ---------------------------------------------------------------------------

interface Received {
  frames: number;
  bytes: number;
}
type Subscriber = () => Promise<Received>;

/** A Node client (wrtc, VP8 only); it decodes in this process, not the runtime's. */
class Viewer {
  readonly client: ArclightClient;

  constructor(url: string) {
    this.client = new ArclightClient({ modelName: 'bench', local: true, localRuntimeUrl: url });
  }

  readonly received: Subscriber = async () => {
    const report = await this.client.getPeerConnection()?.getStats();
    let out: Received = { frames: 0, bytes: 0 };
    report?.forEach((s: Record<string, unknown>) => {
      if (s['type'] === 'inbound-rtp' && s['kind'] === 'video')
        out = { frames: Number(s['framesDecoded'] ?? 0), bytes: Number(s['bytesReceived'] ?? 0) };
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

const PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><title>recording-cost subscriber</title></head>
<body style="margin:0;background:#000">
<video id="v" autoplay muted playsinline width="1280" height="720"></video>
<script type="module">
import { ArclightClient } from '/arclight-client.js';
const video = document.getElementById('v');
${PREFER_H264_SCRIPT}
window.subscribe = async (runtimeUrl, sessionId) => {
  preferH264();
  const client = new ArclightClient({ modelName: 'bench', local: true, localRuntimeUrl: runtimeUrl });
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
  const codec = inbound?.codecId ? report.get(inbound.codecId) : undefined;
  return { codec: codec ? codec.mimeType + ' ' + (codec.sdpFmtpLine ?? '') : null, framesDecoded: inbound?.framesDecoded ?? 0, bytesReceived: inbound?.bytesReceived ?? 0 };
};
window.unsubscribe = () => window.client?.disconnect(true);
</script></body></html>`;

interface ChromeSetup {
  browser: LaunchedChromium;
  pageUrl: string;
}

type PageApi = {
  subscribe(u: string, s: string): Promise<void>;
  codecInfo(): Promise<{ codec: string | null; framesDecoded: number; bytesReceived: number }>;
  unsubscribe(): Promise<void>;
};

async function chromiumSubscriber(
  chrome: ChromeSetup,
  runtime: ChildRuntime,
  sessionId: string,
): Promise<{ page: Page; received: Subscriber; codec: string | null }> {
  const page = await chrome.browser.newPage({ viewport: { width: 1280, height: 720 } });
  await page.goto(chrome.pageUrl);
  await page.evaluate(([url, sid]) => (window as unknown as PageApi).subscribe(url, sid), [runtime.url, sessionId] as const);
  const received: Subscriber = async () => {
    const info = await page.evaluate(() => (window as unknown as PageApi).codecInfo());
    return { frames: info.framesDecoded, bytes: info.bytesReceived };
  };
  await waitFrames('Chromium', received, 30);
  const codec = (await page.evaluate(() => (window as unknown as PageApi).codecInfo())).codec;
  return { page, received, codec };
}

async function closePage(page: Page | undefined): Promise<void> {
  if (!page) return;
  await page.evaluate(() => (window as unknown as PageApi).unsubscribe()).catch(() => {});
  await page
    .context()
    .close()
    .catch(() => {});
}

// ---------------------------------------------------------------------------
// part 1: one runtime, its phases
// ---------------------------------------------------------------------------

interface PhaseResult {
  load: string;
  /** off: --no-recording; shared: the default recording; own: --recording-encoder own. */
  mode: Mode;
  recording: boolean;
  phase: string;
  cpu: CpuWindow;
  loadavg: string;
  emittedFps: number;
  droppedPerSecond: number;
  /** The live encoder(s), from /metrics: frames/s and mean ms per frame, by codec. */
  liveEncode: Record<string, { fps: number; meanMs: number }>;
  /** Growth of the recording folder over the window, kbit/s (segments land every ~2 s). */
  recordedKbps: number;
  /** Recording runs: `recording_segment` events received during the window, by the encoder that made the segment. */
  segments?: { live: number; own: number };
  /** Recording runs, on their last phase: video samples in each finished segment. */
  samplesPerSegment?: number[];
  viewer?: { codec: string; fps: number; kbps: number };
}

async function measurePhase(
  load: Load,
  mode: Mode,
  recordingDir: string | undefined,
  events: RuntimeEventReader | undefined,
  phase: string,
  runtime: ChildRuntime,
  viewer: { codec: string; received: Subscriber } | undefined,
  label: string,
): Promise<PhaseResult> {
  await sleep(SETTLE_MS);
  const r0 = await viewer?.received();
  const m0 = await runtimeCounters(runtime.url);
  const bytes0 = recordingDir ? folderBytes(recordingDir) : 0;
  const events0 = events?.all().length ?? 0;
  const s0 = snapshot(runtime.pid);
  await sleep(WINDOW_MS);
  const s1 = snapshot(runtime.pid);
  const bytes1 = recordingDir ? folderBytes(recordingDir) : 0;
  let segments: PhaseResult['segments'];
  if (events) {
    segments = { live: 0, own: 0 };
    for (const e of events.all().slice(events0)) if (e.type === 'recording_segment') segments[e.encoder]++;
  }
  const m1 = await runtimeCounters(runtime.url);
  const r1 = await viewer?.received();
  const seconds = (s1.at - s0.at) / 1000;
  const liveEncode: PhaseResult['liveEncode'] = {};
  for (const codec of ['h264', 'vp8']) {
    const n = counterRate(m0, m1, 'arclight_encode_duration_seconds_count', seconds, `codec="${codec}"`);
    const sum = counterRate(m0, m1, 'arclight_encode_duration_seconds_sum', seconds, `codec="${codec}"`);
    if (n > 0) liveEncode[codec] = { fps: +n.toFixed(1), meanMs: +((sum / n) * 1000).toFixed(2) };
  }
  const result: PhaseResult = {
    load: load.name,
    mode,
    recording: recordingDir !== undefined,
    phase,
    cpu: cpuBetween(s0, s1),
    loadavg: loadavg(),
    emittedFps: +counterRate(m0, m1, 'arclight_frames_emitted_total', seconds, 'track="main_video"').toFixed(1),
    droppedPerSecond: +droppedRate(m0, m1, seconds).toFixed(2),
    liveEncode,
    recordedKbps: +(((bytes1 - bytes0) * 8) / seconds / 1000).toFixed(0),
    ...(segments ? { segments } : {}),
    ...(viewer && r0 && r1
      ? {
          viewer: {
            codec: viewer.codec,
            fps: +((r1.frames - r0.frames) / seconds).toFixed(1),
            kbps: +(((r1.bytes - r0.bytes) * 8) / seconds / 1000).toFixed(0),
          },
        }
      : {}),
  };
  const threads = Object.entries(result.cpu.topThreads)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');
  process.stdout.write(
    `${label} | ${load.name} rec ${mode.padEnd(6)} | ${phase.padEnd(21)} runtime ${result.cpu.pct.toFixed(1).padStart(5)}%  [${threads}]  ` +
      `machine ${result.cpu.machineBusyPct.toFixed(0)}%  load ${result.loadavg.split(' ')[0]}\n` +
      `        emitted ${result.emittedFps} fps, dropped ${result.droppedPerSecond}/s, live encode ${JSON.stringify(liveEncode)}, recorded ${result.recordedKbps} kbit/s` +
      (segments ? ` (segments in the window: live ${segments.live}, own ${segments.own})` : '') +
      (result.viewer ? `, viewer ${result.viewer.codec} ${result.viewer.fps} fps ${result.viewer.kbps} kbit/s` : '') +
      '\n',
  );
  return result;
}

async function runtimeRun(load: Load, mode: Mode, host: string, chrome: ChromeSetup | undefined, label: string): Promise<PhaseResult[]> {
  const recordingDir = mode === 'off' ? undefined : mkdtempSync(join(os.tmpdir(), 'arclight-recording-cost-'));
  let runtime: ChildRuntime;
  try {
    runtime = await startChildRuntime(host, {
      model: load.model,
      graceSeconds: 600,
      stderrTailChars: 3_000,
      recording: recordingDir !== undefined,
      // `shared` is the CLI's default: nothing to add.
      ...(recordingDir ? { extraArgs: ['--recording-dir', recordingDir, ...(mode === 'own' ? ['--recording-encoder', 'own'] : [])] } : {}),
    });
  } catch (error) {
    if (recordingDir) rmSync(recordingDir, { recursive: true, force: true });
    throw error;
  }
  const events = recordingDir ? await readRuntimeEvents(runtime.url) : undefined;
  const viewer = new Viewer(runtime.url);
  let page: Page | undefined;
  const results: PhaseResult[] = [];
  try {
    await viewer.client.connect(undefined, { autoResumeTracks: false });
    const sessionId = viewer.client.getSessionId()!;
    results.push(await measurePhase(load, mode, recordingDir, events, '0 viewers', runtime, undefined, label));
    viewer.client.resumeTrack('main_video');
    await waitFrames('Node viewer', viewer.received, 30);
    results.push(
      await measurePhase(load, mode, recordingDir, events, '1 × VP8 (Node)', runtime, { codec: 'VP8', received: viewer.received }, label),
    );
    if (chrome) {
      viewer.client.pauseTrack('main_video');
      const sub = await chromiumSubscriber(chrome, runtime, sessionId);
      page = sub.page;
      results.push(
        await measurePhase(
          load,
          mode,
          recordingDir,
          events,
          '1 × H.264 (Chromium)',
          runtime,
          { codec: sub.codec ?? '?', received: sub.received },
          label,
        ),
      );
    }
    if (recordingDir) {
      const counts = samplesPerSegment(recordingDir);
      results.at(-1)!.samplesPerSegment = counts;
      process.stdout.write(
        `        recording: ${counts.length} segments, video samples per segment median ${median(counts)} (min ${Math.min(...counts)}, max ${Math.max(...counts)})\n`,
      );
    }
    return results;
  } finally {
    await closePage(page);
    await viewer.close();
    events?.stop();
    await runtime.stop();
    if (recordingDir) rmSync(recordingDir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------
// part 2: the encoders alone
// ---------------------------------------------------------------------------

interface EncoderSetting {
  readonly name: string;
  readonly codec: VideoCodec;
  readonly profile?: H264Profile;
  /** A keyframe every this many seconds; 0: only the first frame (the live encoders' case here). */
  readonly keyframeSeconds: number;
  /** The recorder runs on node-av's thread pool; the live encoders synchronously below 12 ms. */
  readonly syncBelowMs?: number;
}

const ENCODER_SETTINGS: readonly EncoderSetting[] = [
  { name: 'recorder: H.264 High, key 2 s', codec: 'h264', profile: 'high', keyframeSeconds: 2, syncBelowMs: 0 },
  { name: 'live VP8 (Node viewer)', codec: 'vp8', keyframeSeconds: 0 },
  { name: 'live H.264 CB (Chromium)', codec: 'h264', profile: 'constrained-baseline', keyframeSeconds: 0 },
  { name: 'live H.264 CB, key 2 s', codec: 'h264', profile: 'constrained-baseline', keyframeSeconds: 2 },
];

interface EncoderRun {
  load: string;
  setting: string;
  cpuMsPerFrame: number;
  /** CPU per frame × 30 fps, % of one core. */
  pctOfCore: number;
  kbps: number;
  keyframeShare: number;
  /** The largest keyframe over the mean non-key frame (how long it holds the pacer). */
  keyframeOverMean: number;
}

async function encodeOnce(load: Load, setting: EncoderSetting): Promise<EncoderRun> {
  const { width, height, bitrateKbps } = load;
  const encoder = await VideoEncoder.create({
    codec: setting.codec,
    width,
    height,
    fps: FPS,
    bitrateKbps,
    ...(setting.profile ? { profile: setting.profile } : {}),
    ...(setting.syncBelowMs === undefined ? {} : { syncBelowMs: setting.syncBelowMs }),
  });
  const drawer = new PictureDrawer(width, height, load.picture);
  const interval = setting.keyframeSeconds * FPS;
  let bytes = 0;
  let keyBytes = 0;
  let maxKey = 0;
  let deltaFrames = 0;
  let cpuMicros = 0;
  try {
    for (let i = 0; i < ENCODER_FRAMES; i++) {
      drawer.draw(i);
      if (interval > 0 && i % interval === 0) encoder.requestKeyframe();
      const before = process.cpuUsage();
      const units = await encoder.encode(drawer.canvas.frame());
      const used = process.cpuUsage(before);
      cpuMicros += used.user + used.system;
      for (const unit of units) {
        bytes += unit.data.length;
        if (unit.keyframe) {
          keyBytes += unit.data.length;
          maxKey = Math.max(maxKey, unit.data.length);
        } else {
          deltaFrames++;
        }
      }
    }
  } finally {
    encoder.close();
  }
  const cpuMsPerFrame = cpuMicros / 1000 / ENCODER_FRAMES;
  const meanDelta = (bytes - keyBytes) / Math.max(1, deltaFrames);
  return {
    load: load.name,
    setting: setting.name,
    cpuMsPerFrame: +cpuMsPerFrame.toFixed(2),
    pctOfCore: +((cpuMsPerFrame * FPS) / 10).toFixed(1),
    kbps: +((bytes * 8) / (ENCODER_FRAMES / FPS) / 1000).toFixed(0),
    keyframeShare: +((100 * keyBytes) / bytes).toFixed(1),
    keyframeOverMean: +(maxKey / meanDelta).toFixed(1),
  };
}

// ---------------------------------------------------------------------------
// main
// ---------------------------------------------------------------------------

const spread = (values: readonly number[], digits = 1): string =>
  `${median(values).toFixed(digits)} (${Math.min(...values).toFixed(digits)}–${Math.max(...values).toFixed(digits)})`;

async function main(): Promise<void> {
  const info = runInfo();
  const noNamespace = networkNamespaceUnavailableReason();
  const withChromium = args.chromium && noNamespace === null;
  process.stdout.write(
    `recording-cost: loads ${loads.map((l) => l.name).join(', ')}; modes ${MODES.join(', ')}; runtime: ${args['no-runtime'] ? 'no' : `${ROUNDS} rounds, ${SETTLE_MS / 1000} s settle + ${WINDOW_MS / 1000} s window per phase`}; ` +
      `Chromium: ${withChromium ? 'yes' : args.chromium ? `no (${noNamespace})` : 'no'}; encoders: ${args['no-encoders'] ? 'no' : `${ENCODER_ROUNDS} rounds × ${ENCODER_FRAMES} frames`}\n${JSON.stringify(info)}\n`,
  );
  const phases: PhaseResult[][] = [];
  const encoderRuns: EncoderRun[] = [];
  let net: TestNetwork | undefined;
  let browser: LaunchedChromium | undefined;
  let server: Server | undefined;
  const started = performance.now();
  try {
    if (!args['no-runtime']) {
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
      for (let round = 0; round < ROUNDS; round++) {
        for (const load of loads) {
          // Rotated by one each round: with off,shared,own, round 1 runs off first, round 2 shared, round 3 own.
          const order = MODES.map((_, i) => MODES[(i + round) % MODES.length]!);
          const all: PhaseResult[] = [];
          for (const mode of order) all.push(...(await runtimeRun(load, mode, host, chrome, `round ${round + 1}`)));
          phases.push(all);
        }
      }
    }
  } finally {
    await browser?.close().catch(() => {});
    server?.close();
    await net?.close();
  }
  if (!args['no-encoders']) {
    for (let round = 0; round < ENCODER_ROUNDS; round++) {
      for (const load of loads) {
        for (const setting of ENCODER_SETTINGS) {
          const run = await encodeOnce(load, setting);
          encoderRuns.push(run);
          process.stdout.write(
            `encoders round ${round + 1} | ${load.name.padEnd(12)} ${setting.name.padEnd(32)} ${run.cpuMsPerFrame.toFixed(2).padStart(6)} ms/frame ` +
              `(${run.pctOfCore}% of a core at 30 fps), ${run.kbps} kbit/s, keyframes ${run.keyframeShare}% of bytes, largest keyframe ${run.keyframeOverMean}× a mean P-frame\n`,
          );
        }
      }
    }
  }
  const loadavgAfter = loadavg();

  process.stdout.write(
    `\n== runtime CPU, % of one core (2 cores = 200 %): median over rounds (min–max); took ${((performance.now() - started) / 60_000).toFixed(1)} min ==\n`,
  );
  const summary: Record<string, unknown>[] = [];
  for (const load of loads) {
    const runs = phases.filter((p) => p[0]?.load === load.name);
    if (runs.length === 0) continue;
    for (const phase of [...new Set(runs[0]!.map((p) => p.phase))]) {
      // Per round (a row of `runs`), the phase's result in each mode; rounds missing a mode are left out.
      const inMode = (mode: Mode) => runs.map((r) => r.find((p) => p.phase === phase && p.mode === mode));
      const off = inMode('off');
      for (const mode of MODES) {
        const these = inMode(mode).filter((p): p is PhaseResult => p !== undefined);
        if (these.length === 0) continue;
        const main = these.map((p) => p.cpu.byThread['main (JS)'] ?? 0);
        const fps = these.map((p) => p.viewer?.fps ?? p.emittedFps);
        const paired = inMode(mode)
          .map((p, i) => [p, off[i]] as const)
          .filter((x): x is readonly [PhaseResult, PhaseResult] => x[0] !== undefined && x[1] !== undefined);
        const diff = paired.map(([p, o]) => p.cpu.pct - o.cpu.pct);
        const ratio = paired.map(([p, o]) => p.cpu.pct / o.cpu.pct);
        const segments = these.filter((p) => p.segments);
        const row = {
          load: load.name,
          phase,
          mode,
          cpu: spread(these.map((p) => p.cpu.pct)),
          perRoundCpu: these.map((p) => +p.cpu.pct.toFixed(1)),
          ...(mode !== 'off' && paired.length
            ? { minusOff: spread(diff), overOff: spread(ratio, 2), perRoundOverOff: ratio.map((x) => +x.toFixed(2)) }
            : {}),
          mainThread: spread(main),
          recordedKbps: median(these.map((p) => p.recordedKbps)),
          viewerKbps: median(these.map((p) => p.viewer?.kbps ?? 0)),
          minFps: Math.min(...fps),
          ...(segments.length
            ? {
                segments: {
                  live: segments.reduce((a, p) => a + p.segments!.live, 0),
                  own: segments.reduce((a, p) => a + p.segments!.own, 0),
                },
              }
            : {}),
        };
        summary.push(row);
        process.stdout.write(
          `${load.name.padEnd(12)} ${phase.padEnd(21)} ${mode.padEnd(6)} ${row.cpu}  (per round ${row.perRoundCpu.join(', ')})` +
            (row.overOff ? `  −off ${row.minusOff}  /off ${row.overOff} (per round ${row.perRoundOverOff!.join(', ')})` : '') +
            `  main (JS) ${row.mainThread}  recorded ${row.recordedKbps} kbit/s, viewer ${row.viewerKbps} kbit/s, min fps ${row.minFps}` +
            (row.segments ? `, segments live ${row.segments.live} / own ${row.segments.own}` : '') +
            '\n',
        );
      }
    }
  }
  if (encoderRuns.length) {
    process.stdout.write(`\n== encoders alone, median over ${ENCODER_ROUNDS} rounds (min–max) ==\n`);
    for (const load of loads) {
      for (const setting of ENCODER_SETTINGS) {
        const runs = encoderRuns.filter((r) => r.load === load.name && r.setting === setting.name);
        process.stdout.write(
          `${load.name.padEnd(12)} ${setting.name.padEnd(32)} ${spread(
            runs.map((r) => r.cpuMsPerFrame),
            2,
          )} ms/frame = ${spread(runs.map((r) => r.pctOfCore))}% of a core; ` +
            `${median(runs.map((r) => r.kbps))} kbit/s; keyframes ${median(runs.map((r) => r.keyframeShare))}% of bytes; largest keyframe ${median(runs.map((r) => r.keyframeOverMean))}× a mean P-frame\n`,
        );
      }
    }
  }
  finishReport(info, loadavgAfter, args.json, { phases, summary, encoderRuns });
}

await runBench('recording-cost', main);
