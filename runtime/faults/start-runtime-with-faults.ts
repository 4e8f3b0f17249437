/**
 * A runtime whose peers carry test faults (peer-faults.ts: RTP loss, a network impairment, the
 * blackhole): what the media-fault, ICE-restart and readiness tests and bench/media-faults.ts
 * start. The faults travel beside the options, not in them, so `RuntimeOptions` stays what an
 * operator can set.
 */

import { composeRuntime, type Runtime } from '../server.ts';
import type { RuntimeOptions } from '../runtime-options.ts';
import type { PeerFaults } from './peer-faults.ts';

export function startRuntimeWithFaults(options: RuntimeOptions, faults: PeerFaults): Promise<Runtime> {
  return composeRuntime(options, { peerFaults: faults });
}
