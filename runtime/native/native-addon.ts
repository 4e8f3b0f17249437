/**
 * The optional native addon (`native/`, built by `npm install` into build/Release/): loaded once,
 * if it is there and loads; otherwise undefined and the JavaScript paths serve. Nothing in the
 * runtime requires it. Its interface is declared here, once, and checked at load (a stale or
 * foreign binary is refused rather than trusted).
 */

import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { packageRoot } from '../../server-kit/package-root.ts';

export type YuvSourceFormat = 'rgb' | 'rgba' | 'bgr';
export type YuvSourceLayout = 'hwc' | 'chw';
export type YuvTarget = 'i420' | 'nv12';

/** What build/Release/arclight_native.node exports (native/src/addon.cc). */
export interface NativeAddon {
  /**
   * RGB(A)/BGR, uint8 or float32 (full intensity = `scale`), interleaved (hwc) or planar (chw),
   * into `dst` as I420 or NV12, BT.601 limited range; rows split over `threads`. Throws
   * TypeError/RangeError for bad arguments.
   */
  convertToYuv(
    src: Uint8Array | Float32Array,
    dst: Uint8Array,
    width: number,
    height: number,
    format: YuvSourceFormat,
    layout: YuvSourceLayout,
    scale: number,
    target: YuvTarget,
    threads: number,
  ): void;
  version(): string;
  /**
   * glibc's `malloc_trim(0)`: the pages of free memory in every arena go back to the system
   * (runtime/native/allocator.ts says when and why). True when memory was released; false
   * without glibc. Takes ~2 ms per 64 MiB released on the calling thread.
   */
  trimAllocator(): boolean;
  /** `nvenc`: compiled in (whether a GPU can use it is `nvencProbe`'s answer). */
  features(): { readonly nvenc: boolean; readonly colourConvert: boolean };
  /** Opens and closes a session on `device` (default 0) to see whether NVENC works there. */
  nvencProbe(device?: number): Promise<NvencProbeResult>;
  /** Throws TypeError/RangeError for bad options; rejects when the session cannot be opened. */
  openNvencEncoder(options: NvencEncoderOptions): Promise<NvencEncoder>;
  /** Allocates `bytes` on `device` (default 0); throws where CUDA is unavailable. */
  CudaBuffer: new (bytes: number, device?: number) => CudaBuffer;
  /** The GPU as the driver reports it (on the thread pool); rejects with why CUDA is unavailable. */
  cudaDeviceInfo(device?: number): Promise<CudaDeviceInfo>;
}

/** Every export of the addon, checked at load; `satisfies` keeps it in step with NativeAddon. */
export const NATIVE_ADDON_EXPORTS = ['convertToYuv', 'version', 'features', 'trimAllocator', 'nvencProbe', 'openNvencEncoder', 'CudaBuffer', 'cudaDeviceInfo'] as const satisfies readonly (keyof NativeAddon)[];
// And the other way: a NativeAddon member missing from the list fails to compile here.
type MissingExport = Exclude<keyof NativeAddon, (typeof NATIVE_ADDON_EXPORTS)[number]>;
const exportsComplete: MissingExport extends never ? true : never = true;
void exportsComplete;

export type NvencCodec = 'h264' | 'h265';
/** Host/device pixel layouts: `bgra` is bytes B,G,R,A in memory (NVENC's ARGB), `rgba` is R,G,B,A. */
export type NvencInputFormat = 'nv12' | 'i420' | 'bgra' | 'rgba';

/** `openNvencEncoder` options (native/src/nvenc_binding.cc ParseConfig; unknown keys are a TypeError). */
export interface NvencEncoderOptions {
  readonly codec: NvencCodec;
  /** Even, 16–8192. */
  readonly width: number;
  readonly height: number;
  readonly fps: number;
  readonly bitrateKbps: number;
  readonly input: NvencInputFormat;
  /** Default `cbr` (VBR peaks at 1.5× the target). */
  readonly rateControl?: 'cbr' | 'vbr';
  /** NVENC preset P1 (fastest) … P7; default 2. Low-latency streaming uses 1–4. */
  readonly preset?: 1 | 2 | 3 | 4 | 5 | 6 | 7;
  /** Default `ultra-low-latency`. */
  readonly tuning?: 'low-latency' | 'ultra-low-latency';
  /** VBV buffer in ms of the target rate; default 500. */
  readonly vbvMs?: number;
  /** H.264 only; default `constrained-baseline`. */
  readonly profile?: 'constrained-baseline' | 'high';
  /** Gradual intra refresh: a wave of intra blocks every `period` frames, over `frames` frames. */
  readonly intraRefresh?: false | { readonly period: number; readonly frames: number };
  /** CUDA device ordinal; default 0. */
  readonly device?: number;
}

/** A frame already in GPU memory of the encoder's device (e.g. a model's CUDA output). */
export interface CudaFrame {
  readonly devicePtr: bigint;
  /** Bytes between rows; NV12's UV plane follows the luma plane at devicePtr + pitch * height. */
  readonly pitch: number;
  /** Default: the encoder's `input`. NVENC takes the layout per picture. */
  readonly format?: NvencInputFormat;
}

export interface NvencPicture {
  /** One Annex-B access unit. */
  readonly data: Buffer;
  /** An IDR (H.264) / IRAP (H.265), with parameter sets before it. */
  readonly keyframe: boolean;
  readonly timestampUs: number;
}

