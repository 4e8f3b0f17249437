/**
 * A swscale conversion kept between frames: the context and the FFmpeg-owned staging frame it
 * reads from or writes to are built once per input shape and reused, since building them costs
 * far more than a conversion.
 */

import { FFmpegError, Frame, SoftwareScaleContext } from 'node-av/lib';
import { SWS_BILINEAR, type AVPixelFormat } from 'node-av/constants';

export interface PictureShape {
  readonly format: AVPixelFormat;
  readonly width: number;
  readonly height: number;
}

export interface Conversion {
  /** The staging frame: allocated in the shape of the side named by `staging`. */
  readonly staging: Frame;
  readonly scaler: SoftwareScaleContext;
}

export class FrameScaler {
  #key = '';
  #current: Conversion | null = null;

  /**
   * The conversion from `source` to `target`; its staging frame has the `staging` side's shape
   * (the encoder stages its input, the decoder its output).
   */
  prepare(source: PictureShape, target: PictureShape, staging: 'source' | 'target'): Conversion {
    const key = `${source.format}:${source.width}x${source.height}>${target.format}:${target.width}x${target.height}/${staging}`;
    if (this.#current && key === this.#key) return this.#current;
    this.free();
    const shape = staging === 'source' ? source : target;
    const frame = new Frame();
    frame.alloc();
    frame.format = shape.format;
    frame.width = shape.width;
    frame.height = shape.height;
    FFmpegError.throwIfError(frame.allocBuffer(), 'allocate staging frame');
    const scaler = new SoftwareScaleContext();
    scaler.getContext(source.width, source.height, source.format, target.width, target.height, target.format, SWS_BILINEAR);
    const ret = scaler.initContext();
    if (ret < 0) {
      frame.free();
      scaler.freeContext();
      FFmpegError.throwIfError(ret, 'init swscale');
    }
    this.#key = key;
    this.#current = { staging: frame, scaler };
    return this.#current;
  }

  free(): void {
    if (!this.#current) return;
    this.#current.scaler.freeContext();
    this.#current.staging.free();
    this.#current = null;
    this.#key = '';
  }
}
