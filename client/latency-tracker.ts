/**
 * Measures glass-to-glass latency of one output video track in a browser: the runtime sends the
 * emit time of each frame keyed by its RTP timestamp (`frame_times`), the page's
 * `requestVideoFrameCallback` reports when each frame (by RTP timestamp) was presented, and the
 * difference — corrected by the client–server clock offset measured with pings — is the
 * latency from the model's emit() to the picture.
 */

const WINDOW = 300;
const MEMORY = 600;

export interface LatencySummary {
  readonly track: string;
  readonly p50: number;
  readonly p95: number;
  readonly samples: number;
}

interface FrameCallbackMetadata {
  readonly rtpTimestamp?: number;
  readonly presentationTime: number;
}

interface VideoWithFrameCallback {
  requestVideoFrameCallback(callback: (now: number, metadata: FrameCallbackMetadata) => void): number;
  cancelVideoFrameCallback(handle: number): void;
}

export class LatencyTracker {
  readonly track: string;
  readonly #emitTimes = new Map<number, number>();
  readonly #samples: number[] = [];
  readonly #video: VideoWithFrameCallback;
  /** Server clock minus client clock, ms (from the ping with the smallest round trip). */
  #offset: number | undefined;
  #bestRtt = Infinity;
  #handle: number | undefined;
  #stopped = false;

  constructor(track: string, video: unknown) {
    const candidate = video as Partial<VideoWithFrameCallback> | null;
    if (!candidate || typeof candidate.requestVideoFrameCallback !== 'function') {
      throw new TypeError('trackLatency needs a <video> element with requestVideoFrameCallback (a browser).');
    }
    this.track = track;
    this.#video = candidate as VideoWithFrameCallback;
    this.#schedule();
  }

  /** A ping: sent at `sentAt`, answered at `receivedAt` (client ms), stamped `serverTime` (server ms). */
  addClockSample(sentAt: number, receivedAt: number, serverTime: number): void {
    const rtt = receivedAt - sentAt;
    if (rtt > this.#bestRtt) return;
    this.#bestRtt = rtt;
    this.#offset = serverTime - (sentAt + receivedAt) / 2;
  }

  addEmitTimes(frames: ReadonlyArray<readonly [number, number]>): void {
    for (const [rtpTimestamp, emittedAt] of frames) {
      this.#emitTimes.set(rtpTimestamp, emittedAt);
      if (this.#emitTimes.size > MEMORY) this.#emitTimes.delete(this.#emitTimes.keys().next().value as number);
    }
  }

  summary(): LatencySummary | undefined {
    if (this.#samples.length === 0) return undefined;
    const sorted = [...this.#samples].sort((a, b) => a - b);
    const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
    return { track: this.track, p50: at(0.5), p95: at(0.95), samples: sorted.length };
  }

  stop(): void {
    this.#stopped = true;
    if (this.#handle !== undefined) this.#video.cancelVideoFrameCallback(this.#handle);
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#handle = this.#video.requestVideoFrameCallback((_now, metadata) => {
      this.#onFrame(metadata);
      this.#schedule();
    });
  }

  #onFrame(metadata: FrameCallbackMetadata): void {
    if (metadata.rtpTimestamp === undefined || this.#offset === undefined) return;
    const emittedAt = this.#emitTimes.get(metadata.rtpTimestamp);
    if (emittedAt === undefined) return;
    const presentedAt = performance.timeOrigin + metadata.presentationTime + this.#offset;
    this.#samples.push(presentedAt - emittedAt);
    if (this.#samples.length > WINDOW) this.#samples.shift();
  }
}
