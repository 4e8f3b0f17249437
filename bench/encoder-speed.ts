/**
 * Encoder speed per backend: ms per frame of the runtime's `VideoEncoder` (node-av, FFmpeg 8.1)
 * with an explicit `backend` (libx264, libvpx VP8, libx265) at 720p and 1080p, against the same
 * encode in the ffmpeg command-line tool.
 *
 *   node --conditions=source --import tsx bench/encoder-speed.ts [--rounds 3] [--frames 300] [--skip 100]
 *        [--backends libx264,libvpx,libx265] [--resolution 720p,1080p] [--picture pattern,grain]
 *        [--ffmpeg ffmpeg | --no-cli] [--json out.json]
 *
 * The frames: `--frames` frames of each picture (bench/support/pictures.ts: `pattern`, the picture
 * the runtime benchmarks stream; `grain`, the same overlays on fresh luma noise, which spends the
 * whole bitrate), drawn once per size, kept in memory for node-av and written to a raw yuv420p
 * file for the CLI (under the OS temp dir; deleted at the end).
 *
 * node-av: `VideoEncoder.create({codec, width, height, fps: 30, bitrateKbps, backend})` — the
 * runtime's own encoder and options (runtime/media/ffmpeg-encoder-options.ts), the default bitrate for
 * the size (2,500 kbps at 720p, 5,625 at 1080p) — then every frame `await encoder.encode(frame)`
 * back to back. ms/frame = wall time over frames `--skip`..`--frames` (the encoder is warm, its
 * first keyframe is out), CPU ms/frame = this process's CPU time over the same frames; per-frame
 * p50/p99 of the `encode()` calls too.
 *
 * CLI: `ffmpeg -f rawvideo -pix_fmt yuv420p -s WxH -r 30 -i <raw file> -frames:v N -c:v <encoder>
 * <options> -f null -`, where <options> are read back from the context the runtime would open
 * (`createFfmpegEncoderContext`: bitrate, maxrate, minrate, bufsize, GOP, B-frames, threads and
 * thread type, qmin/qmax, VBV initial occupancy, colour tags, level, and the encoder's private
 * options such as preset, tune, profile, x264-params), so both run the same configuration. Run
 * twice, with `--skip` and with `--frames` frames: ms/frame = (wall(N2) − wall(N1)) / (N2 − N1),
 * which leaves out process start, input open and encoder init; CPU from `-benchmark`'s utime +
 * stime the same way. The ffmpeg found is whatever `--ffmpeg` names (Debian 12's is FFmpeg 5.1 with
 * Debian's libx264/libvpx/libx265, not node-av's 8.1 build and its libraries: the script prints
 * both versions, and each encoder's version where it can find it).
 *
 * direct: the same context as the runtime opens it (`openFfmpegEncoder`, node-av's FFmpeg 8.1 and
 * its encoder builds), the pixels copied into an AVFrame as VideoEncoder does, then
 * `sendFrameSync` / `receivePacketSync` on the main thread: the floor for this build, so
 * VideoEncoder ÷ direct is our wrapper's own overhead (thread-pool hop, promises), free of the
 * version difference to the CLI.
 *
 * Ratio = node-av ms/frame ÷ CLI ms/frame (goal ≤ 1.15). Also printed: bytes per frame on each
 * side (a check that both ran the same rate control).
 */

