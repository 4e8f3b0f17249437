/**
 * Part (c), end to end: per size, a runtime in a child process (bench/gpu/check-runtime.ts) whose
 * model emits CudaVideoFrames from device memory at 30 fps; a werift peer here receives H.264
 * for `seconds`, and FFmpeg (node-av) decodes it. Reported: the encoder the runtime chose (from its
 * /metrics), decoded frames and fps, the decoded picture's colour bars against the model's, the
 * runtime process's CPU (utime + stime of all its threads, from /proc) in % of one core, and over
 * the same window the runtime's own histograms: the CUDA host copy (`arclight_cuda_download_seconds`,
 * copy / convert stage) and the encode (`arclight_encode_duration_seconds`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { nativeAddon, nativeAddonStatus } from '../../../runtime/native/native-addon.ts';
import { packageRoot } from '../../../server-kit/package-root.ts';
import {
  histogramDelta,
  histogramFromText,
  histogramQuantile,
  valueFromText,
  type CumulativeHistogram,
} from '../../support/process-probe.ts';
import { RESOLUTIONS, type Resolution } from '../../support/pictures.ts';
import { sleep } from '../../support/measure.ts';
import { decodeTrack, openWeriftPeer, type WeriftPeer } from '../../../test/support/werift-peer.ts';
import { waitUntil } from '../../../test/support/video-probe.ts';
import { barsDistance } from './device-ring.ts';
import { errorMessage, round, type CheckReport, type FigureGroup } from './record.ts';

const HOST = '127.0.0.1';
/** Largest Y/U/V distance of a decoded bar from its colour that still counts as the picture. */
const BARS_TOLERANCE = 12;
const SETTLE_MS = 1_000;
/** Clock ticks per second of /proc/<pid>/stat's utime and stime (USER_HZ, 100 on Linux). */
const USER_HZ = 100;

export interface StreamPartOptions {
  readonly sizes: readonly Resolution[];
  readonly seconds: number;
  /** Distinct pictures the child's model cycles through. */
  readonly ringSlots: number;
  /** Stop starting new sizes after this (performance.now() ms). */
  readonly deadline: number;
}

interface RuntimeChild {
  readonly url: string;
  readonly pid: number;
  stderrTail(): string;
  stop(): Promise<void>;
}

/** How to start the child entry: the bundle's sibling .mjs, or the .ts through tsx. */
function childCommand(): { execArgv: string[]; file: string } {
  const here = fileURLToPath(import.meta.url);
  if (here.endsWith('.mjs')) return { execArgv: [], file: join(dirname(here), 'check-runtime.mjs') };
  return { execArgv: ['--conditions=source', '--import', 'tsx'], file: join(packageRoot(), 'bench', 'gpu', 'check-runtime.ts') };
}

const children = new Set<ChildProcess>();
/** Kills any runtime child still running (the check exits with process.exit, which would orphan it). */
export function killRuntimeChildren(): void {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
}

