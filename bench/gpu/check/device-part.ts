/**
 * Part (a): the driver through the addon's dlopen path. What the device is (cudaDeviceInfo: cuInit,
 * name, memory, compute capability), then a round trip of device memory: a pattern uploaded,
 * copied device to device, downloaded and compared, with the copy rates.
 */
import { nativeAddon, nativeAddonStatus, type CudaBuffer } from '../../../runtime/native/native-addon.ts';
import { median } from '../../support/measure.ts';
import { errorMessage, round, type CheckReport } from './record.ts';

const REPS = 3;
const MIB = 2 ** 20;

export async function runDevicePart(report: CheckReport, options: { mib: number }): Promise<void> {
  const addon = nativeAddon();
  if (!addon) {
    report.record('device', 'addon', 'failed', {
      error: `native addon ${nativeAddonStatus().reason ?? 'not loaded'}`,
      path: nativeAddonStatus().path,
    });
    return;
  }
  report.record('device', 'addon', 'ok', {
    path: nativeAddonStatus().path,
    version: addon.version(),
    nvencCompiledIn: addon.features().nvenc,
  });

  try {
    const info = await addon.cudaDeviceInfo(0);
    report.record('device', 'info', 'ok', {
      name: info.name,
      computeCapability: info.computeCapability,
      multiprocessors: info.multiprocessors,
      totalMemoryGiB: round(info.totalMemoryBytes / 2 ** 30, 2),
      freeMemoryGiB: round(info.freeMemoryBytes / 2 ** 30, 2),
      driverVersion: info.driverVersion,
      driverLibrary: info.driverLibrary,
      ordinal: info.ordinal,
    });
  } catch (error) {
    // Without a usable driver the memory test cannot run either.
    report.record('device', 'info', 'unavailable', { error: errorMessage(error) });
    return;
  }

  const bytes = options.mib * MIB;
  const pattern = new Uint8Array(bytes);
  const words = new Uint32Array(pattern.buffer);
  for (let i = 0; i < words.length; i++) words[i] = Math.imul(i, 2654435761) >>> 0;
  const buffers: CudaBuffer[] = [];
  try {
    const source = new addon.CudaBuffer(bytes);
    buffers.push(source);
    const target = new addon.CudaBuffer(bytes);
    buffers.push(target);
    // A 4 KiB buffer whose download waits for the device-to-device copy before it (same stream),
    // since a device-to-device copy may return before the GPU has done it.
    const fence = new addon.CudaBuffer(4096);
    buffers.push(fence);
    const htod: number[] = [];
    const dtod: number[] = [];
    const dtoh: number[] = [];
    let downloaded: Uint8Array = new Uint8Array(0);
    for (let rep = 0; rep < REPS; rep++) {
      let t = performance.now();
      source.upload(pattern);
      htod.push(performance.now() - t);
      t = performance.now();
      target.copyFromDevice(source.devicePtr, bytes);
      fence.copyFromDevice(target.devicePtr + BigInt(bytes - 4096), 4096);
      fence.download();
      dtod.push(performance.now() - t);
      t = performance.now();
      downloaded = target.download();
      dtoh.push(performance.now() - t);
    }
    const match =
      Buffer.compare(Buffer.from(downloaded.buffer, downloaded.byteOffset, downloaded.byteLength), Buffer.from(pattern.buffer)) === 0;
    const rate = (ms: number[]): number => round(options.mib / (median(ms) / 1000), 0);
    report.record('device', `memory ${options.mib} MiB`, match ? 'ok' : 'failed', {
      htodMiBps: rate(htod),
      dtodMiBps: rate(dtod),
      dtohMiBps: rate(dtoh),
      htodMs: round(median(htod), 2),
      dtodMs: round(median(dtod), 2),
      dtohMs: round(median(dtoh), 2),
      reps: REPS,
      match,
      note: 'median of reps; HtoD/DtoH from pageable memory; DtoD timed until a dependent 4 KiB download returned',
    });
  } catch (error) {
    report.record('device', `memory ${options.mib} MiB`, 'failed', { error: errorMessage(error) });
  } finally {
    for (const buffer of buffers) buffer.free();
  }
}
