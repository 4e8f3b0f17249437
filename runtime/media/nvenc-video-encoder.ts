/**
 * A VideoEncoder on Arclight's own NVENC binding (native/src/nvenc/): H.264 and H.265 on an NVIDIA
 * GPU with the low-latency settings FFmpeg's wrapper does not all expose (ultra-low-latency tuning,
 * per-frame forced IDR, bitrate changes without re-initialising, intra refresh), and frames that
 * are already in GPU memory encoded without a host copy (`encodeCuda`).
 *
 * Host frames go in as I420 of the encoder's size; frames of another size or RGBA are converted
 * with swscale first, as the FFmpeg encoders do. Encodes run on libuv's thread pool in the addon,
 * so the event loop never waits on the GPU.
 */
import { FFmpegError, Frame } from 'node-av/lib';
import { AV_PIX_FMT_RGBA, AV_PIX_FMT_YUV420P } from 'node-av/constants';
import { nativeAddon, nativeAddonStatus, type CudaFrame, type NvencEncoder, type NvencEncoderOptions } from '../native/native-addon.ts';
import { assertFrameShape } from './frame-convert.ts';
import { FrameScaler } from './frame-scaler.ts';
import { noteVideoEncoderFreed, noteVideoEncoderOpened } from './open-encoders.ts';
import type { VideoFrame } from './frames.ts';
import type { CheckedEncoderOptions, EncodedVideoFrame, EncoderBackend, VideoCodec, VideoEncoderStats } from './video-encoder.ts';

/** NVENC settings for interactive streaming: the fastest presets still beat x264 ultrafast. */
const STREAMING_SETTINGS = {
  rateControl: 'cbr',
  preset: 2,
  tuning: 'ultra-low-latency',
  vbvMs: 500,
} as const satisfies Partial<NvencEncoderOptions>;

export class NvencVideoEncoder {
  readonly #options: CheckedEncoderOptions;
  readonly #native: NvencEncoder;
  readonly #scaler = new FrameScaler();
  /** The scaler's output, packed into #packed for the addon. */
  #scaled: Frame | undefined;
  #packed: Uint8Array | undefined;
  #bitrateKbps: number;
  #keyframeRequested = false;
  #queue: Promise<unknown> = Promise.resolve();
  #closed = false;
  #framesIn = 0;
  #packetsOut = 0;
  #keyframesOut = 0;
  #lastEncodeMs = 0;

  private constructor(options: CheckedEncoderOptions, native: NvencEncoder) {
    this.#options = options;
    this.#native = native;
    this.#bitrateKbps = options.bitrateKbps;
    noteVideoEncoderOpened();
  }

  /** Opens an NVENC session for settings `VideoEncoder.create` has checked. */
  static async open(options: CheckedEncoderOptions): Promise<NvencVideoEncoder> {
    const addon = nativeAddon();
    if (!addon) throw new Error(`the native addon is not loaded: ${nativeAddonStatus().reason ?? 'unknown reason'}`);
    if (options.codec === 'vp8') throw new RangeError('NVENC does not encode VP8');
    const native = await addon.openNvencEncoder({
      codec: options.codec,
      width: options.width,
      height: options.height,
      fps: Math.round(options.fps),
      bitrateKbps: Math.round(options.bitrateKbps),
      input: 'i420',
      ...STREAMING_SETTINGS,
      ...(options.codec === 'h264' ? { profile: options.h264Profile } : {}),
    });
    return new NvencVideoEncoder(options, native);
  }

  get codec(): VideoCodec {
    return this.#options.codec;
  }

  get width(): number {
    return this.#options.width;
  }

  get height(): number {
    return this.#options.height;
  }

  get bitrateKbps(): number {
    return this.#bitrateKbps;
  }

  get backend(): EncoderBackend {
    return this.#options.backend;
  }

  get stats(): VideoEncoderStats {
    return {
      framesIn: this.#framesIn,
      packetsOut: this.#packetsOut,
      keyframesOut: this.#keyframesOut,
      lastEncodeMs: this.#lastEncodeMs,
      // Every NVENC encode runs on the thread pool.
      threadPoolEncodes: this.#framesIn,
    };
  }

