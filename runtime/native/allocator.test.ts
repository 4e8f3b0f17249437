/**
 * The allocator trim after an encoder is freed (allocator.ts): when it runs and how frees share
 * one; that a real encoder's free schedules it; and — with the real addon, in child processes so
 * this worker's allocator is untouched — that it does what it is for: megabyte blocks freed in the
 * middle of the heap, which glibc alone keeps resident, go back to the system.
 */
import { execFileSync } from 'node:child_process';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { VideoEncoder } from '../media/video-encoder-factory.ts';
import { AllocatorTrimmer, processAllocatorTrimmer, TRIM_DELAY_MS } from './allocator.ts';
import { nativeAddonStatus } from './native-addon.ts';

const status = nativeAddonStatus();

afterEach(() => {
  vi.useRealTimers();
});

describe('AllocatorTrimmer', () => {
  it('trims once, a delay after the first of several frees', () => {
    vi.useFakeTimers();
    const trimAllocator = vi.fn(() => true);
    const onTrim = vi.fn();
    const trimmer = new AllocatorTrimmer({ addon: () => ({ trimAllocator }), onTrim });
    trimmer.schedule();
    vi.advanceTimersByTime(TRIM_DELAY_MS / 2);
    trimmer.schedule();
    trimmer.schedule();
    expect(trimAllocator).not.toHaveBeenCalled();
    vi.advanceTimersByTime(TRIM_DELAY_MS / 2);
    expect(trimAllocator).toHaveBeenCalledTimes(1);
    expect(onTrim).toHaveBeenCalledWith(true, expect.any(Number));
    // A later free gets its own trim.
    trimmer.schedule();
    vi.advanceTimersByTime(TRIM_DELAY_MS);
    expect(trimAllocator).toHaveBeenCalledTimes(2);
    expect(trimmer.trims).toBe(2);
  });

  it('does nothing without an addon, and never throws when the trim does', () => {
    vi.useFakeTimers();
    const none = new AllocatorTrimmer({ addon: () => undefined });
    none.schedule();
    vi.advanceTimersByTime(TRIM_DELAY_MS);
    expect(none.trims).toBe(0);
    const throwing = new AllocatorTrimmer({
      addon: () => ({
        trimAllocator: () => {
          throw new Error('no');
        },
      }),
    });
    throwing.schedule();
    expect(() => vi.advanceTimersByTime(TRIM_DELAY_MS)).not.toThrow();
    expect(throwing.trims).toBe(0);
  });

  it.runIf(status.loaded)("is scheduled when a real encoder is freed, and the process's trim runs", async () => {
    const before = processAllocatorTrimmer.trims;
    const encoder = await VideoEncoder.create({ codec: 'vp8', width: 320, height: 240, fps: 30 });
    encoder.close();
    await vi.waitFor(() => expect(processAllocatorTrimmer.trims).toBeGreaterThan(before), { timeout: TRIM_DELAY_MS * 5, interval: 50 });
  });
});

// A child Node process: frees an 8 MiB block (glibc then serves blocks up to 8 MiB from the heap
// instead of mmap), allocates 64 × 1 MiB interleaved with small blocks that stay alive (so the
// freed megabytes are holes the heap cannot shrink past), frees the megabytes and prints the RSS
// kept, in MiB, before and after `trimAllocator()`.
const RETAIN_SCRIPT = `
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
const rss = () => Number(/VmRSS:\\s+(\\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))[1]) / 1024;
const settle = async () => { for (let i = 0; i < 3; i++) { gc(); await new Promise((resolve) => setTimeout(resolve, 50)); } };
const addon = createRequire(import.meta.url)(process.env.ADDON);
// In a function, so nothing on the module's stack still holds it when gc() runs.
(() => { Buffer.allocUnsafeSlow(8 << 20).fill(1); })();
await settle();
const before = rss();
const keep = [];
(() => { const blocks = []; for (let i = 0; i < 64; i++) { blocks.push(Buffer.allocUnsafeSlow(1 << 20).fill(2)); keep.push(Buffer.allocUnsafeSlow(4096).fill(3)); } })();
await settle();
const kept = rss() - before;
const released = addon.trimAllocator();
process.stdout.write(JSON.stringify({ kept, keptAfterTrim: rss() - before, released, small: keep.length }));
`;

describe.runIf(status.loaded && process.platform === 'linux')('trimAllocator in a real process (the built addon)', () => {
  it('returns freed megabyte blocks that glibc alone keeps resident', () => {
    const output = execFileSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', RETAIN_SCRIPT], {
      env: { PATH: process.env['PATH'], ADDON: status.path },
      encoding: 'utf8',
      timeout: 30_000,
    });
    const result = JSON.parse(output) as { kept: number; keptAfterTrim: number; released: boolean };
    // Without it all 64 MiB stay resident; after it, about one MiB of small blocks.
    expect(result.kept, `before the trim ${result.kept.toFixed(1)} MiB stayed resident`).toBeGreaterThan(48);
    expect(result.keptAfterTrim, `after the trim ${result.keptAfterTrim.toFixed(1)} MiB stayed resident`).toBeLessThan(8);
    expect(result.released).toBe(true);
  });
});