import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { AV_LOG_INFO, AV_OPT_SEARCH_CHILDREN, AV_PIX_FMT_YUV420P, AVERROR_EAGAIN } from 'node-av/constants';
import { Codec, CodecContext, FFmpegError, Frame, getFFmpegInfo, Log, Packet, Rational } from 'node-av/lib';
import { ENCODER_BACKEND_CANDIDATES, type EncoderBackend } from '../runtime/media/encoder-backends.ts';
import { createFfmpegEncoderContext, openFfmpegEncoder, type EncoderSettings } from '../runtime/media/ffmpeg-encoder-options.ts';
import { VideoEncoder } from '../runtime/media/video-encoder-factory.ts';
import { loadavg, median, summarise, type Summary } from './support/measure.ts';
import { parseResolutions, PictureDrawer, RESOLUTIONS, type Picture, type Resolution } from './support/pictures.ts';
import { finishReport, runBench, runInfo } from './support/report.ts';

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    frames: { type: 'string', default: '300' },
    skip: { type: 'string', default: '100' },
    backends: { type: 'string', default: 'libx264,libvpx,libx265' },
    resolution: { type: 'string', default: '720p,1080p' },
    picture: { type: 'string', default: 'pattern,grain' },
    ffmpeg: { type: 'string', default: 'ffmpeg' },
    'no-cli': { type: 'boolean', default: false },
    json: { type: 'string' },
  },
});
const ROUNDS = Number(args.rounds);
const FRAMES = Number(args.frames);
const SKIP = Number(args.skip);
if (!(SKIP >= 1 && SKIP < FRAMES)) throw new Error('--skip must be at least 1 and below --frames');
const RESOLUTION_LIST = parseResolutions(args.resolution);
const PICTURES = args.picture.split(',').map((p) => p.trim()) as Picture[];
if (PICTURES.some((p) => p !== 'pattern' && p !== 'grain')) throw new Error('--picture takes pattern and/or grain');
const FPS = 30;

const ALL_BACKENDS = Object.values(ENCODER_BACKEND_CANDIDATES)
  .flat()
  .map((c) => c.backend);
const BACKENDS: EncoderBackend[] = args.backends.split(',').map((name) => {
  const backend = ALL_BACKENDS.find((b) => b.name === name.trim());
  if (!backend) throw new Error(`unknown backend "${name}"; known: ${ALL_BACKENDS.map((b) => b.name).join(', ')}`);
  return backend;
});

/** VideoEncoder's default for the size (video-encoder-factory.ts: 2,500 kbps at 720p, scaled by pixel count). */
function defaultBitrateKbps(width: number, height: number): number {
  return Math.round(Math.min(20_000, Math.max(150, (2500 * width * height) / (1280 * 720))));
}

// ---------------------------------------------------------------------------
// the same configuration, as ffmpeg CLI options
// ---------------------------------------------------------------------------

/** The encoder's private options each backend sets (ffmpeg-encoder-options.ts), read back from the context. */
const PRIVATE_OPTIONS: Record<string, readonly string[]> = {
  libx264: ['preset', 'tune', 'profile', 'x264-params', 'forced-idr'],
  libx265: ['preset', 'tune', 'profile', 'x265-params', 'forced-idr'],
  libvpx: [
    'deadline',
    'cpu-used',
    'lag-in-frames',
    'auto-alt-ref',
    'error-resilient',
    'noise-sensitivity',
    'static-thresh',
    'undershoot-pct',
    'overshoot-pct',
    'max-intra-rate',
  ],
};

