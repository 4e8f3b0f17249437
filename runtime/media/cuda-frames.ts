/**
 * Model frames that live in GPU memory (`CudaVideoFrame`): the device-to-device copy `emit()` takes
 * into pooled CUDA buffers (so the model may reuse its own at once, as with host frames), and the
 * host copy for whoever cannot read GPU memory (a software encoder, the recorder), made off the
 * JavaScript thread.
 */
import { nativeAddon, nativeAddonStatus, type CudaBuffer, type CudaFrame } from '../native/native-addon.ts';
import type { CudaVideoFrame, VideoFrame } from './frames.ts';

export type CudaLayout = CudaVideoFrame['cuda']['layout'];

/** A pooled device copy of one emitted frame: what the encoder reads. */
export interface PooledCudaFrame {
  readonly buffer: CudaBuffer;
  readonly width: number;
  readonly height: number;
  readonly pitch: number;
  readonly layout: CudaLayout;
  readonly device: number;
}

export function isCudaVideoFrame(frame: unknown): frame is CudaVideoFrame {
  return typeof frame === 'object' && frame !== null && (frame as { format?: unknown }).format === 'cuda';
}

/** Bytes a frame spans from its pointer (chroma rows of I420 at half the pitch, rounded up). */
export function cudaFrameSpan(layout: CudaLayout, pitch: number, height: number): number {
  const chromaRows = Math.ceil(height / 2);
  switch (layout) {
    case 'nv12':
      return pitch * (height + chromaRows);
    case 'i420':
      return pitch * height + 2 * Math.ceil(pitch / 2) * chromaRows;
    case 'rgba':
    case 'bgra':
      return pitch * height;
  }
}

/** Checks a CUDA frame's shape; the addon checks the pointer against its allocation when copying. */
export function assertCudaFrame(track: string, frame: CudaVideoFrame): void {
  const { width, height, cuda } = frame;
  if (!(Number.isInteger(width) && Number.isInteger(height) && width > 0 && height > 0 && width % 2 === 0 && height % 2 === 0)) {
    throw new TypeError(`emit("${track}"): a CUDA frame needs an even integer width and height`);
  }
  if (!cuda || typeof cuda.devicePtr !== 'bigint' || cuda.devicePtr === 0n)
    throw new TypeError(`emit("${track}"): cuda.devicePtr must be a non-null bigint`);
  if (!['nv12', 'i420', 'rgba', 'bgra'].includes(cuda.layout))
    throw new TypeError(`emit("${track}"): cuda.layout must be 'nv12', 'i420', 'rgba' or 'bgra'`);
  const rowBytes = cuda.layout === 'rgba' || cuda.layout === 'bgra' ? width * 4 : width;
  if (!Number.isInteger(cuda.pitch) || cuda.pitch < rowBytes)
    throw new RangeError(`emit("${track}"): cuda.pitch must be an integer of at least ${rowBytes}`);
}

/** Device buffers for one track's queued CUDA frames, reused by size. */
export class CudaFramePool {
  readonly #free = new Map<string, CudaBuffer[]>();
  readonly #maxPerSize: number;
  #closed = false;

  constructor(maxPerSize: number) {
    this.#maxPerSize = maxPerSize;
  }

  /** Copies the model's frame device to device; throws if CUDA or the pointer is unusable. */
  copy(frame: CudaVideoFrame): PooledCudaFrame {
    const addon = nativeAddon();
    if (!addon) throw new Error(`CUDA frames need the native addon: ${nativeAddonStatus().reason ?? 'not loaded'}`);
    const { pitch, layout, devicePtr } = frame.cuda;
    const device = frame.cuda.device ?? 0;
    const bytes = cudaFrameSpan(layout, pitch, frame.height);
    const key = `${device}:${bytes}`;
    const buffer = this.#free.get(key)?.pop() ?? new addon.CudaBuffer(bytes, device);
    try {
      buffer.copyFromDevice(devicePtr, bytes);
    } catch (error) {
      this.#keep(key, buffer);
      throw error;
    }
    return { buffer, width: frame.width, height: frame.height, pitch, layout, device };
  }

  release(frame: PooledCudaFrame): void {
    this.#keep(`${frame.device}:${frame.buffer.size}`, frame.buffer);
  }

  /** Frees every pooled buffer; buffers released later are freed at once. */
  close(): void {
    this.#closed = true;
    for (const list of this.#free.values()) for (const buffer of list) buffer.free();
    this.#free.clear();
  }

  #keep(key: string, buffer: CudaBuffer): void {
    const list = this.#free.get(key) ?? [];
    if (this.#closed || list.length >= this.#maxPerSize) {
      buffer.free();
      return;
    }
    list.push(buffer);
    this.#free.set(key, list);
  }
}

/** The frame as the encoder's NVENC binding takes it. */
export function cudaEncoderInput(frame: PooledCudaFrame): CudaFrame {
  return { devicePtr: frame.buffer.devicePtr, pitch: frame.pitch, format: frame.layout };
}

/** A host copy of a pooled CUDA frame and what it cost off the JavaScript thread. */
export interface CudaHostCopy {
  /** Packed I420 (NV12 de-interleaved, RGBA/BGRA converted, BT.601 limited range). */
  readonly frame: VideoFrame;
  /** Device → page-locked host memory, on a libuv worker thread. */
  readonly copyMs: number;
  /** Page-locked → packed I420, on that worker thread. */
  readonly convertMs: number;
}

/**
 * The host copy for encoders and taps that read host memory (software encoders, the recorder):
 * copied and converted by the addon on the thread pool, so the event loop keeps serving while
 * the GPU copy runs (1080p is ~3 MB a frame).
 */
export async function downloadCudaFrame(frame: PooledCudaFrame): Promise<CudaHostCopy> {
  const { width, height, pitch, layout } = frame;
  const { data, copyMs, convertMs } = await frame.buffer.downloadFrame({ width, height, pitch, layout });
  return { frame: { width, height, format: 'i420', data }, copyMs, convertMs };
}
