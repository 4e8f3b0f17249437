/**
 * One direction of an impaired link: datagrams go in with `send`, and come out of `deliver` later,
 * or never. Loss first, then the bottleneck (a FIFO queue with a byte limit, tail drop, served at
 * `capMbps`), then the propagation delay with jitter. Everything runs on an injected clock and
 * random source, so it is deterministic in unit tests.
 *
 * The bottleneck is served in virtual time: a datagram starts serialising when the one before it
 * finished (or when it arrived, if the link was idle), whatever time the timer actually fired at,
 * so a late timer on a loaded machine delays delivery but does not lower the rate. A change of
 * the cap applies at once, to the datagram on the wire too (its whole size at the new rate).
 */

import type { LabClock } from './clock.ts';
import { DelayHistogram, type HistogramSnapshot } from './histogram.ts';
import { applyImpairment, CLEAN_LINK, type LinkImpairment, type LinkSettings } from './impairment.ts';
import { LossProcess } from './loss.ts';

/** What happened to the datagrams of one direction so far. */
export interface LinkCounters {
  readonly packetsIn: number;
  readonly bytesIn: number;
  readonly delivered: number;
  readonly bytesDelivered: number;
  /** Dropped by the independent random loss. */
  readonly droppedRandom: number;
  /** Dropped by the Gilbert–Elliott chain. */
  readonly droppedBurst: number;
  /** Dropped at the tail of a full bottleneck queue. */
  readonly droppedQueue: number;
  readonly bytesDroppedQueue: number;
  /** Delivered before a datagram that was sent earlier (jitter with `reorder`). */
  readonly reordered: number;
  /** Datagrams waiting or in flight now (queue + delay line). */
  readonly inFlight: number;
  /** The most bytes the bottleneck queue held at once. */
  readonly maxQueueBytes: number;
  /** Arrival at the bottleneck → end of its serialisation, ms (only datagrams that met a cap). */
  readonly queueDelay: HistogramSnapshot;
}

export interface ImpairedLinkOptions<T> {
  readonly clock: LabClock;
  readonly random: () => number;
  /** Called for each datagram that makes it through, in delivery order. */
  readonly deliver: (packet: T) => void;
  readonly settings?: LinkImpairment;
}

interface Queued<T> {
  readonly packet: T;
  readonly bytes: number;
  readonly seq: number;
  readonly arrivedAt: number;
}

interface InFlight<T> {
  readonly packet: T;
  readonly bytes: number;
  readonly seq: number;
  readonly due: number;
}

export class ImpairedLink<T> {
  readonly #clock: LabClock;
  readonly #random: () => number;
  readonly #deliver: (packet: T) => void;
  readonly #loss: LossProcess;
  #settings: LinkSettings;
  #seq = 0;
  #closed = false;

  // The bottleneck.
  readonly #queue: Array<Queued<T>> = [];
  #queueBytes = 0;
  /** Virtual time the datagram being serialised finishes (or the last one finished). */
  #linkFreeAt = -Infinity;
  #cancelService: (() => void) | undefined;

  // The delay line, ordered by due time (then by sequence).
  readonly #line: Array<InFlight<T>> = [];
  #lastDue = -Infinity;
  #lastDeliveredSeq = -1;
  #cancelLine: (() => void) | undefined;
  #lineTimerAt = Infinity;