/** CLI options for the configuration `createFfmpegEncoderContext` gives this backend at this size. */
function cliOptions(backend: EncoderBackend, settings: EncoderSettings): string[] {
  const { context } = createFfmpegEncoderContext(backend, settings);
  try {
    const get = (name: string): string | null => context.getOption(name, undefined, AV_OPT_SEARCH_CHILDREN);
    const out = ['-c:v', backend.name, '-pix_fmt', 'yuv420p'];
    for (const name of ['b', 'maxrate', 'minrate', 'bufsize', 'g', 'bf', 'threads']) {
      const value = get(name);
      if (value !== null && value !== '0' && !(name === 'minrate' && value === '0')) out.push(`-${name}`, value);
    }
    out.push('-thread_type', context.threadType === 3 ? 'frame+slice' : context.threadType === 1 ? 'frame' : 'slice');
    for (const name of ['qmin', 'qmax']) {
      const value = get(name);
      if (value !== null && value !== '-1') out.push(`-${name}`, value);
    }
    const occupancy = get('rc_init_occupancy');
    if (occupancy !== null && Number(occupancy) > 0) out.push('-rc_init_occupancy', occupancy);
    if (context.level > 0) out.push('-level', String(context.level));
    out.push('-color_range', 'tv', '-colorspace', 'smpte170m');
    for (const name of PRIVATE_OPTIONS[backend.name] ?? []) {
      let value = get(name);
      if (value === null) continue;
      if (name === 'error-resilient') value = Number(value) === 1 ? 'default' : Number(value) === 0 ? '0' : value;
      if (name === 'deadline') value = value === '1' ? 'realtime' : value === '0' ? 'best' : value === '2' ? 'good' : value;
      if (name === 'forced-idr') value = value === 'true' ? '1' : '0';
      out.push(`-${name}`, value);
    }
    return out;
  } finally {
    context.freeContext();
  }
}

// ---------------------------------------------------------------------------
// versions
// ---------------------------------------------------------------------------

/** The version string an encoder writes into its first packet (x264, x265 info SEI), if any. */
function versionInBitstream(data: Uint8Array): string | null {
  const text = Buffer.from(data).toString('latin1');
  return /x264 - core \d+(?: r\d+ [0-9a-f]+)?/.exec(text)?.[0] ?? /x265 \(build \d+\) - [\w.+-]+/.exec(text)?.[0] ?? null;
}

/**
 * node-av's encoder versions: each encoder opened with its defaults at 320x240, one frame
 * encoded; the version comes from the bitstream (x264, x265) or the INFO log (libvpx).
 */
async function nodeAvEncoderVersions(): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const lines: string[] = [];
  const level = Log.getLevel();
  Log.setLevel(AV_LOG_INFO);
  Log.setCallback((_l, message) => void lines.push(message.trim()), { maxLevel: AV_LOG_INFO });
  const contexts: CodecContext[] = [];
  try {
    for (const backend of BACKENDS) {
      lines.length = 0;
      const codec = Codec.findEncoderByName(backend.name as never);
      if (!codec) continue;
      const context = new CodecContext();
      context.allocContext3(codec);
      const frame = new Frame();
      const packet = new Packet();
      try {
        context.width = 320;
        context.height = 240;
        context.pixelFormat = AV_PIX_FMT_YUV420P;
        context.timeBase = new Rational(1, 30);
        context.framerate = new Rational(30, 1);
        context.bitRate = 500_000n;
        FFmpegError.throwIfError(await context.open2(codec, null), 'open');
        frame.alloc();
        frame.format = AV_PIX_FMT_YUV420P;
        frame.width = 320;
        frame.height = 240;
        FFmpegError.throwIfError(frame.allocBuffer(), 'alloc');
        frame.data![0]!.fill(100);
        frame.data![1]!.fill(128);
        frame.data![2]!.fill(128);
        frame.pts = 0n;
        packet.alloc();
        await context.sendFrame(frame);
        await context.sendFrame(null);
        let version: string | null = null;
        for (let i = 0; i < 4 && version === null; i++) {
          const received = await context.receivePacket(packet);
          if (received < 0 && received !== AVERROR_EAGAIN) break;
          if (received >= 0) version = packet.data ? versionInBitstream(packet.data) : null;
          packet.unref();
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
        version ??= lines.find((l) => /^v\d+\.\d+/.test(l)) ?? null;
        out[backend.name] = version ?? 'unknown';
      } catch (error) {
        out[backend.name] = `unknown (${(error as Error).message})`;
      } finally {
        packet.free();
        frame.free();
        contexts.push(context);
      }
    }
  } finally {
    Log.resetCallback();
    Log.setLevel(level);
  }
  // Freed at the restored log level: encoders print their statistics at INFO when closed.
  for (const context of contexts) context.freeContext();
  return out;
}

