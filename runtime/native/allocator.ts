/**
 * The runtime's one allocator setting: a fixed glibc mmap threshold, so encoder buffers go back to
 * the system when a session ends.
 *
 * Why: FFmpeg encoders are opened and closed on libuv's pool threads, and each pool thread
 * allocates from its own glibc arena. glibc raises its mmap threshold to the size of every mmapped
 * block that is freed, so after the first encoder closes, later encoders' multi-megabyte frame
 * buffers come from those arenas instead of mmap — and once freed they stay resident, fragmented,
 * an encoder's worth (~35 MiB at 720p) per pool thread, reached one step at a time over the first
 * half hour of sessions. Measured with /proc/PID/smaps during the soak (docs/reliability.md,
 * "Soak"). A fixed threshold at glibc's own starting value (128 KiB) keeps those blocks mmapped.
 *
 * An operator's own setting wins: MALLOC_MMAP_THRESHOLD_ or a glibc.malloc.mmap_threshold tunable in
 * the environment leaves the allocator alone. Without the native addon (or without glibc) there is
 * nothing to call; the environment variable does the same from outside (docs/operations.md).
 */

import type { NativeAddon } from './native-addon.ts';

/** glibc's default initial mmap threshold, made fixed. */
export const RUNTIME_MMAP_THRESHOLD_BYTES = 128 * 1024;

export type AllocatorTuning =
  | { readonly applied: true; readonly mmapThresholdBytes: number }
  | { readonly applied: false; readonly reason: string };

/**
 * Fixes the mmap threshold through the addon unless the environment already sets one. Never
 * throws: the runtime serves the same either way, only its idle memory differs.
 */
export function tuneAllocator(addon: Pick<NativeAddon, 'fixMmapThreshold'> | undefined, env: NodeJS.ProcessEnv = process.env): AllocatorTuning {
  if (env['MALLOC_MMAP_THRESHOLD_'] !== undefined || /(^|:)glibc\.malloc\.mmap_threshold=/.test(env['GLIBC_TUNABLES'] ?? '')) {
    return { applied: false, reason: 'the environment sets the mmap threshold' };
  }
  if (!addon) return { applied: false, reason: 'no native addon (set MALLOC_MMAP_THRESHOLD_=131072 in the environment instead)' };
  try {
    return addon.fixMmapThreshold(RUNTIME_MMAP_THRESHOLD_BYTES)
      ? { applied: true, mmapThresholdBytes: RUNTIME_MMAP_THRESHOLD_BYTES }
      : { applied: false, reason: 'not glibc, or glibc refused the value' };
  } catch (error) {
    return { applied: false, reason: `fixMmapThreshold failed: ${(error as Error).message}` };
  }
}
