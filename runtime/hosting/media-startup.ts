/**
 * The media work done once per process at start, so no client's first connect waits for it: the
 * DTLS certificate, and which encoder serves each codec (decided by opening the candidates) —
 * reported to the operator as a log line, a metric and an `encoder_backends` event, with whether
 * the native addon loaded. Its answer (is there a hardware H.265 encoder?) sets the default codecs.
 */

import type { Logger } from '../../server-kit/log.ts';
import type { RuntimeEventSink } from '../events/runtime-event-log.ts';
import { describeEncoderBackendSelection, type EncoderBackendRegistry } from '../media/encoder-backends.ts';
import type { RuntimeMetrics } from '../metrics.ts';
import { nativeAddonStatus } from '../native/native-addon.ts';
import { prepareDtlsCertificate } from '../transport/signalling/peer-factory.ts';

export interface MediaStartup {
  /** A hardware H.265 encoder was found. */
  readonly hardwareH265: boolean;
}

export async function prepareMedia(
  log: Logger,
  metrics: Pick<RuntimeMetrics, 'encoderBackend'>,
  events: RuntimeEventSink,
  encoderBackends: EncoderBackendRegistry,
): Promise<MediaStartup> {
  // The process's DTLS certificate, made now rather than during the first client's connect.
  await prepareDtlsCertificate();
  // Which encoder serves each codec is decided once, here, by opening the candidates.
  const backends = await encoderBackends.list();
  for (const listing of backends) {
    if (listing.backend) {
      metrics.encoderBackend.set({ codec: listing.codec, backend: listing.backend.name, hardware: String(listing.backend.hardware) }, 1);
    }
  }
  log.info('encoder backends', { selection: backends.map(describeEncoderBackendSelection) });
  events.publish({
    type: 'encoder_backends',
    selection: backends.map((b) => ({ codec: b.codec, backend: b.backend?.name ?? null, hardware: b.backend?.hardware ?? false })),
  });
  const native = nativeAddonStatus();
  // Without the addon, neither native colour conversion nor the allocator trim after an encoder is freed (native/allocator.ts).
  log.info(
    'native addon',
    native.loaded
      ? { loaded: true, version: native.version }
      : { loaded: false, reason: native.reason, colour_conversion: 'JavaScript', allocator_trim: false },
  );
  return { hardwareH265: backends.some((b) => b.codec === 'h265' && b.backend?.hardware) };
}
