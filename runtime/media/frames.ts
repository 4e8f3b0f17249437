/**
 * Raw media as model authors see it: what `session.emit()` takes and what input tracks yield.
 *
 * Frames are plain objects over typed arrays so that a model can fill them from any source
 * (a tensor copied off the GPU, a canvas, a decoder) without learning a media library.
 */

/** Pixel layouts the runtime accepts and produces. */
export type PixelFormat = 'i420' | 'rgba';

/** Opaque per-frame data that travels beside a frame: a mapping travels as JSON, bytes unchanged. */
export type FrameMetadata = Record<string, unknown> | Uint8Array;

export interface VideoFrame {
  readonly width: number;
  readonly height: number;
  readonly format: PixelFormat;
  /**
   * Tightly packed pixels.
   * - `i420`: the Y plane (width*height bytes), then U, then V (each ceil(w/2)*ceil(h/2) bytes).
   * - `rgba`: width*height*4 bytes, row-major, no padding.
   * The runtime copies what it needs before `emit()` resolves, so the model may reuse the buffer.
   */
  readonly data: Uint8Array;
  /** When the frame was captured or produced, in microseconds of `performance.now()`. */
  readonly timestampUs?: number;
  /**
   * Output frames: metadata delivered to clients with this frame. Input frames: what the
   * publishing client attached to this frame (`publishTrack(name, track, { frameMetadata })`).
   */
  readonly metadata?: FrameMetadata;
  /**
   * Input frames published with frame metadata: when the client captured this frame, Unix epoch
   * ms on the runtime's clock (`Date.now() - captureTime` is capture-to-model latency).
   */
  readonly captureTime?: number;
}

/**
 * A frame already in GPU memory (a model's CUDA output): `emit()` copies it device to device before
 * it resolves, so the model may reuse its buffer. On a host whose encoder is NVENC
 * (`arclight_nvenc_*`) it is encoded from GPU memory without crossing to the host; other encoders
 * (a VP8 viewer, no NVENC) and the recording get a host copy.
 */
export interface CudaVideoFrame {
  readonly width: number;
  readonly height: number;
  readonly format: 'cuda';
  readonly cuda: {
    /** A CUDA device pointer in the primary context of `device` (where the CUDA runtime allocates). */
    readonly devicePtr: bigint;
    /** Bytes between rows; NV12's UV plane and I420's U plane follow the luma plane at devicePtr + pitch * height. */
    readonly pitch: number;
    /** `bgra`/`rgba`: 4 bytes per pixel in that order. I420's chroma rows are pitch / 2 apart. */
    readonly layout: 'nv12' | 'i420' | 'rgba' | 'bgra';
    /** CUDA device ordinal; default 0. */
    readonly device?: number;
  };
  readonly timestampUs?: number;
  readonly metadata?: FrameMetadata;
}

export interface AudioFrame {
  /** Samples per second; Opus tracks run at 48000. */
  readonly sampleRate: number;
  readonly channels: number;
  /** Interleaved signed 16-bit samples: frames * channels values. */
  readonly samples: Int16Array;
  readonly timestampUs?: number;
  readonly metadata?: FrameMetadata;
}

/** Byte length of a tightly packed frame of the given shape. */
export function videoFrameByteLength(format: PixelFormat, width: number, height: number): number {
  if (format === 'rgba') return width * height * 4;
  const chroma = Math.ceil(width / 2) * Math.ceil(height / 2);
  return width * height + 2 * chroma;
}