  /** NVENC reconfigures the session in place: no IDR, the VBV keeps its length in time. */
  setBitrate(kbps: number): void {
    if (!(kbps > 0)) throw new RangeError(`invalid bitrate ${kbps} kbps`);
    if (this.#closed || Math.round(kbps) === Math.round(this.#bitrateKbps)) return;
    this.#native.setBitrate(Math.round(kbps));
    this.#bitrateKbps = kbps;
  }

  requestKeyframe(): void {
    this.#keyframeRequested = true;
  }

  encode(frame: VideoFrame): Promise<EncodedVideoFrame[]> {
    return this.#serialised(() => {
      assertFrameShape(frame);
      return this.#encodeNow(this.#hostPixels(frame), frame.timestampUs);
    });
  }

  /**
   * Encodes a frame that is already in the encoder's GPU memory (NV12, I420, BGRA or RGBA at the
   * encoder's size): nothing crosses to the host. The buffer must stay as it is until this resolves.
   */
  encodeCuda(frame: CudaFrame, timestampUs?: number): Promise<EncodedVideoFrame[]> {
    return this.#serialised(() => this.#encodeNow(frame, timestampUs));
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    // The addon frees the session after an encode in flight.
    this.#native.close();
    noteVideoEncoderFreed();
    this.#scaler.free();
    this.#scaled?.free();
    this.#scaled = undefined;
  }

  #serialised(run: () => Promise<EncodedVideoFrame[]>): Promise<EncodedVideoFrame[]> {
    const next = this.#queue.then(() => {
      if (this.#closed) throw new Error(`${this.codec} NVENC encoder is closed`);
      return run();
    });
    this.#queue = next.catch(() => undefined);
    return next;
  }

  async #encodeNow(input: Uint8Array | CudaFrame, timestampUs: number | undefined): Promise<EncodedVideoFrame[]> {
    const started = performance.now();
    const forceIdr = this.#keyframeRequested;
    this.#keyframeRequested = false;
    this.#framesIn++;
    let picture;
    try {
      picture = await this.#native.encode(input, forceIdr, Math.max(0, Math.round(timestampUs ?? started * 1000)));
    } catch (error) {
      // The frame was not taken: the keyframe request carries over.
      if (forceIdr) this.#keyframeRequested = true;
      throw error;
    }
    this.#lastEncodeMs = performance.now() - started;
    if (picture.data.length === 0) return [];
    this.#packetsOut++;
    if (picture.keyframe) this.#keyframesOut++;
    return [{ codec: this.codec, data: picture.data, keyframe: picture.keyframe, timestampUs: picture.timestampUs }];
  }

  /** I420 of the encoder's size, packed: the frame itself when it already is, else converted. */
  #hostPixels(frame: VideoFrame): Uint8Array {
    const { width, height } = this.#options;
    if (frame.format === 'i420' && frame.width === width && frame.height === height) return frame.data;
    const conversion = this.#scaler.prepare(
      { format: frame.format === 'rgba' ? AV_PIX_FMT_RGBA : AV_PIX_FMT_YUV420P, width: frame.width, height: frame.height },
      { format: AV_PIX_FMT_YUV420P, width, height },
      'source',
    );
    FFmpegError.throwIfError(conversion.staging.makeWritable(), 'make staging frame writable');
    writePlanes(frame, conversion.staging);
    if (!this.#scaled) {
      const scaled = new Frame();
      scaled.alloc();
      scaled.format = AV_PIX_FMT_YUV420P;
      scaled.width = width;
      scaled.height = height;
      FFmpegError.throwIfError(scaled.allocBuffer(), 'allocate NVENC staging frame');
      this.#scaled = scaled;
    }
    FFmpegError.throwIfError(conversion.scaler.scaleFrameSync(this.#scaled, conversion.staging), 'swscale');
    this.#packed ??= new Uint8Array(width * height + 2 * (width / 2) * (height / 2));
    readPlanes(this.#scaled, width, height, this.#packed);
    return this.#packed;
  }
}

/** Plane geometry of a packed frame: [offset, row bytes, rows] per plane. */
function packedPlanes(format: VideoFrame['format'], width: number, height: number): [number, number, number][] {
  if (format === 'rgba') return [[0, width * 4, height]];
  const cw = Math.ceil(width / 2);
  const ch = Math.ceil(height / 2);
  return [
    [0, width, height],
    [width * height, cw, ch],
    [width * height + cw * ch, cw, ch],
  ];
}

/** Packed pixels into an FFmpeg frame whose rows are `linesize` apart. */
function writePlanes(frame: VideoFrame, target: Frame): void {
  const planes = target.data;
  const strides = target.linesize;
  if (!planes) throw new Error('staging frame has no buffers');
  packedPlanes(frame.format, frame.width, frame.height).forEach(([offset, rowBytes, rows], i) => {
    for (let row = 0; row < rows; row++) {
      const start = offset + row * rowBytes;
      planes[i]!.set(frame.data.subarray(start, start + rowBytes), row * strides[i]!);
    }
  });
}

/** An FFmpeg yuv420p frame into packed I420. */
function readPlanes(source: Frame, width: number, height: number, out: Uint8Array): void {
  const planes = source.data;
  const strides = source.linesize;
  if (!planes) throw new Error('scaled frame has no buffers');
  packedPlanes('i420', width, height).forEach(([offset, rowBytes, rows], i) => {
    for (let row = 0; row < rows; row++) {
      out.set(planes[i]!.subarray(row * strides[i]!, row * strides[i]! + rowBytes), offset + row * rowBytes);
    }
  });
}
