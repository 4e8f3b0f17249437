/**
 * One paced frame as a track's stream encoders and its frame tap read it. A frame in host memory
 * is read as it is. A CUDA frame's pooled device copy goes straight to an encoder that reads GPU
 * memory (NVENC, at the frame's size); anything else reading it — a software or VP8 encoder, the
 * recorder's tap — shares one host copy, made on the thread pool when first asked for (the event
 * loop keeps serving while the GPU copy runs) and timed in /metrics.
 */
import type { RuntimeMetrics } from '../metrics.ts';
import { cudaEncoderInput, downloadCudaFrame } from './cuda-frames.ts';
import type { VideoFrame } from './frames.ts';
import type { EncodedVideoFrame, StreamVideoEncoder } from './video-encoder.ts';
import { cudaCopyOf, type QueuedFrame } from './video-frame-queue.ts';

export class EncoderInput {
  readonly #frame: QueuedFrame;
  readonly #track: string;
  readonly #metrics: RuntimeMetrics | undefined;
  #host: Promise<VideoFrame> | undefined;

  constructor(frame: QueuedFrame, track: string, metrics: RuntimeMetrics | undefined) {
    this.#frame = frame;
    this.#track = track;
    this.#metrics = metrics;
    this.#host = cudaCopyOf(frame) ? undefined : Promise.resolve(frame);
  }

  /** The frame in host memory: itself, or its one host copy. Rejects if the GPU copy fails. */
  host(): Promise<VideoFrame> {
    const frame = this.#frame;
    const cuda = cudaCopyOf(frame);
    this.#host ??= downloadCudaFrame(cuda!).then(({ frame: pixels, copyMs, convertMs }) => {
      this.#metrics?.cudaDownload.observe({ track: this.#track, stage: 'copy' }, copyMs / 1000);
      this.#metrics?.cudaDownload.observe({ track: this.#track, stage: 'convert' }, convertMs / 1000);
      return {
        ...pixels,
        ...(frame.timestampUs === undefined ? {} : { timestampUs: frame.timestampUs }),
        ...(frame.metadata === undefined ? {} : { metadata: frame.metadata }),
      };
    });
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
}
