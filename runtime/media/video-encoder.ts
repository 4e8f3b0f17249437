/**
 * Real-time video encoder over node-av (FFmpeg): libx264 for H.264, libvpx for VP8.
 *
 * Tuned for interactive streaming, not for archiving: one frame in gives its packet out in the
 * same call (no lookahead, no B-frames, no lag), keyframes come only when asked for (a new
 * subscriber, a PLI) and every H.264 IDR carries its own SPS/PPS so a viewer can join on it.
 *
 * The low-level CodecContext API is used throughout because node-av's high-level
 * `Encoder.encode*` resets `frame.pictType`, which is exactly the field that forces a keyframe.
 */
import os from 'node:os';
import { Codec, CodecContext, FFmpegError, Frame, Log, Packet, Rational } from 'node-av/lib';
import {
  AV_LOG_INFO,
  AV_LOG_WARNING,
  AV_PICTURE_TYPE_I,
  AV_PICTURE_TYPE_NONE,
  AV_PIX_FMT_RGBA,
  AV_PIX_FMT_YUV420P,
  AVCOL_RANGE_MPEG,
  AVCOL_SPC_SMPTE170M,
  AVERROR_EAGAIN,
  AVERROR_EOF,
  FF_ENCODER_LIBVPX_VP8,
  FF_ENCODER_LIBX264,
  FF_THREAD_SLICE,
} from 'node-av/constants';
import { FrameScaler } from './frame-scaler.ts';
import { assertFrameShape } from './frame-convert.ts';
import type { PixelFormat, VideoFrame } from './frames.ts';

/** Video codecs the runtime negotiates with browsers. */
export type VideoCodec = 'h264' | 'vp8';

export interface VideoEncoderOptions {
  readonly codec: VideoCodec;
  /** Encoded size; frames of another size are scaled to it. H.264 needs both even (4:2:0). */
  readonly width: number;
  readonly height: number;
  /** Nominal frame rate: sizes the rate-control budget per frame and the keyframe interval. */
  readonly fps: number;
  /** Target bitrate; defaults to 2500 kbps at 1280x720, scaled by pixel count. */
  readonly bitrateKbps?: number;
}

export interface EncodedVideoFrame {
  readonly codec: VideoCodec;
  /** H.264: one Annex-B access unit, start codes included. VP8: one VP8 frame. */
  readonly data: Buffer;
  /** H.264: an IDR (preceded by SPS/PPS). VP8: a key frame. */
  readonly keyframe: boolean;
  /** The source frame's `timestampUs`, or when `encode` was called if it had none. */
  readonly timestampUs: number;
}

export interface VideoEncoderStats {
  readonly framesIn: number;
  readonly packetsOut: number;
  readonly keyframesOut: number;
  /** Wall time of the last `encode` call: pixel copy/scale + encode + packet copy. */
  readonly lastEncodeMs: number;
}

/** Long GOP: keyframes are requested on demand, so periodic ones only cost bandwidth. */
const KEYFRAME_INTERVAL_S = 10;
const REFERENCE_PIXELS = 1280 * 720;
const REFERENCE_BITRATE_KBPS = 2500;

export class VideoEncoder {
  readonly #codec: VideoCodec;
  readonly #width: number;
  readonly #height: number;
  readonly #bitrateKbps: number;
  readonly #context: CodecContext;
  /** FFmpeg-owned yuv420p frame the encoder reads; allocated once and refilled every frame. */
  readonly #frame: Frame;
  readonly #packet: Packet;
  /** Staging frame + swscale context for RGBA input or input of another size; built lazily. */
  /** For input that is RGBA or another size: converted into #frame through a staging frame. */
  readonly #scaler = new FrameScaler();
  /** pts (frame counter) to source timestamp, so packets keep their frame's capture time. */
  readonly #timestamps = new Map<bigint, number>();
  #nextPts = 0n;
  #keyframeRequested = false;
  /** Serialises encodes: they share #frame and #packet, and FFmpeg contexts are not reentrant. */
  #queue: Promise<unknown> = Promise.resolve();
  #busy = false;
  #closed = false;
  #freed = false;
  #framesIn = 0;
  #packetsOut = 0;
  #keyframesOut = 0;
  #lastEncodeMs = 0;

