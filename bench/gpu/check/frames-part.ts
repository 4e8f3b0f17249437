/**
 * Part (c), the microbenchmark: the runtime's per-frame work for a CUDA frame bound for a software
 * encoder, without WebRTC. Per size and layout, for each frame: the device-to-device copy emit()
 * takes (CudaFramePool.copy of one ring frame: the "model filled device memory" step), then
 * CudaBuffer.downloadFrame — device → page-locked host memory and → packed I420 on a libuv worker
 * — with its copy and convert times as the addon reports them and the wall time of the await.
 * Meanwhile the main thread's event-loop delay and utilisation show whether that work stayed off
 * the JS thread. One downloaded frame is checked against the picture (within 2 levels).
 *
 * For comparison, the path it replaced (the runtime before issue 27), on a few frames: the whole
 * buffer downloaded synchronously and de-interleaved (NV12) or converted (RGBA) on the main thread.
 */
import { monitorEventLoopDelay, performance as perf } from 'node:perf_hooks';
import { CudaFramePool, type PooledCudaFrame } from '../../../runtime/media/cuda-frames.ts';
import { convertToYuv } from '../../../runtime/media/colour-convert.ts';
import { nativeAddon, nativeAddonStatus } from '../../../runtime/native/native-addon.ts';
import { RESOLUTIONS, type Resolution } from '../../support/pictures.ts';
import { summarise } from '../../support/measure.ts';
import { compareI420, uploadDeviceRing, type DeviceRing, type RingLayout } from './device-ring.ts';
import { errorMessage, round, type CheckReport, type FigureGroup } from './record.ts';

const LAYOUTS: readonly RingLayout[] = ['nv12', 'rgba'];
const SYNC_BASELINE_FRAMES = 10;

export interface FramesPartOptions {
  readonly sizes: readonly Resolution[];
  readonly frames: number;
  readonly ringSlots: number;
  /** Stop starting new configurations after this (performance.now() ms). */
  readonly deadline: number;
}

/** Packed I420 of a pooled frame, all on the calling thread: what the runtime did before issue 27. */
function downloadOnThisThread(frame: PooledCudaFrame): Uint8Array {
  const bytes = frame.buffer.download();
  const { width, height, pitch } = frame;
  if (frame.layout === 'rgba') {
    const rgba = new Uint8Array(width * height * 4);
    for (let y = 0; y < height; y++) rgba.set(bytes.subarray(y * pitch, y * pitch + width * 4), y * width * 4);
    return convertToYuv(rgba, { width, height, format: 'rgba' });
  }
  const cw = width / 2;
  const ch = height / 2;
  const data = new Uint8Array(width * height + 2 * cw * ch);
  for (let y = 0; y < height; y++) data.set(bytes.subarray(y * pitch, y * pitch + width), y * width);
  const u = width * height;
  const v = u + cw * ch;
  for (let y = 0; y < ch; y++) {
    const row = pitch * height + y * pitch;
    for (let x = 0; x < cw; x++) {
      data[u + y * cw + x] = bytes[row + 2 * x]!;
      data[v + y * cw + x] = bytes[row + 2 * x + 1]!;
    }
  }
  return data;
}

const ms = (values: readonly number[]): FigureGroup => {
  const s = summarise(values);
  return { p50: round(s.p50, 3), p90: round(s.p90, 3), min: round(s.min, 3), max: round(s.max, 3) };
};

