/**
 * Per-frame annotations for a published input video track, in a browser.
 *
 * An `RTCRtpScriptTransform` on the track's sender sees every encoded frame just before it is
 * packetised, with the RTP timestamp it will carry on the wire. The transform (a tiny worker) only
 * reports that timestamp and passes the frame on untouched; the main thread turns each report into
 * an `input_frame_metadata` message keyed by the timestamp, which the runtime joins with the
 * decoded frame. Nothing is added to the media itself, so any decoder reads it as usual.
 *
 * Capture time: browsers do not expose it on encoded frames, but the RTP timestamp is the capture
 * clock at 90 kHz plus a per-stream offset. The stamper anchors that clock at the frame that
 * reached the transform soonest after capture (smallest "seen − rtp" difference), so capture times
 * keep the sender's exact spacing and are late by at most the fastest encode observed.
 */

import { ArclightError } from '../protocol/errors.ts';

/** What the page knows about one encoded input frame. */
export interface InputFrameInfo {
  /** The RTP timestamp the frame carries on the wire. */
  readonly rtpTimestamp: number;
  /** When the frame was captured, Unix epoch ms on this page's clock. */
  readonly captureTime: number;
}

/**
 * The transform worker: passes every frame on untouched and, while reporting is on, posts its RTP
 * timestamp and the time it was seen. Browsers apply a transform only if it is set before the
 * first negotiation, so the client installs it at connect and switches reporting on at publish.
 */
const WORKER_SOURCE = `
let reporting = false;
self.onmessage = (event) => { reporting = event.data === true; };
onrtctransform = (event) => {
  const transformer = event.transformer;
  transformer.readable
    .pipeThrough(new TransformStream({
      transform(frame, controller) {
        if (reporting) {
          const meta = frame.getMetadata();
          const rtpTimestamp = typeof meta.rtpTimestamp === 'number' ? meta.rtpTimestamp : frame.timestamp;
          self.postMessage({ rtpTimestamp, seenAt: performance.timeOrigin + performance.now() });
        }
        controller.enqueue(frame);
      },
    }))
    .pipeTo(transformer.writable)
    .catch(() => {});
};
`;

interface ScriptTransformConstructor {
  new (worker: Worker, options?: unknown): RTCRtpScriptTransform;
}

function scriptTransform(): ScriptTransformConstructor | undefined {
  return (globalThis as { RTCRtpScriptTransform?: ScriptTransformConstructor }).RTCRtpScriptTransform;
}

/** Whether this platform can annotate input frames (browsers with encoded transforms; not wrtc). */
export function inputFrameMetadataSupported(): boolean {
  return (
    scriptTransform() !== undefined &&
    typeof Worker === 'function' &&
    typeof Blob === 'function' &&
    typeof URL.createObjectURL === 'function'
  );
}

const RTP_CLOCK_KHZ = 90;
const RTP_WRAP = 2 ** 32;

/** Maps RTP timestamps of one stream to capture times (see the module comment). */
export class CaptureClock {
  #lastRtp: number | undefined;
  #unwrapped = 0;
  /** Epoch ms of unwrapped RTP timestamp 0, from the best (earliest) observation so far. */
  #anchor = Infinity;

  /** Records that the frame with `rtpTimestamp` was seen at `seenAt`; returns its capture time. */
  observe(rtpTimestamp: number, seenAt: number): number {
    if (this.#lastRtp === undefined) {
      this.#unwrapped = rtpTimestamp;
    } else {
      let delta = (rtpTimestamp - this.#lastRtp) % RTP_WRAP;
      if (delta > RTP_WRAP / 2) delta -= RTP_WRAP;
      else if (delta < -RTP_WRAP / 2) delta += RTP_WRAP;
      this.#unwrapped += delta;
    }
    this.#lastRtp = rtpTimestamp;
    const rtpMs = this.#unwrapped / RTP_CLOCK_KHZ;
    this.#anchor = Math.min(this.#anchor, seenAt - rtpMs);
    return this.#anchor + rtpMs;
  }
}

/**
 * A pass-through transform on one sender, installed before negotiation; `start` makes it report
 * each encoded frame to `onFrame` (main thread), `pause` quiets it again.
 */
export class InputFrameStamper {
  readonly #worker: Worker;
  readonly #url: string;
  readonly #sender: RTCRtpSender;
  #onFrame: ((frame: InputFrameInfo) => void) | undefined;
  #clock = new CaptureClock();

  constructor(sender: RTCRtpSender) {
    const Transform = scriptTransform();
    if (!Transform || !inputFrameMetadataSupported()) {
      throw new ArclightError(
        'unsupported',
        'Input frame metadata needs RTCRtpScriptTransform (a current browser); this platform has none.',
      );
    }
    this.#url = URL.createObjectURL(new Blob([WORKER_SOURCE], { type: 'text/javascript' }));
    this.#worker = new Worker(this.#url);
    this.#worker.onmessage = (event: MessageEvent<{ rtpTimestamp: number; seenAt: number }>) => {
      const { rtpTimestamp, seenAt } = event.data;
      this.#onFrame?.({ rtpTimestamp, captureTime: this.#clock.observe(rtpTimestamp, seenAt) });
    };
    this.#sender = sender;
    sender.transform = new Transform(this.#worker, {});
  }

  start(onFrame: (frame: InputFrameInfo) => void): void {
    this.#onFrame = onFrame;
    this.#clock = new CaptureClock();
    this.#worker.postMessage(true);
  }

  pause(): void {
    this.#onFrame = undefined;
    this.#worker.postMessage(false);
  }

  stop(): void {
    this.pause();
    try {
      this.#sender.transform = null;
    } catch {
      // the peer connection is closed
    }
    this.#worker.terminate();
    URL.revokeObjectURL(this.#url);
  }
}