/** The CLI's encoder versions, the same way, from a one-frame encode of `raw`. */
function cliEncoderVersions(raw: string, width: number, height: number): Record<string, string> {
  const out: Record<string, string> = {};
  for (const backend of BACKENDS) {
    const format = backend.codec === 'vp8' ? ['-f', 'ivf'] : backend.codec === 'h265' ? ['-f', 'hevc'] : ['-f', 'h264'];
    const run = spawnSync(
      args.ffmpeg,
      [
        '-hide_banner',
        '-nostdin',
        '-loglevel',
        'info',
        '-f',
        'rawvideo',
        '-pix_fmt',
        'yuv420p',
        '-s',
        `${width}x${height}`,
        '-r',
        String(FPS),
        '-i',
        raw,
        '-frames:v',
        '1',
        '-c:v',
        backend.name,
        ...format,
        '-',
      ],
      { maxBuffer: 64 << 20 },
    );
    const stderr = run.stderr.toString();
    out[backend.name] =
      versionInBitstream(run.stdout) ??
      /\] (v\d+\.\d+\.\d+\S*)/.exec(stderr)?.[1] ??
      /HEVC encoder version (\S+)/.exec(stderr)?.[1] ??
      'unknown';
  }
  return out;
}

// ---------------------------------------------------------------------------
// measurements
// ---------------------------------------------------------------------------

interface NodeResult {
  msPerFrame: number;
  cpuMsPerFrame: number;
  /** Per `encode()` call, frames skip..frames. */
  callMs: Summary;
  bytesPerFrame: number;
}

async function encodeWithNodeAv(
  backend: EncoderBackend,
  width: number,
  height: number,
  frames: readonly Uint8Array[],
  bitrateKbps: number,
): Promise<NodeResult> {
  const encoder = await VideoEncoder.create({ codec: backend.codec, width, height, fps: FPS, bitrateKbps, backend });
  try {
    const calls: number[] = [];
    let bytes = 0;
    let t0 = 0;
    let cpu0 = process.cpuUsage();
    for (let i = 0; i < frames.length; i++) {
      if (i === SKIP) {
        t0 = performance.now();
        cpu0 = process.cpuUsage();
      }
      const started = performance.now();
      const out = await encoder.encode({ width, height, format: 'i420', data: frames[i]!, timestampUs: (i * 1e6) / FPS });
      if (i >= SKIP) {
        calls.push(performance.now() - started);
        for (const unit of out) bytes += unit.data.byteLength;
      }
    }
    const wall = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    const n = frames.length - SKIP;
    return { msPerFrame: wall / n, cpuMsPerFrame: (cpu.user + cpu.system) / 1000 / n, callMs: summarise(calls), bytesPerFrame: bytes / n };
  } finally {
    encoder.close();
  }
}

/**
 * The floor for the same FFmpeg build: the context the runtime opens (`openFfmpegEncoder`), the
 * pixels copied into one AVFrame row by row (as VideoEncoder does), then `sendFrameSync` /
 * `receivePacketSync` on this thread — no thread-pool hop, no promise per call.
 */
