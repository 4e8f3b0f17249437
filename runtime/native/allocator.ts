/**
 * Gives an encoder's memory back to the system once it is freed: a glibc `malloc_trim(0)` through
 * the native addon, a moment after the last encoder freed (several at once — a session's tracks,
 * a reconnect — share one trim).
 *
 * Why: FFmpeg encoders are opened on libuv's pool threads, and each pool thread allocates from
 * its own glibc arena. An encoder's buffers (~35 MiB at 720p) freed in the middle of an arena stay
 * resident — glibc returns only the free space at an arena's top — so each pool thread's arena
 * kept about one encoder's worth after its session: runtime RSS climbed in ~11 MiB steps for half
 * an hour and stayed (docs/reliability.md, "Soak", where /proc/PID/smaps showed it). A trim after
 * the encoder is freed releases the pages of that free memory.
 *
 * Not the alternative we measured first: a fixed mmap threshold (`M_MMAP_THRESHOLD`) also kept
 * RSS flat, but made every frame-sized buffer an mmap and its page faults, on every frame; a trim
 * costs ~2 ms per 64 MiB released, once per session (docs/reliability.md has both).
 *
 * Without the addon (or glibc) nothing is trimmed and RSS keeps up to an encoder per pool thread.
 */

import { nativeAddon, type NativeAddon } from './native-addon.ts';

/** How long after the last encoder freed the trim runs: frees that come together share it. */
export const TRIM_DELAY_MS = 1_000;

export interface AllocatorTrimmerOptions {
  /** The addon (or a stand-in), looked up when the trim runs; undefined: there is nothing to call. */
  readonly addon: () => Pick<NativeAddon, 'trimAllocator'> | undefined;
  readonly delayMs?: number;
  /** Told after each trim: whether memory was released, and how long the call took. */
  readonly onTrim?: (released: boolean, ms: number) => void;
}

export class AllocatorTrimmer {
  readonly #options: AllocatorTrimmerOptions;
  #timer: NodeJS.Timeout | undefined;
  #trims = 0;

  constructor(options: AllocatorTrimmerOptions) {
    this.#options = options;
  }

  /** Trims `delayMs` from now, unless one is already due (then that one covers this free too). */
  schedule(): void {
    if (this.#timer) return;
    this.#timer = setTimeout(() => this.#trim(), this.#options.delayMs ?? TRIM_DELAY_MS);
    // Never what keeps a process alive.
    this.#timer.unref();
  }

  /** Trims run so far. */
  get trims(): number {
    return this.#trims;
  }

  #trim(): void {
    this.#timer = undefined;
    const addon = this.#options.addon();
    if (!addon) return;
    const started = performance.now();
    let released = false;
    try {
      released = addon.trimAllocator();
    } catch {
      // A trim is an economy, never a reason to fail: the memory simply stays.
      return;
    }
    this.#trims++;
    this.#options.onTrim?.(released, performance.now() - started);
  }
}

/** The process's trimmer (the arenas are the process's): open-encoders.ts schedules it as each encoder is freed. */
export const processAllocatorTrimmer = new AllocatorTrimmer({ addon: nativeAddon });
