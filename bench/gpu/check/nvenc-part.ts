/**
 * Part (b): the NVENC probe against the driver, and what the runtime makes of it. On a GPU without
 * an encoder engine (H100, H200) the probe must say so with the library's own error code, and the
 * runtime's encoder selection must fall back to x264 / x265 and record why.
 */
import { describeEncoderBackendSelection, listEncoderBackends } from '../../../runtime/media/encoder-backends.ts';
import { nativeAddon, nativeAddonStatus } from '../../../runtime/native/native-addon.ts';
import { errorMessage, type CheckReport } from './record.ts';

/** The NVENCSTATUS or CUresult name in a probe's reason, e.g. NV_ENC_ERR_UNSUPPORTED_DEVICE. */
export function driverErrorCode(reason: string | undefined): string | undefined {
  return /\b(NV_ENC_ERR_[A-Z_]+|CUDA_ERROR_[A-Z_]+)\b/.exec(reason ?? '')?.[1];
}

export async function runNvencPart(report: CheckReport): Promise<void> {
  const addon = nativeAddon();
  if (!addon) {
    report.record('nvenc', 'probe', 'failed', { error: `native addon ${nativeAddonStatus().reason ?? 'not loaded'}` });
  } else {
    try {
      const probe = await addon.nvencProbe(0);
      report.record('nvenc', 'probe', probe.available ? 'ok' : 'unavailable', {
        available: probe.available,
        errorCode: driverErrorCode(probe.reason),
        reason: probe.reason,
        deviceName: probe.deviceName,
        driverApi: probe.driverApi,
        codecs: [...probe.codecs],
        compiledIn: probe.compiledIn,
      });
    } catch (error) {
      report.record('nvenc', 'probe', 'failed', { error: errorMessage(error) });
    }
  }

  // The runtime's own choice, as its start-up log and /metrics report it.
  const listings = await listEncoderBackends();
  for (const listing of listings.filter((l) => l.codec === 'h264' || l.codec === 'h265')) {
    const nvenc = listing.candidates.filter((c) => c.hardware);
    report.record('nvenc', `selection ${listing.codec}`, listing.backend ? 'ok' : 'failed', {
      backend: listing.backend?.name ?? null,
      hardware: listing.backend?.hardware ?? null,
      fallback: listing.backend ? !listing.backend.hardware : null,
      nvencPassedOver: nvenc.map((c) => `${c.name}: ${c.status}`),
      summary: describeEncoderBackendSelection(listing),
    });
  }
}