  readonly #histogram = new DelayHistogram();
  #counters = {
    packetsIn: 0,
    bytesIn: 0,
    delivered: 0,
    bytesDelivered: 0,
    droppedRandom: 0,
    droppedBurst: 0,
    droppedQueue: 0,
    bytesDroppedQueue: 0,
    reordered: 0,
    maxQueueBytes: 0,
  };

  constructor(options: ImpairedLinkOptions<T>) {
    this.#clock = options.clock;
    this.#random = options.random;
    this.#deliver = options.deliver;
    this.#loss = new LossProcess(options.random);
    this.#settings = applyImpairment(CLEAN_LINK, options.settings ?? {});
  }

  get settings(): LinkSettings {
    return this.#settings;
  }

  /** Changes some settings; the rest keep their values. Datagrams already delayed keep their time. */
  set(change: LinkImpairment): void {
    this.#settings = applyImpairment(this.#settings, change);
    this.#reschedule();
  }

  /** Back to a clean link (datagrams in flight still arrive). */
  clear(): void {
    this.#settings = CLEAN_LINK;
    this.#reschedule();
  }

  /** The datagram on the wire finishes at the new rate (as if it had started at it); a removed cap empties the queue at once. */
  #reschedule(): void {
    if (this.#cancelService === undefined) return;
    this.#cancelService();
    this.#serve();
  }

  /** The queue's byte limit at the current settings (Infinity without a cap). */
  get queueLimitBytes(): number {
    const { capMbps, queueBytes, queueMs } = this.#settings;
    if (capMbps === null) return Infinity;
    return queueBytes ?? (capMbps * 1e6 * queueMs) / 8 / 1000;
  }

  get counters(): LinkCounters {
    return { ...this.#counters, inFlight: this.#queue.length + this.#line.length, queueDelay: this.#histogram.snapshot() };
  }

  /** A datagram of `bytes` bytes enters the link. */
  send(packet: T, bytes: number): void {
    if (this.#closed) return;
    const c = this.#counters;
    c.packetsIn++;
    c.bytesIn += bytes;
    const verdict = this.#loss.decide(this.#settings.lossPercent, this.#settings.burstLoss);
    if (verdict === 'random') {
      c.droppedRandom++;
      return;
    }
    if (verdict === 'burst') {
      c.droppedBurst++;
      return;
    }
    const seq = this.#seq++;
    const now = this.#clock.now();
    if (this.#settings.capMbps === null && this.#queue.length === 0) {
      this.#propagate(packet, bytes, seq, now);
      return;
    }
    if (this.#queueBytes + bytes > this.queueLimitBytes) {
      c.droppedQueue++;
      c.bytesDroppedQueue += bytes;
      return;
    }
    this.#queue.push({ packet, bytes, seq, arrivedAt: now });
    this.#queueBytes += bytes;
    c.maxQueueBytes = Math.max(c.maxQueueBytes, this.#queueBytes);
    if (this.#cancelService === undefined) this.#serve();
  }

  /** Drops everything waiting and stops all timers. */
  close(): void {
    this.#closed = true;
    this.#cancelService?.();
    this.#cancelLine?.();
    this.#queue.length = 0;
    this.#line.length = 0;
    this.#queueBytes = 0;
  }

  /**
   * Serialises queued datagrams whose (virtual) end time has come, then waits for the next.
   * The head of the queue is the datagram on the wire: it counts in the queue's bytes until done.
   */
  #serve(): void {
    this.#cancelService = undefined;
    if (this.#closed) return;
    const now = this.#clock.now();
    while (this.#queue.length > 0) {
      const head = this.#queue[0]!;
      const cap = this.#settings.capMbps;
      const start = Math.max(this.#linkFreeAt, head.arrivedAt);
      const end = cap === null ? Math.max(start, now) : start + (head.bytes * 8) / (cap * 1e3);
      if (end > now) {
        this.#cancelService = this.#clock.at(end, () => this.#serve());
        return;
      }
      this.#queue.shift();
      this.#queueBytes -= head.bytes;
      this.#linkFreeAt = end;
      if (cap !== null) this.#histogram.record(end - head.arrivedAt);
      this.#propagate(head.packet, head.bytes, head.seq, end);
    }
  }

  /** Puts a datagram that left the bottleneck at `departedAt` on the delay line. */
  #propagate(packet: T, bytes: number, seq: number, departedAt: number): void {
    const { delayMs, jitterMs, reorder } = this.#settings;
    let due = departedAt + delayMs;
    if (jitterMs > 0) due = Math.max(departedAt, due + (this.#random() * 2 - 1) * jitterMs);
    if (!reorder) due = Math.max(due, this.#lastDue);
    this.#lastDue = Math.max(this.#lastDue, due);
    if (due <= this.#clock.now() && this.#line.length === 0) {
      this.#emit(packet, bytes, seq);
      return;
    }
    // Insert in due order; equal times keep their sending order.
    let i = this.#line.length;
    while (i > 0 && (this.#line[i - 1]!.due > due || (this.#line[i - 1]!.due === due && this.#line[i - 1]!.seq > seq))) i--;
    this.#line.splice(i, 0, { packet, bytes, seq, due });
    this.#armLine();
  }

  #armLine(): void {
    const head = this.#line[0];
    if (head === undefined || head.due >= this.#lineTimerAt) return;
    this.#cancelLine?.();
    this.#lineTimerAt = head.due;
    this.#cancelLine = this.#clock.at(head.due, () => this.#flushLine());
  }

  #flushLine(): void {
    this.#cancelLine = undefined;
    this.#lineTimerAt = Infinity;
    if (this.#closed) return;
    const now = this.#clock.now();
    while (this.#line.length > 0 && this.#line[0]!.due <= now) {
      const { packet, bytes, seq } = this.#line.shift()!;
      this.#emit(packet, bytes, seq);
    }
    this.#armLine();
  }

  #emit(packet: T, bytes: number, seq: number): void {
    const c = this.#counters;
    c.delivered++;
    c.bytesDelivered += bytes;
    if (seq < this.#lastDeliveredSeq) c.reordered++;
    else this.#lastDeliveredSeq = seq;
    try {
      this.#deliver(packet);
    } catch {
      // The far end went away while the datagram was on the wire: as on a real network, it is lost.
    }
  }
}