/** One NVENC session. Encodes run on the thread pool, one at a time. */
export interface NvencEncoder {
  /**
   * Host pixels (tightly packed, the `input` format, read before the promise settles: do not
   * change them meanwhile) or a CUDA frame (checked against its allocation first).
   */
  encode(frame: Uint8Array | CudaFrame, forceIdr: boolean, timestampUs: number): Promise<NvencPicture>;
  /** From the next frame on, without re-initialising the session. */
  setBitrate(kbps: number): void;
  /** Frees the session (after an encode in flight). Idempotent. */
  close(): void;
  readonly closed: boolean;
}

export interface NvencProbeResult {
  readonly available: boolean;
  /** Why not, e.g. `libcuda.so.1 could not be loaded …` or `opening an NVENC session failed: NV_ENC_ERR_UNSUPPORTED_DEVICE: this GPU has no NVENC engine …` (an H100/H200). */
  readonly reason?: string;
  readonly deviceName?: string;
  readonly codecs: readonly NvencCodec[];
  /** The newest NVENC API the driver speaks, "major.minor". */
  readonly driverApi?: string;
  /** false when the addon was built without the NVENC headers. */
  readonly compiledIn: boolean;
}

/** CUDA device memory owned by JavaScript: the runtime's copies of emitted CUDA frames, tests, benchmarks. */
export interface CudaBuffer {
  readonly devicePtr: bigint;
  readonly size: number;
  /** Host to device, synchronous (set-up, tests: not for the per-frame path). */
  upload(bytes: Uint8Array, offset?: number): void;
  /** The whole buffer to the host, synchronous (tests). */
  download(): Uint8Array;
  /** Device to device, from `srcPtr` (checked to lie inside one allocation on this buffer's device). */
  copyFromDevice(srcPtr: bigint, bytes: number, offset?: number): void;
  /**
   * The frame at the buffer's start as packed I420 (NV12 de-interleaved, RGBA/BGRA converted,
   * BT.601 limited range), copied through page-locked memory on the buffer's own CUDA stream and
   * converted on the thread pool: the calling thread never waits on the GPU. Bad shapes throw
   * (TypeError/RangeError); CUDA failures reject. Do not write the buffer until it settles.
   */
  downloadFrame(frame: CudaFrameShape): Promise<CudaFrameDownload>;
  /** Frees the memory (a download in flight keeps it until it settles). Idempotent. */
  free(): void;
}

export interface CudaFrameShape {
  readonly width: number;
  readonly height: number;
  /** Bytes between rows; I420 chroma rows are ceil(pitch / 2) apart, after the luma plane. */
  readonly pitch: number;
  readonly layout: 'nv12' | 'i420' | 'rgba' | 'bgra';
}

export interface CudaFrameDownload {
  /** Packed I420: width × height × 3 / 2 bytes. */
  readonly data: Uint8Array;
  /** Device → page-locked host memory, stream wait included (on a worker thread). */
  readonly copyMs: number;
  /** Page-locked copy → packed I420 (on that worker thread). */
  readonly convertMs: number;
}

export interface CudaDeviceInfo {
  readonly ordinal: number;
  readonly name: string;
  /** "9.0" on an H100/H200. */
  readonly computeCapability: string;
  readonly multiprocessors: number;
  readonly totalMemoryBytes: number;
  readonly freeMemoryBytes: number;
  /** The CUDA version the driver supports, "13.0". */
  readonly driverVersion: string;
  /** The library dlopen loaded: `libcuda.so.1`, or $ARCLIGHT_LIBCUDA. */
  readonly driverLibrary: string;
}

export interface NativeAddonStatus {
  readonly loaded: boolean;
  /** Why not, when not loaded. */
  readonly reason?: string;
  readonly version?: string;
  readonly path: string;
}

let loaded: { addon: NativeAddon | undefined; status: NativeAddonStatus } | undefined;


/** The addon, or undefined (see `nativeAddonStatus()` for why). Loaded on first call. */
export function nativeAddon(): NativeAddon | undefined {
  return load().addon;
}

export function nativeAddonStatus(): NativeAddonStatus {
  return load().status;
}

function load(): { addon: NativeAddon | undefined; status: NativeAddonStatus } {
  if (loaded) return loaded;
  const path = process.env['ARCLIGHT_NATIVE_ADDON'] ?? join(packageRoot(), 'build', 'Release', 'arclight_native.node');
  if (process.env['ARCLIGHT_NATIVE'] === 'off') {
    loaded = { addon: undefined, status: { loaded: false, reason: 'turned off (ARCLIGHT_NATIVE=off)', path } };
  } else if (!existsSync(path)) {
    loaded = { addon: undefined, status: { loaded: false, reason: 'not built (npm install builds it when cmake and a C++ compiler are present)', path } };
  } else {
    try {
      const candidate = createRequire(import.meta.url)(path) as Partial<NativeAddon>;
      for (const name of NATIVE_ADDON_EXPORTS) {
        if (typeof candidate[name] !== 'function') throw new Error(`it exports no ${name}()`);
      }
      const addon = candidate as NativeAddon;
      loaded = { addon, status: { loaded: true, version: addon.version(), path } };
    } catch (error) {
      loaded = { addon: undefined, status: { loaded: false, reason: `failed to load: ${(error as Error).message}`, path } };
    }
  }
  return loaded;
}