async function startRuntimeChild(size: Resolution, ringSlots: number): Promise<RuntimeChild> {
  const { execArgv, file } = childCommand();
  const child = spawn(process.execPath, [...execArgv, file, '--size', size, '--slots', String(ringSlots), '--host', HOST], {
    cwd: packageRoot(),
    env: { ...process.env, ARCLIGHT_LOG: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  child.once('exit', () => children.delete(child));
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-8_000);
  });
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`${basename(file)} did not listen in 60 s; stderr: ${stderr.slice(-2_000)}`)), 60_000);
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const match = /check-runtime: serving (http:\/\/\S+)/.exec(out);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${basename(file)} exited (${code ?? signal}) before listening; stderr: ${stderr.slice(-2_000)}`));
    });
  });
  return {
    url,
    pid: child.pid!,
    stderrTail: () => stderr.slice(-1_500),
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
        child.once('exit', () => {
          clearTimeout(timer);
          resolve();
        });
        child.kill('SIGTERM');
      }),
  };
}

/** utime + stime of every thread of `pid`, in seconds. */
function processCpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / USER_HZ;
}

async function metricsText(url: string): Promise<string> {
  const response = await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(5_000) });
  if (!response.ok) throw new Error(`GET ${url}/metrics: ${response.status}`);
  return response.text();
}

/** A histogram's series whose labels include every `label="value"` given (summed over the rest). */
function histogramWhere(
  text: string,
  name: string,
  labels: readonly string[],
): { buckets: CumulativeHistogram; sum: number; count: number } {
  const lines = text.split('\n').filter((line) => line.startsWith(name) && labels.every((l) => line.includes(l)));
  const only = lines.join('\n');
  return { buckets: histogramFromText(only, name), sum: valueFromText(only, `${name}_sum`), count: valueFromText(only, `${name}_count`) };
}

/** Mean and p50 (interpolated in its bucket, ms) of what a histogram observed between two scrapes; undefined when the series is absent. */
function windowFigures(before: string, after: string, name: string, labels: readonly string[]): FigureGroup | undefined {
  const a = histogramWhere(before, name, labels);
  const b = histogramWhere(after, name, labels);
  if (b.buckets.bounds.length === 0) return undefined;
  const count = b.count - a.count;
  const p50 = histogramQuantile(histogramDelta(b.buckets, a.buckets), 0.5);
  return {
    count,
    meanMs: count > 0 ? round(((b.sum - a.sum) / count) * 1000, 3) : null,
    p50Ms: p50 === undefined ? null : round(p50 * 1000, 3),
  };
}

/** `arclight_encoder_backend{codec="h264",backend="libx264",hardware="false"} 1` → the backend. */
function selectedBackend(text: string, codec: string): { backend: string; hardware: boolean } | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith('arclight_encoder_backend{') || !line.includes(`codec="${codec}"`) || !/\s1$/.test(line.trim())) continue;
    const backend = /backend="([^"]+)"/.exec(line)?.[1];
    if (backend) return { backend, hardware: /hardware="true"/.test(line) };
  }
  return undefined;
}

async function streamOnce(report: CheckReport, size: Resolution, seconds: number, ringSlots: number): Promise<void> {
  const { width, height } = RESOLUTIONS[size];
  const step = `${size}30 h264`;
  const runtime = await startRuntimeChild(size, ringSlots);
  let peer: WeriftPeer | undefined;
  let decoding: { close(): void } | undefined;
  try {
    const connectStarted = performance.now();
    peer = await openWeriftPeer(runtime.url, {
      videoMime: 'video/H264',
      videoParameters: 'level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f',
    });
    let decoded = 0;
    // Pictures are checked in the window only: the runtime opens each stream with a black frame of its own.
    let measuring = false;
    let wrongSize = 0;
    let worstBars = 0;
    let barSamples = 0;
    decoding = await decodeTrack(peer, 'main_video', 'h264', (frame) => {
      decoded++;
      if (!measuring) return;
      if (frame.width !== width || frame.height !== height) {
        wrongSize++;
        return;
      }
      // Every 10th frame: the bars are the same in every frame of the picture.
      if (decoded % 10 === 0) {
        worstBars = Math.max(worstBars, barsDistance(frame.data, width, height));
        barSamples++;
      }
    });
    await waitUntil(() => decoded > 0, 30_000, 'the first decoded frame');
    const firstFrameMs = performance.now() - connectStarted;
    await sleep(SETTLE_MS);

    const metricsBefore = await metricsText(runtime.url);
    const decodedBefore = decoded;
    const cpuBefore = processCpuSeconds(runtime.pid);
    const ownCpuBefore = process.cpuUsage();
    const windowStarted = performance.now();
    measuring = true;
    await sleep(seconds * 1000);
    measuring = false;
    const windowSeconds = (performance.now() - windowStarted) / 1000;
    const cpu = processCpuSeconds(runtime.pid) - cpuBefore;
    const ownCpu = process.cpuUsage(ownCpuBefore);
    const decodedInWindow = decoded - decodedBefore;
    const metricsAfter = await metricsText(runtime.url);

    const backend = selectedBackend(metricsAfter, 'h264');
    const download = {
      copy: windowFigures(metricsBefore, metricsAfter, 'arclight_cuda_download_seconds', ['stage="copy"']),
      convert: windowFigures(metricsBefore, metricsAfter, 'arclight_cuda_download_seconds', ['stage="convert"']),
    };
    const picture = barSamples > 0 && worstBars <= BARS_TOLERANCE && wrongSize === 0;
    report.record('stream', step, decodedInWindow > 0 && picture ? 'ok' : 'failed', {
      encoderBackend: backend?.backend ?? 'not in /metrics',
      encoderHardware: backend?.hardware,
      windowSeconds: round(windowSeconds, 2),
      decodedFrames: decodedInWindow,
      decodedFps: round(decodedInWindow / windowSeconds, 1),
      firstFrameMs: round(firstFrameMs, 0),
      pictureCheck:
        barSamples === 0
          ? 'no frame sampled'
          : `colour bars within ${worstBars} levels in ${barSamples} sampled frames (tolerance ${BARS_TOLERANCE})${wrongSize ? `; ${wrongSize} frames of the wrong size` : ''}`,
      runtimeCpuPctOfCore: round((cpu / windowSeconds) * 100, 1),
      checkProcessCpuPctOfCore: round(((ownCpu.user + ownCpu.system) / 1e6 / windowSeconds) * 100, 1),
      cudaDownloadCopy: download.copy ?? 'absent from /metrics',
      cudaDownloadConvert: download.convert ?? 'absent from /metrics',
      encode: windowFigures(metricsBefore, metricsAfter, 'arclight_encode_duration_seconds', ['codec="h264"']) ?? 'absent from /metrics',
      framesDropped:
        valueFromText(metricsAfter, 'arclight_frames_dropped_total') - valueFromText(metricsBefore, 'arclight_frames_dropped_total'),
    });
  } catch (error) {
    report.record('stream', step, 'failed', { error: errorMessage(error), runtimeStderr: runtime.stderrTail() || undefined });
  } finally {
    decoding?.close();
    await peer?.close().catch(() => {});
    await runtime.stop();
  }
}

export async function runStreamPart(report: CheckReport, options: StreamPartOptions): Promise<void> {
  // No CUDA here (no driver, or no addon): the model could not hold a frame, so say so once per size.
  const addon = nativeAddon();
  const unusable = addon
    ? await addon.cudaDeviceInfo(0).then(
        () => undefined,
        (error: unknown) => errorMessage(error),
      )
    : `native addon ${nativeAddonStatus().reason ?? 'not loaded'}`;
  for (const size of options.sizes) {
    if (unusable !== undefined) {
      report.record('stream', `${size}30 h264`, 'unavailable', { error: `no CUDA device for the model: ${unusable}` });
      continue;
    }
    if (performance.now() > options.deadline) {
      report.record('stream', `${size}30 h264`, 'skipped', { reason: 'out of time for this part' });
      continue;
    }
    await streamOnce(report, size, options.seconds, options.ringSlots);
  }
}
