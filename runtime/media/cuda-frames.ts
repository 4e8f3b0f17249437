/**
 * Model frames that live in GPU memory (`CudaVideoFrame`): the device-to-device copy `emit()` takes
 * into pooled CUDA buffers (so the model may reuse its own at once, as with host frames), and the
 * host copy for whoever cannot read GPU memory (a software encoder, the recorder).
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
  if (!cuda || typeof cuda.devicePtr !== 'bigint' || cuda.devicePtr === 0n) throw new TypeError(`emit("${track}"): cuda.devicePtr must be a non-null bigint`);
  if (!['nv12', 'i420', 'rgba', 'bgra'].includes(cuda.layout)) throw new TypeError(`emit("${track}"): cuda.layout must be 'nv12', 'i420', 'rgba' or 'bgra'`);
  const rowBytes = cuda.layout === 'rgba' || cuda.layout === 'bgra' ? width * 4 : width;
  if (!Number.isInteger(cuda.pitch) || cuda.pitch < rowBytes) throw new RangeError(`emit("${track}"): cuda.pitch must be an integer of at least ${rowBytes}`);
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

/** A packed host copy (I420, or RGBA for the RGB layouts) for encoders and taps that read host memory. */
export function downloadCudaFrame(frame: PooledCudaFrame): VideoFrame {
  const bytes = frame.buffer.download();
  const { width, height, pitch, layout } = frame;
  if (layout === 'rgba' || layout === 'bgra') {
    const data = new Uint8Array(width * height * 4);
    for (let y = 0; y < height; y++) data.set(bytes.subarray(y * pitch, y * pitch + width * 4), y * width * 4);
    if (layout === 'bgra') {
      for (let i = 0; i < data.length; i += 4) {
        const b = data[i]!;
        data[i] = data[i + 2]!;
        data[i + 2] = b;
      }
    }
    return { width, height, format: 'rgba', data };
  }
  const cw = width / 2;
  const ch = height / 2;
  const data = new Uint8Array(width * height + 2 * cw * ch);
  for (let y = 0; y < height; y++) data.set(bytes.subarray(y * pitch, y * pitch + width), y * width);
  const u = width * height;
  const v = u + cw * ch;
  if (layout === 'nv12') {
    for (let y = 0; y < ch; y++) {
      const row = pitch * height + y * pitch;
      for (let x = 0; x < cw; x++) {
        data[u + y * cw + x] = bytes[row + 2 * x]!;
        data[v + y * cw + x] = bytes[row + 2 * x + 1]!;
      }
    }
  } else {
    const chromaPitch = Math.ceil(pitch / 2);
    for (let y = 0; y < ch; y++) {
      data.set(bytes.subarray(pitch * height + y * chromaPitch, pitch * height + y * chromaPitch + cw), u + y * cw);
      const vRow = pitch * height + chromaPitch * ch + y * chromaPitch;
      data.set(bytes.subarray(vRow, vRow + cw), v + y * cw);
    }
  }
  return { width, height, format: 'i420', data };
}
