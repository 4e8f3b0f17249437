/**
 * The network lab (tests and benches only; not part of the published package): an impaired UDP
 * path between a WebRTC client and any WebRTC server. See docs/network-lab.md.
 */

export { ManualClock, seededRandom, systemClock, type LabClock } from './clock.ts';
export { DelayHistogram, histogramQuantile, type HistogramSnapshot } from './histogram.ts';
export { ImpairedLink, type LinkCounters } from './impaired-link.ts';
export {
  burstLoss,
  burstLossFigures,
  CLEAN_LINK,
  type GilbertElliott,
  type LabImpairment,
  type LinkImpairment,
  type LinkSettings,
  type ScheduleStep,
} from './impairment.ts';
export { NetworkLab, type LabCounters, type NetworkLabOptions, type RunningSchedule } from './network-lab.ts';
export { candidateEndpoints, rewriteCandidate, rewriteSdp, type Endpoint } from './sdp-rewrite.ts';
export { rewriteJson, SignallingProxy } from './signalling-proxy.ts';
export { UdpRelay, type RelayCounters, type RelayedDatagram } from './udp-relay.ts';