export async function runFramesPart(report: CheckReport, options: FramesPartOptions): Promise<void> {
  const addon = nativeAddon();
  if (!addon) {
    report.record('frames', 'addon', 'failed', { error: `native addon ${nativeAddonStatus().reason ?? 'not loaded'}` });
    return;
  }
  // No CUDA device here: nothing to measure, and that is the finding (part "device" says why).
  const unusable = await addon.cudaDeviceInfo(0).then(
    () => undefined,
    (error: unknown) => errorMessage(error),
  );
  for (const size of options.sizes) {
    for (const layout of LAYOUTS) {
      const step = `${size} ${layout}`;
      if (unusable !== undefined) {
        report.record('frames', step, 'unavailable', { error: `no CUDA device: ${unusable}` });
        continue;
      }
      if (performance.now() > options.deadline) {
        report.record('frames', step, 'skipped', { reason: 'out of time for this part' });
        continue;
      }
      const { width, height } = RESOLUTIONS[size];
      let ring: DeviceRing;
      try {
        ring = uploadDeviceRing(addon, { width, height, layout, slots: Math.min(options.ringSlots, options.frames) });
      } catch (error) {
        report.record('frames', step, 'failed', { error: `device ring: ${errorMessage(error)}` });
        continue;
      }
      const pool = new CudaFramePool(4);
      try {
        const shape = { width, height, pitch: ring.pitch, layout };
        const probe = pool.copy(ring.frame(0));
        const downloadable = typeof probe.buffer.downloadFrame === 'function';
        pool.release(probe);
        if (!downloadable) {
          report.record('frames', step, 'failed', { error: 'this addon build has no CudaBuffer.downloadFrame (built before issue 27)' });
        } else {
          // Warm: page-locked staging allocated, worker threads started.
          const warm = pool.copy(ring.frame(0));
          const first = await warm.buffer.downloadFrame(shape);
          pool.release(warm);
          const check = compareI420(first.data, ring.expectedSlot0, 2);

          const d2d: number[] = [];
          const copy: number[] = [];
          const convert: number[] = [];
          const wall: number[] = [];
          const delay = monitorEventLoopDelay({ resolution: 1 });
          const eluBefore = perf.eventLoopUtilization();
          delay.enable();
          const started = performance.now();
          for (let i = 0; i < options.frames; i++) {
            let t = performance.now();
            const pooled = pool.copy(ring.frame(i));
            d2d.push(performance.now() - t);
            t = performance.now();
            const result = await pooled.buffer.downloadFrame(shape);
            wall.push(performance.now() - t);
            copy.push(result.copyMs);
            convert.push(result.convertMs);
            pool.release(pooled);
          }
          const seconds = (performance.now() - started) / 1000;
          delay.disable();
          const elu = perf.eventLoopUtilization(eluBefore);
          report.record('frames', step, check.maxDiff <= 2 ? 'ok' : 'failed', {
            frames: options.frames,
            ringSlots: ring.slots,
            pitch: ring.pitch,
            fps: round(options.frames / seconds, 1),
            deviceCopyMs: ms(d2d),
            downloadCopyMs: ms(copy),
            downloadConvertMs: ms(convert),
            downloadWallMs: ms(wall),
            eventLoopDelayMs: {
              p50: round(delay.percentile(50) / 1e6, 3),
              p99: round(delay.percentile(99) / 1e6, 3),
              max: round(delay.max / 1e6, 3),
            },
            eventLoopUtilisation: round(elu.utilization, 3),
            pixelCheck: check.sizeMatches
              ? `max diff ${check.maxDiff}, ${check.over} samples over 2`
              : `size ${first.data.length} ≠ ${ring.expectedSlot0.length}`,
          });
        }

        // The path before issue 27, on the main thread, for comparison.
        const syncMs: number[] = [];
        const eluBefore = perf.eventLoopUtilization();
        for (let i = 0; i < Math.min(SYNC_BASELINE_FRAMES, options.frames); i++) {
          const pooled = pool.copy(ring.frame(i));
          const t = performance.now();
          downloadOnThisThread(pooled);
          syncMs.push(performance.now() - t);
          pool.release(pooled);
        }
        report.record('frames', `${step} sync baseline`, 'ok', {
          path: 'CudaBuffer.download() + de-interleave (NV12, JS) or convertToYuv (RGBA), on the main thread',
          frames: syncMs.length,
          wallMs: ms(syncMs),
          eventLoopUtilisation: round(perf.eventLoopUtilization(eluBefore).utilization, 3),
        });
      } catch (error) {
        report.record('frames', step, 'failed', { error: errorMessage(error) });
      } finally {
        pool.close();
        ring.free();
      }
    }
  }
}
