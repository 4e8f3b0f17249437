/**
 * Sends a client the emit time of each frame it receives on the tracks it asked about, keyed by
 * the frame's RTP timestamp as that client sees it — what the client needs to measure
 * glass-to-glass latency (emit → decoded/presented) itself. Batched every 200 ms so the cost is
 * a few small messages a second, and only for clients that subscribe (2.9.0 never does).
 */

import type { EnvelopeBody } from '../../protocol/messages.ts';

const FLUSH_MS = 200;
/** A stalled channel must not grow this without bound. */
const MAX_PENDING = 600;

export class FrameTimesReporter {
  readonly #tracks = new Set<string>();
  readonly #pending = new Map<string, Array<[number, number]>>();
  readonly #send: (body: EnvelopeBody) => void;
  #timer: NodeJS.Timeout | undefined;

  constructor(send: (body: EnvelopeBody) => void) {
    this.#send = send;
  }

  setSubscribed(track: string, subscribed: boolean): void {
    if (subscribed) this.#tracks.add(track);
    else {
      this.#tracks.delete(track);
      this.#pending.delete(track);
    }
  }

  note(track: string, wireTimestamp: number, emittedAtMs: number): void {
    if (!this.#tracks.has(track)) return;
    let frames = this.#pending.get(track);
    if (!frames) this.#pending.set(track, (frames = []));
    if (frames.length >= MAX_PENDING) frames.shift();
    frames.push([wireTimestamp, Math.round(emittedAtMs * 1000) / 1000]);
    this.#timer ??= setTimeout(() => this.flush(), FLUSH_MS);
  }

  flush(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    for (const [track, frames] of this.#pending) {
      if (frames.length > 0) this.#send({ type: 'frame_times', data: { track, frames } });
    }
    this.#pending.clear();
  }

  stop(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#pending.clear();
    this.#tracks.clear();
  }
}
