/**
 * Asks glibc to give free memory back once an encoder is freed: `malloc_trim(0)` through the
 * native addon, a moment after the last encoder freed (several at once — a session's tracks, a
 * reconnect — share one trim).
 *
 * Why: encoders run on libuv's pool threads, and each pool thread allocates from its own glibc
 * arena. Memory freed in the middle of an arena stays resident (glibc returns only the free space
 * at an arena's top), so with glibc's defaults each arena kept its high-water mark and runtime RSS
 * climbed in ~11 MiB steps for half an hour (docs/reliability.md, "Soak", where /proc/PID/smaps
 * showed it). The trim releases the pages of free chunks in every arena; with it the hour's soak
 * held flat at the in-session level.
 *
 * Not the alternative measured first: a fixed mmap threshold (`M_MMAP_THRESHOLD`) kept idle RSS
 * lower still, but cost ~10–15 ms of emit → send p99 — most likely page faults on a fresh mmap
 * for every frame-sized buffer. A trim costs ~2 ms per 64 MiB released, once per session.
 *
 * Without the addon (or glibc) nothing is trimmed.
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
