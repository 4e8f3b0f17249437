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
