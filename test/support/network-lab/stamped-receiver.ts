/**
 * The receiving end every lab scenario shares: a libwebrtc (wrtc) video track watched frame by
 * frame. Each decoded frame's arrival time is noted and, when the sender draws the 16-cell frame
 * stamp (models/examples/shared/i420-canvas.ts) at a known place, its id is read, so the sender's
 * emit time of that frame gives the frame's latency (emit → decoded at the receiver; both ends on
 * this machine's clock). Ours, the wrtc reference and aiortc are all measured by this one receiver.
 */

import wrtc from '@roamhq/wrtc';
import { readFrameStamp } from '../../../models/examples/shared/i420-canvas.ts';
import { FrameArrivals } from '../media-fault-probe.ts';

export interface DecodedFrame {
  /** performance.timeOrigin + performance.now() at arrival (epoch ms). */
  readonly at: number;
  /** The stamp's id (16 bits), when the receiver knows where it is. */
  readonly id?: number;
}

/** The receiver's inbound-rtp counters for video (libwebrtc getStats). */
export interface InboundVideo {
  readonly bytesReceived: number;
  readonly packetsReceived: number;
  readonly packetsLost: number;
  readonly framesDecoded: number;
  readonly nackCount: number;
  readonly pliCount: number;
  readonly frameWidth: number;
  readonly frameHeight: number;
  /** FlexFEC/ULPFEC repair packets received, and those the receiver could not use. */
  readonly fecPacketsReceived: number;
  readonly fecPacketsDiscarded: number;
}

export interface StampedReceiverOptions {
  /** Top-left of the stamp in the decoded picture (scaled with the decoded size from this reference width). */
  readonly stamp?: { readonly x: number; readonly y: number; readonly width: number };
}

type FrameEvent = { readonly frame: { readonly width: number; readonly height: number; readonly data: Uint8Array } };

export const epochNow = (): number => performance.timeOrigin + performance.now();

export class StampedReceiver {
  /** Arrival times on performance.now() (for FrameArrivals' gap and count helpers). */
  readonly arrivals = new FrameArrivals();
  readonly frames: DecodedFrame[] = [];
  readonly #sink: InstanceType<typeof wrtc.nonstandard.RTCVideoSink>;

  constructor(track: MediaStreamTrack, options: StampedReceiverOptions = {}) {
    this.#sink = new wrtc.nonstandard.RTCVideoSink(track);
    const stamp = options.stamp;
    const onFrame = (event: FrameEvent): void => {
      const now = performance.now();
      this.arrivals.note(now);
      const { width, data } = event.frame;
      if (stamp === undefined) {
        this.frames.push({ at: performance.timeOrigin + now });
        return;
      }
      // A picture scaled down by the sender's adaptation keeps the stamp at the same relative place.
      const scale = width / stamp.width;
      const id = readFrameStamp((x, y) => data[Math.floor(y * scale) * width + Math.floor(x * scale)] ?? 0, stamp.x, stamp.y);
      this.frames.push({ at: performance.timeOrigin + now, id });
    };
    (this.#sink as unknown as { onframe: (event: FrameEvent) => void }).onframe = onFrame;
  }

  stop(): void {
    this.#sink.stop();
  }
}

/** Reads a wrtc peer's inbound video counters (zeros before any arrive). */
export async function inboundVideo(pc: RTCPeerConnection): Promise<InboundVideo> {
  const zero: InboundVideo = {
    bytesReceived: 0,
    packetsReceived: 0,
    packetsLost: 0,
    framesDecoded: 0,
    nackCount: 0,
    pliCount: 0,
    frameWidth: 0,
    frameHeight: 0,
    fecPacketsReceived: 0,
    fecPacketsDiscarded: 0,
  };
  let found = zero;
  (await pc.getStats()).forEach((entry: Record<string, unknown>) => {
    if (entry['type'] !== 'inbound-rtp' || (entry['kind'] ?? entry['mediaType']) !== 'video') return;
    const n = (key: keyof InboundVideo): number => (typeof entry[key] === 'number' ? (entry[key] as number) : 0);
    found = {
      bytesReceived: n('bytesReceived'),
      packetsReceived: n('packetsReceived'),
      packetsLost: n('packetsLost'),
      framesDecoded: n('framesDecoded'),
      nackCount: n('nackCount'),
      pliCount: n('pliCount'),
      frameWidth: n('frameWidth'),
      frameHeight: n('frameHeight'),
      fecPacketsReceived: n('fecPacketsReceived'),
      fecPacketsDiscarded: n('fecPacketsDiscarded'),
    };
  });
  return found;
}