function encodeDirect(
  backend: EncoderBackend,
  context: CodecContext,
  width: number,
  height: number,
  frames: readonly Uint8Array[],
): NodeResult {
  const frame = new Frame();
  const packet = new Packet();
  try {
    frame.alloc();
    frame.format = AV_PIX_FMT_YUV420P;
    frame.width = width;
    frame.height = height;
    FFmpegError.throwIfError(frame.allocBuffer(), 'allocate frame');
    packet.alloc();
    const calls: number[] = [];
    let bytes = 0;
    let t0 = 0;
    let cpu0 = process.cpuUsage();
    const cw = width / 2;
    const ch = height / 2;
    for (let i = 0; i < frames.length; i++) {
      if (i === SKIP) {
        t0 = performance.now();
        cpu0 = process.cpuUsage();
      }
      const started = performance.now();
      FFmpegError.throwIfError(frame.makeWritable(), 'make writable');
      const planes = frame.data!;
      const strides = frame.linesize;
      const src = frames[i]!;
      const copy = (plane: number, offset: number, rowBytes: number, rows: number): void => {
        const target = planes[plane]!;
        const stride = strides[plane]!;
        // As VideoEncoder's copyRows: one copy when FFmpeg's rows are not padded.
        if (stride === rowBytes) target.set(src.subarray(offset, offset + rowBytes * rows));
        else
          for (let row = 0; row < rows; row++)
            target.set(src.subarray(offset + row * rowBytes, offset + (row + 1) * rowBytes), row * stride);
      };
      copy(0, 0, width, height);
      copy(1, width * height, cw, ch);
      copy(2, width * height + cw * ch, cw, ch);
      frame.pts = BigInt(i);
      FFmpegError.throwIfError(context.sendFrameSync(frame), `${backend.name} sendFrameSync`);
      for (;;) {
        const received = context.receivePacketSync(packet);
        if (received < 0) break;
        if (i >= SKIP) bytes += packet.size;
        packet.unref();
      }
      if (i >= SKIP) calls.push(performance.now() - started);
    }
    const wall = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    const n = frames.length - SKIP;
    return { msPerFrame: wall / n, cpuMsPerFrame: (cpu.user + cpu.system) / 1000 / n, callMs: summarise(calls), bytesPerFrame: bytes / n };
  } finally {
    packet.free();
    frame.free();
  }
}

interface CliRun {
  wallMs: number;
  /** -benchmark: utime + stime and rtime of the transcode, ms. */
  cpuMs: number;
  rtimeMs: number;
  /** Output size the CLI reports (`video:NkB`), bytes. */
  videoBytes: number;
}

function runCli(raw: string, width: number, height: number, frames: number, options: readonly string[]): CliRun {
  const argv = [
    '-hide_banner',
    '-nostdin',
    '-nostats',
    '-benchmark',
    '-loglevel',
    'info',
    '-f',
    'rawvideo',
    '-pix_fmt',
    'yuv420p',
    '-s',
    `${width}x${height}`,
    '-r',
    String(FPS),
    '-i',
    raw,
    '-frames:v',
    String(frames),
    ...options,
    '-f',
    'null',
    '-',
  ];
  const started = performance.now();
  const run = spawnSync(args.ffmpeg, argv, { maxBuffer: 64 << 20 });
  const wallMs = performance.now() - started;
  const stderr = run.stderr.toString();
  if (run.status !== 0) throw new Error(`ffmpeg exited with ${run.status}: ${argv.join(' ')}\n${stderr.slice(-2000)}`);
  const bench = /bench: utime=([\d.]+)s stime=([\d.]+)s rtime=([\d.]+)s/.exec(stderr);
  const video = /video:(\d+)(?:kB|KiB)/.exec(stderr);
  return {
    wallMs,
    cpuMs: bench ? (Number(bench[1]) + Number(bench[2])) * 1000 : NaN,
    rtimeMs: bench ? Number(bench[3]) * 1000 : NaN,
    videoBytes: video ? Number(video[1]) * 1024 : NaN,
  };
}

interface CliResult {
  msPerFrame: number;
  /** The same from -benchmark's rtime (transcode only). */
  rtimeMsPerFrame: number;
  cpuMsPerFrame: number;
  bytesPerFrame: number;
  wallMs: { short: number; long: number };
}

function encodeWithCli(raw: string, width: number, height: number, options: readonly string[]): CliResult {
  const short = runCli(raw, width, height, SKIP, options);
  const long = runCli(raw, width, height, FRAMES, options);
  const n = FRAMES - SKIP;
  return {
    msPerFrame: (long.wallMs - short.wallMs) / n,
    rtimeMsPerFrame: (long.rtimeMs - short.rtimeMs) / n,
    cpuMsPerFrame: (long.cpuMs - short.cpuMs) / n,
    bytesPerFrame: (long.videoBytes - short.videoBytes) / n,
    wallMs: { short: short.wallMs, long: long.wallMs },
  };
}

