/**
 * Watches a received video track in Node (wrtc's RTCVideoSink): counts decoded frames and
 * samples pixels of the latest one, in I420.
 */

import { wrtc } from '../../client/node.ts';

export interface I420Sample {
  readonly y: number;
  readonly u: number;
  readonly v: number;
}

export class VideoProbe {
  frames = 0;
  width = 0;
  height = 0;
  /** Luma at the frame centre for each received frame, in arrival order (the first 2,000). */
  readonly centreLuma: number[] = [];
  /** Arrival time (performance.now()) of each received frame (the first 2,000). */
  readonly arrivals: number[] = [];
  #latest: Uint8Array | undefined;
  readonly #sink: { stop(): void; onframe: ((event: { frame: { width: number; height: number; data: Uint8Array } }) => void) | null };

  constructor(track: MediaStreamTrack) {
    const Sink = (wrtc as unknown as { nonstandard: { RTCVideoSink: new (t: MediaStreamTrack) => VideoProbe['_sink'] } }).nonstandard
      .RTCVideoSink;
    this.#sink = new Sink(track);
    this.#sink.onframe = ({ frame }) => {
      this.frames++;
      this.width = frame.width;
      this.height = frame.height;
      this.#latest = frame.data;
      if (this.centreLuma.length < 2_000) {
        this.centreLuma.push(frame.data[Math.floor(frame.height / 2) * frame.width + Math.floor(frame.width / 2)]!);
        this.arrivals.push(performance.now());
      }
    };
  }

  /** For the type above only. */
  declare readonly _sink: {
    stop(): void;
    onframe: ((event: { frame: { width: number; height: number; data: Uint8Array } }) => void) | null;
  };

  /** Y, U and V at a pixel of the latest frame. */
  sample(x: number, y: number): I420Sample {
    const data = this.#latest;
    if (!data) throw new Error('no frame received yet');
    const w = this.width;
    const h = this.height;
    const cw = Math.ceil(w / 2);
    const ch = Math.ceil(h / 2);
    const uv = Math.floor(y / 2) * cw + Math.floor(x / 2);
    return { y: data[y * w + x]!, u: data[w * h + uv]!, v: data[w * h + cw * ch + uv]! };
  }

  /** Mean luma of the latest frame. */
  meanLuma(): number {
    const data = this.#latest;
    if (!data) throw new Error('no frame received yet');
    let sum = 0;
    const n = this.width * this.height;
    for (let i = 0; i < n; i += 7) sum += data[i]!;
    return sum / Math.ceil(n / 7);
  }

  stop(): void {
    this.#sink.stop();
  }
}

/** Polls `check` until it returns true or the time runs out. */
export async function waitUntil(check: () => boolean | Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * Waits until `read` has returned the same value for `stillMs` in a row (the wait restarts
 * whenever it changes), or fails after `timeoutMs`. For "what was in flight has landed" before
 * checking that nothing more comes: a fixed sleep is too short for a loaded machine's encoder
 * and decoder, while this adapts to them and still fails if the flow never stops.
 */
export async function waitUntilStill(
  read: () => unknown | Promise<unknown>,
  stillMs: number,
  timeoutMs: number,
  what: string,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let seen = JSON.stringify(await read());
  let since = performance.now();
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    const now = JSON.stringify(await read());
    if (now !== seen) [seen, since] = [now, performance.now()];
    if (performance.now() - since >= stillMs) return;
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} to stand still for ${stillMs} ms (last: ${seen})`);
  }
}

/** True when two samples are within `tolerance` on each of Y, U and V. */
export function near(actual: I420Sample, expected: I420Sample, tolerance: number): boolean {
  return (
    Math.abs(actual.y - expected.y) <= tolerance &&
    Math.abs(actual.u - expected.u) <= tolerance &&
    Math.abs(actual.v - expected.v) <= tolerance
  );
}
