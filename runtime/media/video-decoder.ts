/**
 * Video decoder over node-av (FFmpeg's native h264, hevc and vp8 decoders) for inbound tracks.
 *
 * Output is always tightly packed `i420`, copied out of FFmpeg memory, so frames stay valid
 * however long the caller keeps them. Configured for latency: no frame threading (it would
 * hold back one frame per thread) and LOW_DELAY, so each access unit yields its picture at once.
 */
import os from 'node:os';
import { Codec, CodecContext, FFmpegError, Frame, Log, Packet } from 'node-av/lib';
import {
  AV_CODEC_FLAG_LOW_DELAY,
  AV_CODEC_ID_H264,
  AV_CODEC_ID_HEVC,
  AV_CODEC_ID_VP8,
  AV_LOG_INFO,
  AV_LOG_WARNING,
  AV_PIX_FMT_YUV420P,
  AVERROR_EAGAIN,
  AVERROR_EOF,
  FF_THREAD_SLICE,
  type AVCodecID,
  type AVPixelFormat,
} from 'node-av/constants';
import { FrameScaler } from './frame-scaler.ts';
import type { VideoFrame } from './frames.ts';
import type { VideoCodec } from './video-encoder.ts';

const DECODER_IDS: Readonly<Record<VideoCodec, AVCodecID>> = {
  h264: AV_CODEC_ID_H264,
  h265: AV_CODEC_ID_HEVC,
  vp8: AV_CODEC_ID_VP8,
};

export class VideoDecoder {
  readonly #codec: VideoCodec;
  readonly #context: CodecContext;
  readonly #packet: Packet;
  /** Receives decoded pictures; its buffers belong to the decoder and are copied out at once. */
  readonly #decoded: Frame;
  /** For decoders that output something other than yuv420p (e.g. yuvj420p, 4:4:4 streams). */
  readonly #scaler = new FrameScaler();
  #nextPts = 0n;
  readonly #timestamps = new Map<bigint, number | undefined>();
  /** Serialises decodes: they share #packet and #decoded, and FFmpeg contexts are not reentrant. */
  #queue: Promise<unknown> = Promise.resolve();
  #busy = false;
  #closed = false;
  #freed = false;

  private constructor(codec: VideoCodec, context: CodecContext, packet: Packet, decoded: Frame) {
    this.#codec = codec;
    this.#context = context;
    this.#packet = packet;
    this.#decoded = decoded;
  }

  static async create(codec: VideoCodec): Promise<VideoDecoder> {
    if (!Object.hasOwn(DECODER_IDS, codec)) throw new RangeError(`unsupported video codec ${String(codec)}`);
    const id = DECODER_IDS[codec];
    quietFfmpegInfoLogs();
    const decoder = Codec.findDecoder(id);
    if (!decoder) throw new Error(`this FFmpeg build has no ${codec} decoder`);
    const context = new CodecContext();
    context.allocContext3(decoder);
    try {
      context.setFlags(AV_CODEC_FLAG_LOW_DELAY);
      context.threadType = FF_THREAD_SLICE;
      context.threadCount = Math.max(1, Math.min(4, os.availableParallelism()));
      FFmpegError.throwIfError(await context.open2(decoder, null), `open ${codec} decoder`);
    } catch (error) {
      context.freeContext();
      throw error;
    }
    const packet = new Packet();
    packet.alloc();
    const decoded = new Frame();
    decoded.alloc();
    return new VideoDecoder(codec, context, packet, decoded);
  }

  get codec(): VideoCodec {
    return this.#codec;
  }

  /**
   * Decodes one access unit (H.264/H.265 Annex-B) or one VP8 frame. Resolves the pictures it
   * completes, usually one; none for a parameter-set-only unit. Rejects on data the decoder
   * reports as invalid, such as a delta frame before any keyframe. (FFmpeg's hevc decoder is more
   * lenient: it skips NAL units it cannot use, e.g. slices before any VPS/SPS/PPS, and resolves with
   * no pictures; only input without a start code rejects.)
   */
  decode(data: Buffer, timestampUs?: number): Promise<VideoFrame[]> {
    const run = this.#queue.then(() => this.#decodeNow(data, timestampUs));
    this.#queue = run.catch(() => undefined);
    return run;
  }

