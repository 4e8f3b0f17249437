/**
 * The optional native addon (`native/`, built by `npm install` into build/Release/): loaded once,
 * if it is there and loads; otherwise undefined and the JavaScript paths serve. Nothing in the
 * runtime requires it. Its interface is declared here, once, and checked at load (a stale or
 * foreign binary is refused rather than trusted).
 */

import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { packageRoot } from '../package-root.ts';

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
  features(): { readonly nvenc: boolean; readonly colourConvert: boolean };
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
      for (const name of ['convertToYuv', 'version', 'features'] as const) {
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