  private constructor(options: Required<VideoEncoderOptions>, context: CodecContext, frame: Frame, packet: Packet) {
    this.#codec = options.codec;
    this.#width = options.width;
    this.#height = options.height;
    this.#bitrateKbps = options.bitrateKbps;
    this.#context = context;
    this.#frame = frame;
    this.#packet = packet;
  }

  static async create(options: VideoEncoderOptions): Promise<VideoEncoder> {
    const { codec, width, height, fps } = options;
    if (codec !== 'h264' && codec !== 'vp8') throw new RangeError(`unsupported video codec ${String(codec)}`);
    if (!Number.isInteger(width) || !Number.isInteger(height) || width <= 0 || height <= 0) {
      throw new RangeError(`invalid encoder size ${width}x${height}`);
    }
    if (codec === 'h264' && (width % 2 !== 0 || height % 2 !== 0)) {
      throw new RangeError(`h264 (4:2:0) needs an even width and height, got ${width}x${height}`);
    }
    if (!(fps > 0 && fps <= 240)) throw new RangeError(`invalid fps ${fps}`);
    const bitrateKbps = options.bitrateKbps ?? defaultBitrateKbps(width, height);
    if (!(bitrateKbps > 0)) throw new RangeError(`invalid bitrate ${bitrateKbps} kbps`);

    quietFfmpegInfoLogs();
    const encoderName = codec === 'h264' ? FF_ENCODER_LIBX264 : FF_ENCODER_LIBVPX_VP8;
    const encoder = Codec.findEncoderByName(encoderName);
    if (!encoder) throw new Error(`this FFmpeg build has no ${encoderName} encoder`);

    const context = new CodecContext();
    context.allocContext3(encoder);
    try {
      const bitsPerSecond = BigInt(Math.round(bitrateKbps * 1000));
      const rate = frameRate(fps);
      context.width = width;
      context.height = height;
      context.pixelFormat = AV_PIX_FMT_YUV420P;
      // The pts is a frame counter, so the time base is one frame; rate control then budgets
      // bitrate/fps per frame regardless of jitter in when frames actually arrive.
      context.timeBase = new Rational(rate.den, rate.num);
      context.framerate = new Rational(rate.num, rate.den);
      // Always explicit: unset, libx264 falls back to CRF (no rate cap at all) and libvpx to
      // 256 kbps (node-av's high-level Encoder would pick 1 Mbps).
      context.bitRate = bitsPerSecond;
      context.gopSize = Math.max(1, Math.round(fps * KEYFRAME_INTERVAL_S));
      context.maxBFrames = 0;
      context.threadCount = encoderThreads(codec, width, height, os.availableParallelism());
      context.threadType = FF_THREAD_SLICE;
      // frame-convert.ts and swscale both produce BT.601 limited range; say so in the bitstream.
      context.colorRange = AVCOL_RANGE_MPEG;
      context.colorSpace = AVCOL_SPC_SMPTE170M;
      if (codec === 'h264') configureX264(context, width, height, fps, bitsPerSecond);
      else configureLibvpx(context, fps, bitsPerSecond);

      FFmpegError.throwIfError(await context.open2(encoder, null), `open ${codec} encoder`);

      const frame = new Frame();
      frame.alloc();
      frame.format = AV_PIX_FMT_YUV420P;
      frame.width = width;
      frame.height = height;
      FFmpegError.throwIfError(frame.allocBuffer(), 'allocate encoder frame');
      const packet = new Packet();
      packet.alloc();
      return new VideoEncoder({ codec, width, height, fps, bitrateKbps }, context, frame, packet);
    } catch (error) {
      context.freeContext();
      throw error;
    }
  }

  get codec(): VideoCodec {
    return this.#codec;
  }

  get width(): number {
    return this.#width;
  }

  get height(): number {
    return this.#height;
  }

