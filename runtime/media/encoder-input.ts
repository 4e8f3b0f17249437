/**
 * One paced frame as a track's stream encoders and its frame tap read it. A frame in host memory
 * is read as it is. A CUDA frame's pooled device copy goes straight to an encoder that reads GPU
 * memory (NVENC, at the frame's size); anything else reading it — a software or VP8 encoder, the
 * recorder's tap — shares one host copy, made on the thread pool when first asked for (the event
 * loop keeps serving while the GPU copy runs) and timed in /metrics. That copy is already I420:
 * the addon converts RGBA/BGRA device frames on its worker thread (cuda-frames.ts).
 *
 * An RGBA frame in host memory is converted to I420 here, once, by the native addon's converter
 * (colour-convert.ts), and every encoder and the tap read that one I420 frame — instead of each
 * encoder converting the RGBA with swscale itself, which with an H.264 viewer, a VP8 viewer and
 * the recorder converted each frame three times, each 8–11× slower than the native converter
 * (docs/performance.md, "Colour conversion (issue 6)" and "RGBA converted once (issue 26 part
 * 3)"). Counted in `arclight_video_frames_converted_total`. Without the addon the RGBA frame is
 * handed on as before and the encoders convert it with swscale: colour-convert.ts's JavaScript
 * fallback (float64, 20–30× slower than native) is never used on this per-frame path.
 *
 * The converted pixels are not pooled on their own: they belong to the queued RGBA buffer they
 * were made from (the track's FramePool, video-frame-queue.ts) and are reused when that buffer is.
 * The pool hands a buffer out again only after the pacer's send of its frame has settled (every
 * encode awaited — encoders read the pixels before `encode()` resolves — and the tap, which copies
 * what it keeps, called), which is exactly when nothing reads its I420 any more either.
 */
import type { RuntimeMetrics } from '../metrics.ts';
import { nativeAddon } from '../native/native-addon.ts';
import { convertToYuv, yuvByteLength } from './colour-convert.ts';
import { cudaEncoderInput, downloadCudaFrame } from './cuda-frames.ts';
import type { VideoFrame } from './frames.ts';
import type { EncodedVideoFrame, StreamVideoEncoder } from './video-encoder.ts';
import { cudaCopyOf, type QueuedFrame } from './video-frame-queue.ts';

/**
 * Each queued RGBA buffer's I420 conversion, reused with it (see the top of the file). Weak: a
 * buffer the pool lets go of takes its conversion with it.
 */
const convertedPixels = new WeakMap<Uint8Array, Uint8Array>();

/** Benchmarks' A/B switch (bench/rgba-fanout.ts): false hands RGBA to the encoders, as without the addon. */
let convertRgbaOnce = true;

/**
 * Whether host RGBA frames are converted once here (true, the default, when the addon is built) or
 * handed to each encoder as RGBA (false: each converts with swscale — the path without the addon).
 * For benchmarks and tests that compare the two; the runtime never calls it.
 */
export function setConvertRgbaOnce(enabled: boolean): void {
  convertRgbaOnce = enabled;
}

export class EncoderInput {
  readonly #frame: QueuedFrame;
  readonly #track: string;
  readonly #metrics: RuntimeMetrics | undefined;
  #host: Promise<VideoFrame> | undefined;

  constructor(frame: QueuedFrame, track: string, metrics: RuntimeMetrics | undefined) {
    this.#frame = frame;
    this.#track = track;
    this.#metrics = metrics;
    this.#host = cudaCopyOf(frame) || frame.format === 'rgba' ? undefined : Promise.resolve(frame);
  }

  /**
   * The frame in host memory: itself, its I420 conversion (an RGBA frame, with the addon), or its
   * one host copy (a CUDA frame). Made once, on the first call. Rejects if the GPU copy fails.
   */
  host(): Promise<VideoFrame> {
    this.#host ??= cudaCopyOf(this.#frame) ? this.#download() : Promise.resolve(this.#convertedOnce());
    return this.#host;
  }

  /**
   * The encode of this frame from GPU memory, when `encoder` reads frames there at this size;
   * undefined when it must be given the host copy.
   */
  gpuEncode(encoder: StreamVideoEncoder): (() => Promise<EncodedVideoFrame[]>) | undefined {
    const cuda = cudaCopyOf(this.#frame);
    if (cuda === undefined || encoder.encodeCuda === undefined || encoder.width !== cuda.width || encoder.height !== cuda.height)
      return undefined;
    return () => encoder.encodeCuda!(cudaEncoderInput(cuda), this.#frame.timestampUs);
  }

  #download(): Promise<VideoFrame> {
    return downloadCudaFrame(cudaCopyOf(this.#frame)!).then(({ frame: pixels, copyMs, convertMs }) => {
      this.#metrics?.cudaDownload.observe({ track: this.#track, stage: 'copy' }, copyMs / 1000);
      this.#metrics?.cudaDownload.observe({ track: this.#track, stage: 'convert' }, convertMs / 1000);
      return this.#withFrameFields(pixels);
    });
  }

  /**
   * An RGBA frame as I420, by the native converter on this thread (synchronous: at 720p it costs
   * about 1 ms of CPU less than the one swscale conversion it replaces, and every further reader
   * saves a whole one); the frame itself when it is not RGBA, when the addon is not built (the
   * encoders' swscale then converts it, as before: the JavaScript fallback is far too slow per
   * frame) or when benchmarks turned this off.
   */
  #convertedOnce(): VideoFrame {
    const frame = this.#frame;
    if (frame.format !== 'rgba' || !convertRgbaOnce || nativeAddon() === undefined) return frame;
    const { width, height } = frame;
    let into = convertedPixels.get(frame.data);
    if (into?.length !== yuvByteLength(width, height)) {
      // First use of this pooled buffer, or a frame of another shape in it (the pool keys by bytes).
      into = new Uint8Array(yuvByteLength(width, height));
      convertedPixels.set(frame.data, into);
    }
    try {
      convertToYuv(frame.data, { width, height, format: 'rgba', implementation: 'native', into });
    } catch {
      // Not expected (emit() checked the shape). The encoders convert the RGBA as without the addon,
      // and the frame is missing from the counter, which shows it.
      convertedPixels.delete(frame.data);
      return frame;
    }
    this.#metrics?.framesConverted.inc({ track: this.#track, from: 'rgba', by: 'native' });
    return this.#withFrameFields({ width, height, format: 'i420', data: into });
  }

  /** `pixels` with the emitted frame's timestamp and metadata. */
  #withFrameFields(pixels: VideoFrame): VideoFrame {
    const frame = this.#frame;
    return {
      ...pixels,
      ...(frame.timestampUs === undefined ? {} : { timestampUs: frame.timestampUs }),
      ...(frame.metadata === undefined ? {} : { metadata: frame.metadata }),
    };
  }
}