interface Row {
  round: number;
  picture: Picture;
  resolution: Resolution;
  backend: string;
  bitrateKbps: number;
  node: NodeResult;
  /** Same build and options, synchronous calls on this thread. */
  direct: NodeResult;
  cli: CliResult | null;
  /** node-av ms/frame ÷ CLI ms/frame. */
  ratio: number | null;
}

// ---------------------------------------------------------------------------
// main
// ---------------------------------------------------------------------------

const f = (x: number | null | undefined, digits = 2): string =>
  x === null || x === undefined || Number.isNaN(x) ? '–' : x.toFixed(digits);

function cliAvailable(): string | null {
  if (args['no-cli']) return null;
  const run = spawnSync(args.ffmpeg, ['-hide_banner', '-version']);
  if (run.status !== 0) return null;
  return run.stdout.toString().split('\n')[0] ?? 'ffmpeg';
}

async function main(): Promise<void> {
  const info = runInfo();
  const cliVersion = cliAvailable();
  const nodeAv = getFFmpegInfo();
  const nodeVersions = await nodeAvEncoderVersions();
  process.stdout.write(
    `encoder-speed: ${ROUNDS} rounds × pictures {${PICTURES.join(', ')}} × {${RESOLUTION_LIST.join(', ')}} × {${BACKENDS.map((b) => b.name).join(', ')}}, ` +
      `${FRAMES} frames (timed from frame ${SKIP})\n` +
      `node-av: FFmpeg ${nodeAv.version} (libavcodec ${nodeAv.libraries.avcodec}); encoders ${JSON.stringify(nodeVersions)}\n` +
      `CLI: ${cliVersion ?? `none (${args['no-cli'] ? '--no-cli' : `${args.ffmpeg} not found`})`}\n${JSON.stringify(info)}\n`,
  );
  const dir = mkdtempSync(join(os.tmpdir(), 'arclight-encoder-speed-'));
  const rows: Row[] = [];
  let cliVersions: Record<string, string> | null = null;
  const commands: Record<string, string> = {};
  try {
    for (const picture of PICTURES) {
      for (const resolution of RESOLUTION_LIST) {
        const { width, height } = RESOLUTIONS[resolution];
        const drawer = new PictureDrawer(width, height, picture);
        const frameBytes = (width * height * 3) / 2;
        const all = new Uint8Array(frameBytes * FRAMES);
        for (let i = 0; i < FRAMES; i++) all.set(drawer.draw(i), i * frameBytes);
        const frames = Array.from({ length: FRAMES }, (_, i) => all.subarray(i * frameBytes, (i + 1) * frameBytes));
        const raw = join(dir, `${picture}-${width}x${height}.yuv`);
        if (cliVersion) {
          writeFileSync(raw, all);
          cliVersions ??= cliEncoderVersions(raw, width, height);
        }
        const bitrateKbps = defaultBitrateKbps(width, height);
        for (let round = 0; round < ROUNDS; round++) {
          for (const backend of BACKENDS) {
            const settings: EncoderSettings = { width, height, fps: FPS, bitrateKbps, h264Profile: 'constrained-baseline' };
            const options = cliOptions(backend, settings);
            commands[`${resolution} ${backend.name}`] =
              `ffmpeg -f rawvideo -pix_fmt yuv420p -s ${width}x${height} -r ${FPS} -i <raw> -frames:v N ${options.join(' ')} -f null -`;
            const node = await encodeWithNodeAv(backend, width, height, frames, bitrateKbps);
            const context = await openFfmpegEncoder(backend, settings);
            let direct: NodeResult;
            try {
              direct = encodeDirect(backend, context, width, height, frames);
            } finally {
              context.freeContext();
            }
            const cli = cliVersion ? encodeWithCli(raw, width, height, options) : null;
            const row: Row = {
              round: round + 1,
              picture,
              resolution,
              backend: backend.name,
              bitrateKbps,
              node,
              direct,
              cli,
              ratio: cli ? node.msPerFrame / cli.msPerFrame : null,
            };
            rows.push(row);
            process.stdout.write(
              `round ${round + 1} ${picture.padEnd(7)} ${resolution.padEnd(5)} ${backend.name.padEnd(8)} ` +
                `node-av ${f(node.msPerFrame)} ms/frame (CPU ${f(node.cpuMsPerFrame)}; call p50 ${f(node.callMs.p50)} p99 ${f(node.callMs.p99)}; ${f(node.bytesPerFrame / 1000, 1)} kB/frame)  direct ${f(direct.msPerFrame)} (CPU ${f(direct.cpuMsPerFrame)})` +
                (cli
                  ? `  | CLI ${f(cli.msPerFrame)} ms/frame (rtime ${f(cli.rtimeMsPerFrame)}, CPU ${f(cli.cpuMsPerFrame)}; ${f(cli.bytesPerFrame / 1000, 1)} kB/frame; wall ${cli.wallMs.short.toFixed(0)}/${cli.wallMs.long.toFixed(0)} ms)  ratio ${f(row.ratio)}`
                  : '') +
                `  loadavg ${loadavg().split(' ').slice(0, 3).join(' ')}\n`,
            );
          }
        }
        rmSync(raw, { force: true });
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const loadavgAfter = loadavg();

  process.stdout.write(`\nCLI encoders: ${JSON.stringify(cliVersions)}\n`);
  for (const [key, command] of Object.entries(commands)) process.stdout.write(`CLI ${key}: ${command}\n`);
  process.stdout.write('\n== ms per frame: median over rounds (spread min–max) ==\n');
  const line = (values: number[]): string => `${f(median(values))} (${f(Math.min(...values))}–${f(Math.max(...values))})`;
  for (const picture of PICTURES) {
    for (const resolution of RESOLUTION_LIST) {
      for (const backend of BACKENDS) {
        const rs = rows.filter((r) => r.picture === picture && r.resolution === resolution && r.backend === backend.name);
        const ratios = rs.map((r) => r.ratio).filter((r): r is number => r !== null);
        const ratio = ratios.length ? median(ratios) : null;
        process.stdout.write(
          `${picture.padEnd(7)} ${resolution.padEnd(5)} ${backend.name.padEnd(8)} node-av ${line(rs.map((r) => r.node.msPerFrame))}, CPU ${f(median(rs.map((r) => r.node.cpuMsPerFrame)))}` +
            `; direct ${line(rs.map((r) => r.direct.msPerFrame))} (VideoEncoder ÷ direct ${line(rs.map((r) => r.node.msPerFrame / r.direct.msPerFrame))})` +
            (ratios.length
              ? `; CLI ${line(rs.map((r) => r.cli!.msPerFrame))}, CPU ${f(median(rs.map((r) => r.cli!.cpuMsPerFrame)))}; ratio ${line(ratios)} → ${ratio! <= 1.15 ? 'MET' : 'NOT MET'} (≤ 1.15)` +
                `; kB/frame ${f(median(rs.map((r) => r.node.bytesPerFrame / 1000)), 1)} vs ${f(median(rs.map((r) => r.cli!.bytesPerFrame / 1000)), 1)}`
              : '') +
            '\n',
        );
      }
    }
  }
  finishReport(info, loadavgAfter, args.json, {
    nodeAv: { version: nodeAv.version, encoders: nodeVersions },
    cli: { version: cliVersion, encoders: cliVersions, commands },
    rows,
  });
}

await runBench('encoder-speed', main);