  get bitrateKbps(): number {
    return this.#bitrateKbps;
  }

  get stats(): VideoEncoderStats {
    return {
      framesIn: this.#framesIn,
      packetsOut: this.#packetsOut,
      keyframesOut: this.#keyframesOut,
      lastEncodeMs: this.#lastEncodeMs,
    };
  }

  /** Makes the next encoded frame a keyframe (an IDR with SPS/PPS for H.264). */
  requestKeyframe(): void {
    this.#keyframeRequested = true;
  }

  /**
   * Encodes one frame and returns its packet (zero-latency encoders give exactly one).
   * The pixels are copied before this resolves, so the caller may reuse `frame.data` at once.
   */
  encode(frame: VideoFrame): Promise<EncodedVideoFrame[]> {
    const run = this.#queue.then(() => this.#encodeNow(frame));
    this.#queue = run.catch(() => undefined);
    return run;
  }

  /** Frees the FFmpeg contexts. Idempotent; later `encode` calls reject. */
  close(): void {
    this.#closed = true;
    // An encode running on a worker thread still uses the contexts; it frees them when it ends.
    if (!this.#busy) this.#free();
  }

  async #encodeNow(frame: VideoFrame): Promise<EncodedVideoFrame[]> {
    if (this.#closed) throw new Error(`${this.#codec} VideoEncoder is closed`);
    assertFrameShape(frame);
    this.#busy = true;
    try {
      const started = performance.now();
      const timestampUs = frame.timestampUs ?? Math.round(started * 1000);
      await this.#fill(frame);

      const pts = this.#nextPts++;
      this.#timestamps.set(pts, timestampUs);
      const forceKeyframe = this.#keyframeRequested;
      this.#keyframeRequested = false;
      // Honoured by libx264 (as an IDR, since forced-idr is on) and libvpx (VPX_EFLAG_FORCE_KF).
      this.#frame.pictType = forceKeyframe ? AV_PICTURE_TYPE_I : AV_PICTURE_TYPE_NONE;
      this.#frame.pts = pts;
      this.#framesIn++;

      const out: EncodedVideoFrame[] = [];
      try {
        let sent = await this.#context.sendFrame(this.#frame);
        if (sent === AVERROR_EAGAIN) {
          // Only if the encoder holds undelivered packets: drain them, then offer the frame once more.
          await this.#drain(out);
          sent = await this.#context.sendFrame(this.#frame);
        }
        FFmpegError.throwIfError(sent, `${this.#codec} sendFrame`);
        await this.#drain(out);
      } catch (error) {
        if (forceKeyframe) this.#keyframeRequested = true;
        this.#timestamps.delete(pts);
        throw error;
      }
      this.#lastEncodeMs = performance.now() - started;
      return out;
    } finally {
      this.#busy = false;
      if (this.#closed) this.#free();
    }
  }

  async #drain(out: EncodedVideoFrame[]): Promise<void> {
    for (;;) {
      const received = await this.#context.receivePacket(this.#packet);
      if (received === AVERROR_EAGAIN || received === AVERROR_EOF) return;
      FFmpegError.throwIfError(received, `${this.#codec} receivePacket`);
      // node-av's Packet.data getter returns a copy, so the Buffer outlives unref().
      const data = this.#packet.data;
      const keyframe = this.#packet.isKeyframe;
      const pts = this.#packet.pts;
      this.#packet.unref();
      if (!data) continue;
      const timestampUs = this.#timestamps.get(pts) ?? Math.round(performance.now() * 1000);
      for (const key of this.#timestamps.keys()) {
        if (key > pts) break;
        this.#timestamps.delete(key);
      }
      this.#packetsOut++;
      if (keyframe) this.#keyframesOut++;
      out.push({ codec: this.#codec, data, keyframe, timestampUs });
    }
  }

  /** Copies (and if needed converts/scales) the caller's pixels into the FFmpeg-owned frame. */
  async #fill(frame: VideoFrame): Promise<void> {
    // The encoder may still reference the buffer (av_frame_ref on send); writing into a
    // shared buffer would change a picture it has not finished with, so get a private one.
    FFmpegError.throwIfError(this.#frame.makeWritable(), 'make encoder frame writable');
    if (frame.format === 'i420' && frame.width === this.#width && frame.height === this.#height) {
      copyPackedIntoFrame(frame, this.#frame);
      return;
    }
    const conversion = this.#scaler.prepare(
      { format: frame.format === 'rgba' ? AV_PIX_FMT_RGBA : AV_PIX_FMT_YUV420P, width: frame.width, height: frame.height },
      { format: AV_PIX_FMT_YUV420P, width: this.#width, height: this.#height },
      'source',
    );
    FFmpegError.throwIfError(conversion.staging.makeWritable(), 'make staging frame writable');
    copyPackedIntoFrame(frame, conversion.staging);
    FFmpegError.throwIfError(await conversion.scaler.scaleFrame(this.#frame, conversion.staging), 'swscale');
  }

  #free(): void {
    if (this.#freed) return;
    this.#freed = true;
    this.#scaler.free();
    this.#context.freeContext();
    this.#frame.free();
    this.#packet.free();
    this.#timestamps.clear();
  }
}

/**
 * x264: sliced threads split each frame across cores without frame threading's one-frame-per-
 * thread delay, and they wait on condition variables; more than four buys little at these sizes.
 * libvpx VP8: its row threads spin-wait on each other, which on a busy 2-core box turned 5 ms
 * encodes into 170 ms stalls; so WebRTC's rule: a second thread only above 640x480 with 3+ cores.
 */
function encoderThreads(codec: VideoCodec, width: number, height: number, cores: number): number {
  if (codec === 'h264') return Math.max(1, Math.min(4, cores));
  const pixels = width * height;
  if (pixels > 1280 * 960 && cores >= 6) return 3;
  if (pixels > 640 * 480 && cores >= 3) return 2;
  return 1;
}

function defaultBitrateKbps(width: number, height: number): number {
  const scaled = (REFERENCE_BITRATE_KBPS * width * height) / REFERENCE_PIXELS;
  return Math.round(Math.min(20_000, Math.max(150, scaled)));
}

/** fps as a rational; NTSC-style rates (29.97) keep three decimals. */
function frameRate(fps: number): { num: number; den: number } {
  return Number.isInteger(fps) ? { num: fps, den: 1 } : { num: Math.round(fps * 1000), den: 1000 };
}

function setOptions(context: CodecContext, options: Record<string, string | number>): void {
  for (const [name, value] of Object.entries(options)) {
    // A misspelt option is silently ignored by FFmpeg; fail loudly instead.
    FFmpegError.throwIfError(context.setOption(name, value), `set encoder option ${name}=${value}`);
  }
}

function configureX264(context: CodecContext, width: number, height: number, fps: number, bitsPerSecond: bigint): void {
  // VBV capped at the target: near-CBR so the network sees a steady rate; a half-second buffer
  // leaves room for an on-demand IDR without letting bursts build latency.
  context.rcMaxRate = bitsPerSecond;
  context.rcBufferSize = Number(bitsPerSecond / 2n);
  context.level = h264Level(width, height, fps);
  setOptions(context, {
    preset: 'ultrafast',
    tune: 'zerolatency',
    // x264 signals this as profile_idc 66 + constraint_set1 (42c0xx): Constrained Baseline,
    // which every browser's WebRTC stack decodes (same profile as the SDP's 42e01f).
    profile: 'baseline',
    // Makes a frame sent with pictType I an IDR, not a mere I-frame a joiner cannot start on.
    'forced-idr': 1,
    // repeat-headers puts SPS/PPS before every IDR; annexb gives start codes, as RTP packetisers want.
    'x264-params': 'repeat-headers=1:annexb=1:scenecut=0:sliced-threads=1:sync-lookahead=0:rc-lookahead=0',
  });
}

function configureLibvpx(context: CodecContext, fps: number, bitsPerSecond: bigint): void {
  // min == max == target selects libvpx's CBR mode, the one WebRTC uses.
  context.rcMinRate = bitsPerSecond;
  context.rcMaxRate = bitsPerSecond;
  context.rcBufferSize = Number(bitsPerSecond); // 1000 ms, as WebRTC
  context.qMin = 2;
  context.qMax = 56;
  setOptions(context, {
    rc_init_occupancy: Number(bitsPerSecond / 2n), // 500 ms
    deadline: 'realtime',
    // Fastest realtime speed step; quality at these bitrates is still fine for live video.
    'cpu-used': 12,
    // Any lag would hold frames back and break one-in-one-out.
    'lag-in-frames': 0,
    'auto-alt-ref': 0,
    'error-resilient': 'default',
    'noise-sensitivity': 0,
    'static-thresh': 1,
    'undershoot-pct': 100,
    'overshoot-pct': 15,
    // Caps keyframe size relative to an average frame (WebRTC's formula), so an on-demand
    // keyframe does not stall the pacer.
    'max-intra-rate': Math.max(300, Math.round((600 * 0.5 * fps) / 10)),
  });
}

/** Smallest H.264 level (at least 3.1, what browsers' SDP offers) that fits the frame size and rate. */
function h264Level(width: number, height: number, fps: number): number {
  const macroblocks = Math.ceil(width / 16) * Math.ceil(height / 16);
  const perSecond = macroblocks * fps;
  const levels: ReadonlyArray<readonly [level: number, maxFrameMbs: number, maxMbsPerSecond: number]> = [
    [31, 3600, 108_000],
    [32, 5120, 216_000],
    [40, 8192, 245_760],
    [42, 8704, 522_240],
    [50, 22_080, 589_824],
    [51, 36_864, 983_040],
    [52, 36_864, 2_073_600],
  ];
  for (const [level, maxFrameMbs, maxMbsPerSecond] of levels) {
    if (macroblocks <= maxFrameMbs && perSecond <= maxMbsPerSecond) return level;
  }
  return 52;
}

/**
 * Copies a tightly packed frame into an FFmpeg frame of the same format and size, row by row,
 * because FFmpeg pads each row to its linesize (e.g. 642 wide -> 704 bytes).
 */
function copyPackedIntoFrame(frame: VideoFrame, target: Frame): void {
  const planes = target.data;
  const strides = target.linesize;
  if (!planes) throw new Error('encoder frame has no buffers');
  const { width, height, data } = frame;
  if (frame.format === 'rgba') {
    copyRows(data, 0, width * 4, planes[0]!, strides[0]!, height);
    return;
  }
  const chromaWidth = Math.ceil(width / 2);
  const chromaHeight = Math.ceil(height / 2);
  const uOffset = width * height;
  const vOffset = uOffset + chromaWidth * chromaHeight;
  copyRows(data, 0, width, planes[0]!, strides[0]!, height);
  copyRows(data, uOffset, chromaWidth, planes[1]!, strides[1]!, chromaHeight);
  copyRows(data, vOffset, chromaWidth, planes[2]!, strides[2]!, chromaHeight);
}

function copyRows(
  source: Uint8Array,
  sourceOffset: number,
  rowBytes: number,
  target: Uint8Array,
  targetStride: number,
  rows: number,
): void {
  if (targetStride === rowBytes) {
    target.set(source.subarray(sourceOffset, sourceOffset + rowBytes * rows));
    return;
  }
  for (let row = 0; row < rows; row++) {
    const start = sourceOffset + row * rowBytes;
    target.set(source.subarray(start, start + rowBytes), row * targetStride);
  }
}

let ffmpegLogsQuieted = false;

/**
 * FFmpeg logs globally and at INFO prints a banner per encoder open plus a stats block per
 * close. Lower it to WARNING once, unless someone already chose a quieter level.
 */
function quietFfmpegInfoLogs(): void {
  if (ffmpegLogsQuieted) return;
  ffmpegLogsQuieted = true;
  if (Log.getLevel() >= AV_LOG_INFO) Log.setLevel(AV_LOG_WARNING);
}
