/**
 * A stream's sender clock as a receiver learns it from RTCP sender reports — what a browser uses
 * to lip-sync — and the wall time of an RTP timestamp on it. For the A/V sync tests.
 */

import type { RtcpSrPacket } from 'werift';

const NTP_EPOCH_OFFSET_S = 2_208_988_800;

/** The latest sender report of one stream: wall time (ms) at an RTP timestamp. */
export interface SenderClock {
  readonly ntpMs: number;
  readonly rtp: number;
}

export function senderClockOf(report: RtcpSrPacket): SenderClock {
  const ntp = report.senderInfo.ntpTimestamp;
  const seconds = Number(ntp >> 32n) - NTP_EPOCH_OFFSET_S;
  const fraction = Number(ntp & 0xffffffffn) / 2 ** 32;
  return { ntpMs: (seconds + fraction) * 1000, rtp: report.senderInfo.rtpTimestamp };
}

/** Wall time of `rtp` on a `clockRate` stream, by the stream's sender report (wrap-safe). */
export function wallTime(clock: SenderClock, rtp: number, clockRate: number): number {
  const delta = (rtp - clock.rtp) | 0; // signed 32-bit difference: a wrap between the two reads right
  return clock.ntpMs + (delta / clockRate) * 1000;
}