  /** Frees the FFmpeg contexts. Idempotent; later `decode` calls reject. */
  close(): void {
    this.#closed = true;
    if (!this.#busy) this.#free();
  }

  async #decodeNow(data: Buffer, timestampUs: number | undefined): Promise<VideoFrame[]> {
    if (this.#closed) throw new Error(`${this.#codec} VideoDecoder is closed`);
    // An empty packet means "flush" to FFmpeg and would put the decoder into draining mode.
    if (data.length === 0) throw new Error(`${this.#codec} decode: empty packet`);
    this.#busy = true;
    try {
      const pts = this.#nextPts++;
      this.#packet.data = data; // node-av copies into a new AVPacket buffer
      this.#packet.pts = pts;
      this.#timestamps.set(pts, timestampUs);
      const out: VideoFrame[] = [];
      let sent: number;
      try {
        sent = await this.#context.sendPacket(this.#packet);
        if (sent === AVERROR_EAGAIN) {
          // Only if pictures are waiting to be received: take them, then offer the packet once more.
          await this.#drain(out);
          sent = await this.#context.sendPacket(this.#packet);
        }
      } finally {
        this.#packet.unref();
      }
      if (sent < 0) {
        this.#timestamps.delete(pts);
        throw new Error(`${this.#codec} decode failed: ${FFmpegError.strerror(sent)} (${sent})`);
      }
      await this.#drain(out);
      return out;
    } finally {
      this.#busy = false;
      if (this.#closed) this.#free();
    }
  }

  async #drain(out: VideoFrame[]): Promise<void> {
    for (;;) {
      const received = await this.#context.receiveFrame(this.#decoded);
      if (received === AVERROR_EAGAIN || received === AVERROR_EOF) return;
      if (received < 0) {
        throw new Error(`${this.#codec} decode failed: ${FFmpegError.strerror(received)} (${received})`);
      }
      try {
        const pts = this.#decoded.pts;
        const timestampUs = this.#timestamps.get(pts);
        for (const key of this.#timestamps.keys()) {
          if (key > pts) break;
          this.#timestamps.delete(key);
        }
        out.push(await this.#copyOut(timestampUs));
      } finally {
        this.#decoded.unref();
      }
    }
  }

  async #copyOut(timestampUs: number | undefined): Promise<VideoFrame> {
    let picture = this.#decoded;
    const { width, height } = picture;
    if ((picture.format as AVPixelFormat) !== AV_PIX_FMT_YUV420P) {
      const conversion = this.#scaler.prepare(
        { format: picture.format as AVPixelFormat, width, height },
        { format: AV_PIX_FMT_YUV420P, width, height },
        'target',
      );
      FFmpegError.throwIfError(conversion.staging.makeWritable(), 'make conversion frame writable');
      FFmpegError.throwIfError(await conversion.scaler.scaleFrame(conversion.staging, picture), 'swscale');
      picture = conversion.staging;
    }
    const planes = picture.data;
    const strides = picture.linesize;
    if (!planes) throw new Error(`${this.#codec} decoder returned a frame without data`);
    const chromaWidth = Math.ceil(width / 2);
    const chromaHeight = Math.ceil(height / 2);
    const lumaSize = width * height;
    const chromaSize = chromaWidth * chromaHeight;
    const data = new Uint8Array(lumaSize + 2 * chromaSize);
    copyRowsOut(planes[0]!, strides[0]!, width, height, data, 0);
    copyRowsOut(planes[1]!, strides[1]!, chromaWidth, chromaHeight, data, lumaSize);
    copyRowsOut(planes[2]!, strides[2]!, chromaWidth, chromaHeight, data, lumaSize + chromaSize);
    return timestampUs === undefined ? { width, height, format: 'i420', data } : { width, height, format: 'i420', data, timestampUs };
  }

  #free(): void {
    if (this.#freed) return;
    this.#freed = true;
    this.#scaler.free();
    this.#context.freeContext();
    this.#packet.free();
    this.#decoded.free();
    this.#timestamps.clear();
  }
}

/** Copies a plane out of FFmpeg memory, dropping the per-row padding up to its linesize. */
function copyRowsOut(
  source: Uint8Array,
  sourceStride: number,
  rowBytes: number,
  rows: number,
  target: Uint8Array,
  targetOffset: number,
): void {
  if (sourceStride === rowBytes) {
    target.set(source.subarray(0, rowBytes * rows), targetOffset);
    return;
  }
  for (let row = 0; row < rows; row++) {
    const start = row * sourceStride;
    target.set(source.subarray(start, start + rowBytes), targetOffset + row * rowBytes);
  }
}

let ffmpegLogsQuieted = false;

/** FFmpeg logs globally; drop INFO chatter once unless someone already chose a quieter level. */
function quietFfmpegInfoLogs(): void {
  if (ffmpegLogsQuieted) return;
  ffmpegLogsQuieted = true;
  if (Log.getLevel() >= AV_LOG_INFO) Log.setLevel(AV_LOG_WARNING);
}
