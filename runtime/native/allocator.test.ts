/**
 * The runtime's allocator setting (allocator.ts): when it applies, when it stands aside, and — with
 * the real addon, in child processes so this worker's allocator is untouched — that it does what it
 * is for: megabyte blocks freed after the threshold would have risen go back to the system.
 */
import { execFileSync } from 'node:child_process';
import { describe, expect, it, vi } from 'vitest';
import { RUNTIME_MMAP_THRESHOLD_BYTES, tuneAllocator } from './allocator.ts';
import { nativeAddonStatus } from './native-addon.ts';

const status = nativeAddonStatus();

describe('tuneAllocator', () => {
  it('fixes the threshold at 128 KiB through the addon', () => {
    const fixMmapThreshold = vi.fn(() => true);
    expect(tuneAllocator({ fixMmapThreshold }, {})).toEqual({ applied: true, mmapThresholdBytes: 128 * 1024 });
    expect(fixMmapThreshold).toHaveBeenCalledWith(RUNTIME_MMAP_THRESHOLD_BYTES);
  });

  it.each([
    [{ MALLOC_MMAP_THRESHOLD_: '1048576' }],
    [{ GLIBC_TUNABLES: 'glibc.malloc.mmap_threshold=65536' }],
    [{ GLIBC_TUNABLES: 'glibc.malloc.arena_max=2:glibc.malloc.mmap_threshold=65536' }],
  ])("leaves the operator's own setting alone: %o", (env) => {
    const fixMmapThreshold = vi.fn(() => true);
    expect(tuneAllocator({ fixMmapThreshold }, env)).toEqual({ applied: false, reason: 'the environment sets the mmap threshold' });
    expect(fixMmapThreshold).not.toHaveBeenCalled();
  });

  it('still applies when GLIBC_TUNABLES sets only other tunables', () => {
    expect(tuneAllocator({ fixMmapThreshold: () => true }, { GLIBC_TUNABLES: 'glibc.malloc.arena_max=2' })).toMatchObject({ applied: true });
  });

  it('says why when it cannot apply, and never throws', () => {
    expect(tuneAllocator(undefined, {})).toMatchObject({ applied: false, reason: expect.stringMatching(/^no native addon/) });
    expect(tuneAllocator({ fixMmapThreshold: () => false }, {})).toEqual({ applied: false, reason: 'not glibc, or glibc refused the value' });
    const throwing = () => {
      throw new RangeError('nope');
    };
    expect(tuneAllocator({ fixMmapThreshold: throwing }, {})).toEqual({ applied: false, reason: 'fixMmapThreshold failed: nope' });
  });
});

// A child Node process: frees an 8 MiB block (glibc then raises its threshold to 8 MiB unless it
// is fixed), allocates 64 × 1 MiB interleaved with small blocks that stay alive (so the freed
// megabytes are holes the heap cannot trim), frees the megabytes and prints the RSS kept, in MiB.
const RETAIN_SCRIPT = `
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
const rss = () => Number(/VmRSS:\\s+(\\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))[1]) / 1024;
const settle = async () => { for (let i = 0; i < 3; i++) { gc(); await new Promise((resolve) => setTimeout(resolve, 50)); } };
if (process.env.FIX === '1' && !createRequire(import.meta.url)(process.env.ADDON).fixMmapThreshold(${RUNTIME_MMAP_THRESHOLD_BYTES})) throw new Error('not applied');
// In a function, so nothing on the module's stack still holds it when gc() runs.
(() => { Buffer.allocUnsafeSlow(8 << 20).fill(1); })();
await settle();
const before = rss();
const keep = [];
(() => { const blocks = []; for (let i = 0; i < 64; i++) { blocks.push(Buffer.allocUnsafeSlow(1 << 20).fill(2)); keep.push(Buffer.allocUnsafeSlow(4096).fill(3)); } })();
await settle();
process.stdout.write(String(rss() - before + 0 * keep.length));
`;

function retainedMiB(fix: boolean): number {
  const output = execFileSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', RETAIN_SCRIPT], {
    env: { PATH: process.env['PATH'], ADDON: status.path, FIX: fix ? '1' : '0' },
    encoding: 'utf8',
    timeout: 30_000,
  });
  return Number(output);
}

describe.runIf(status.loaded && process.platform === 'linux')('fixMmapThreshold in a real process (the built addon)', () => {
  it('returns freed megabyte blocks to the system, which glibc alone keeps', () => {
    const kept = retainedMiB(false);
    const keptFixed = retainedMiB(true);
    // Without it all 64 MiB stay resident; with it, about one MiB of small blocks.
    expect(kept, `without the fix ${kept.toFixed(1)} MiB stayed resident`).toBeGreaterThan(48);
    expect(keptFixed, `with the fix ${keptFixed.toFixed(1)} MiB stayed resident`).toBeLessThan(8);
  });
});
