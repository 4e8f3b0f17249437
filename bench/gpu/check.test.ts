/**
 * The GPU check's dry mode (bench/gpu/check.ts --dry): every part but the build, run as the script
 * runs on a GPU host, against the test suite's FAKE NVIDIA driver in its H100-like mode (no NVENC
 * engine). What it must show without a GPU: each part reports and is labelled `fake`; the NVENC
 * probe gives the driver's own error code and the runtime falls back to x264 / x265; the CUDA
 * frames come back as the picture; the end-to-end stream decodes. No timing is asserted.
 *
 * Runs where the addon has NVENC compiled in (the fake driver needs the NVENC code path), the same
 * rule as test/e2e/cuda-nvenc.test.ts.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nativeAddon, nativeAddonStatus } from '../../runtime/native/native-addon.ts';
import type { CheckRecord } from './check/record.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const compiledIn = nativeAddonStatus().loaded && nativeAddon()!.features().nvenc;

describe.runIf(compiledIn)('bench/gpu/check.ts --dry (fake NVIDIA driver, no GPU)', () => {
  const out = mkdtempSync(join(tmpdir(), 'arclight-gpu-check-'));
  let records: CheckRecord[] = [];
  let stdout = '';

  beforeAll(async () => {
    stdout = await new Promise<string>((resolve, reject) => {
      execFile(
        process.execPath,
        [
          '--conditions=source',
          '--import',
          'tsx',
          'bench/gpu/check.ts',
          '--dry',
          '--no-build',
          '--seconds',
          '2',
          '--frames',
          '10',
          '--sizes',
          '720p',
          '--device-mib',
          '64',
          '--parts',
          'device,nvenc,frames,stream,onnx',
          '--out',
          out,
        ],
        { cwd: ROOT, encoding: 'utf8', timeout: 170_000, maxBuffer: 16 << 20 },
        (error, out, err) => (error ? reject(new Error(`${error.message}\n${out}\n${err}`)) : resolve(out)),
      );
    });
    records = readFileSync(join(out, 'gpu-check.jsonl'), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as CheckRecord);
  }, 180_000);

  afterAll(() => rmSync(out, { recursive: true, force: true }));

  const find = (part: string, step: string): CheckRecord => {
    const record = records.find((r) => r.part === part && r.step === step);
    if (!record) throw new Error(`no ${part} / ${step} record; the run printed:\n${stdout}`);
    return record;
  };

  it('reports every part, each record labelled as the fake driver, and writes the markdown table', () => {
    for (const part of ['device', 'nvenc', 'frames', 'stream', 'onnx'])
      expect(
        records.some((r) => r.part === part),
        part,
      ).toBe(true);
    expect(new Set(records.map((r) => r.driver))).toEqual(new Set(['fake']));
    expect(records.filter((r) => r.part === 'build').map((r) => r.status)).toEqual(['skipped']);
    const md = readFileSync(join(out, 'gpu-check.md'), 'utf8');
    expect(md).toMatch(/DRY RUN/);
    for (const part of ['device', 'nvenc', 'frames', 'stream', 'onnx']) expect(md).toContain(`## ${part}`);
    expect(stdout).toContain('[gpu-check +');
  });

  it('reads the device through the driver and round-trips device memory', () => {
    const info = find('device', 'info');
    expect(info.status).toBe('ok');
    expect(String(info['name'])).toMatch(/fake/i);
    expect(find('device', 'memory 64 MiB')).toMatchObject({ status: 'ok', match: true });
  });

  it('shows the probe failing with NV_ENC_ERR_UNSUPPORTED_DEVICE and the runtime falling back to software', () => {
    expect(find('nvenc', 'probe')).toMatchObject({ status: 'unavailable', available: false, errorCode: 'NV_ENC_ERR_UNSUPPORTED_DEVICE' });
    const h264 = find('nvenc', 'selection h264');
    expect(h264).toMatchObject({ status: 'ok', backend: 'libx264', hardware: false, fallback: true });
    expect(String(h264['summary'])).toContain('NV_ENC_ERR_UNSUPPORTED_DEVICE');
    expect(find('nvenc', 'selection h265')).toMatchObject({ status: 'ok', hardware: false, fallback: true });
  });

  it('downloads CUDA frames to I420 matching the picture, NV12 and RGBA', () => {
    for (const layout of ['nv12', 'rgba']) {
      const record = find('frames', `720p ${layout}`);
      expect(record.status, JSON.stringify(record)).toBe('ok');
      expect(record['pixelCheck']).toMatch(/^max diff [0-2],/);
    }
  });

  it('streams the CUDA frames end to end through x264 to a peer that decodes the picture', () => {
    const stream = find('stream', '720p30 h264');
    expect(stream.status, JSON.stringify(stream)).toBe('ok');
    expect(stream['encoderBackend']).toBe('libx264');
    expect(stream['decodedFrames']).toBeGreaterThan(0);
  });

  it('tries the ONNX CUDA provider and says what it needs when it is not there', () => {
    expect(find('onnx', 'cpu provider').status).toBe('ok');
    const cuda = find('onnx', 'cuda provider');
    // A developer machine with the CUDA provider installed would report 'ok'; without it, what is missing.
    if (cuda.status !== 'ok') expect(String(cuda['needed'])).toContain('libonnxruntime_providers_cuda.so');
  });
});
