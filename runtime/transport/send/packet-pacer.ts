/**
 * Spreads a connection's video packets over time when its path is constrained (issue 25 part 2):
 * at a pacing rate (2.5 × the congestion controller's target) instead of a frame's packets leaving
 * back to back. A burst the size of a keyframe at a bottleneck's rate fills its queue at once
 * (tail drops, a delay spike the delay-based estimator reads as overuse); paced, the queue sees
 * the frame arrive at a rate it drains.
 *
 * Only when constrained (transport-feedback.ts decides: the target is near what is being sent):
 * on a clean link packets leave at once, as before, and nothing per packet is allocated. Pacing
 * is a leaky bucket in virtual time — each packet leaves when the one before it has "drained" at
 * the rate — served by a timer that sends every packet due when it fires (a late timer on a
 * loaded machine sends late, not slower). A packet never waits more than `maxDelayMs`: past that
 * the queue is flushed (a pacer that lags its encoder only adds latency).
 */

/** Writes one protected packet to the connection's socket (the sender's own write). */
export type PacketWrite = (packet: Buffer) => void;

interface Queued {
  readonly at: number;
  readonly packet: Buffer;
  readonly write: PacketWrite;
}

export interface PacerOptions {
  readonly now?: () => number;
  /** Longest a packet may wait, ms. */
  readonly maxDelayMs?: number;
  readonly setTimer?: (fn: () => void, ms: number) => unknown;
  readonly clearTimer?: (timer: unknown) => void;
}

export class PacketPacer {
  readonly #now: () => number;
  readonly #maxDelayMs: number;
  readonly #setTimer: (fn: () => void, ms: number) => unknown;
  readonly #clearTimer: (timer: unknown) => void;
  /** When the bucket has drained what was reserved so far (virtual time, ms). */
  #freeAt = -Infinity;
  readonly #queue: Queued[] = [];
  #head = 0;
  #timer: unknown;
  #timerAt = Infinity;

  constructor(options: PacerOptions = {}) {
    this.#now = options.now ?? (() => performance.now());
    this.#maxDelayMs = options.maxDelayMs ?? 250;
    this.#setTimer = options.setTimer ?? ((fn, ms) => setTimeout(fn, ms));
    this.#clearTimer = options.clearTimer ?? ((timer) => clearTimeout(timer as ReturnType<typeof setTimeout>));
  }

  /** Packets waiting. */
  get queued(): number {
    return this.#queue.length - this.#head;
  }

  /**
   * Reserves the next slot for a packet of `bytes` at `rateBps` (undefined: not paced) and
   * returns when it will leave (ms of the clock): now, or later behind what was reserved before.
   */
  reserve(bytes: number, rateBps: number | undefined): number {
    const now = this.#now();
    if (rateBps === undefined || !(rateBps > 0)) {
      // Not paced: leaves now, or right behind packets still waiting (order kept).
      return this.queued === 0 ? now : Math.max(now, this.#freeAt);
    }
    const start = Math.min(Math.max(now, this.#freeAt), now + this.#maxDelayMs);
    this.#freeAt = start + (bytes * 8 * 1000) / rateBps;
    return start;
  }

  /** Sends `packet` at `at` (from `reserve`): at once if due and nothing waits before it. */
  dispatch(at: number, packet: Buffer, write: PacketWrite): void {
    const now = this.#now();
    if (at <= now && this.queued === 0) {
      write(packet);
      return;
    }
    this.#queue.push({ at, packet, write });
    this.#arm(at - now);
  }

  /** Sends everything waiting now (the connection closes, or pacing is turned off). */
  flush(): void {
    this.#drain(Infinity);
  }

  /** Drops everything waiting. */
  clear(): void {
    this.#queue.length = 0;
    this.#head = 0;
    if (this.#timer !== undefined) this.#clearTimer(this.#timer);
    this.#timer = undefined;
    this.#timerAt = Infinity;
  }

  #arm(inMs: number): void {
    const at = this.#now() + Math.max(0, inMs);
    if (this.#timer !== undefined && this.#timerAt <= at) return;
    if (this.#timer !== undefined) this.#clearTimer(this.#timer);
    this.#timerAt = at;
    this.#timer = this.#setTimer(
      () => {
        this.#timer = undefined;
        this.#timerAt = Infinity;
        this.#drain(this.#now());
      },
      Math.max(0, inMs),
    );
  }

  #drain(until: number): void {
    const queue = this.#queue;
    while (this.#head < queue.length && queue[this.#head]!.at <= until) {
      const item = queue[this.#head]!;
      queue[this.#head++] = undefined as unknown as Queued;
      item.write(item.packet);
    }
    if (this.#head === queue.length) {
      queue.length = 0;
      this.#head = 0;
      return;
    }
    if (this.#head > 256) {
      queue.splice(0, this.#head);
      this.#head = 0;
    }
    this.#arm(queue[this.#head]!.at - this.#now());
  }
}
