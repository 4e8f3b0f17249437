/**
 * When each frame of an output video track leaves its queue: the pump between the queue and the
 * encoders.
 *
 * Fixed-rate tracks use a leaky bucket, not a tick grid: a frame that arrives on time leaves at
 * once (no added latency); a burst leaves one frame per 1/fps. Adaptive tracks (`fps: 'adaptive'`
 * or a range; adaptive-pacer.ts) hold each frame until the pacer's slot — an even grid at the
 * model's estimated production rate — or, for a timed batch, until its planned time; a `block`
 * producer waits while more than one batch (plus a small cushion) is ahead of the stream.
 *
 * Nothing leaves while no viewer is connected (before the first, or in a reconnect window): the
 * queue fills and a `block` producer waits in emit(). When a viewer arrives, frames that queued
 * meanwhile are dropped but the newest.
 */
import type { DropPolicy } from '../model/definition.ts';
import type { AdaptivePacer } from './adaptive-pacer.ts';
import { emittedAtOf, plannedAtOf, type QueuedFrame, type VideoFrameQueue } from './video-frame-queue.ts';

/** A frame may leave this much before its slot: absorbs timer jitter in the model's own loop. */
const PACING_SLACK_MS = 4;

/** Where paced frames go, and who says whether anyone is watching. */
export interface PacedFrameOutlet {
  /** A connected viewer, playing or paused: the pacer takes frames at the track's pace. */
  viewed(): boolean;
  /**
   * Encodes and sends one frame. `onTime`: the pacer let it through as soon as it came (it may
   * keep its emit time); `plannedAtMs`: the slot an adaptive track sent it in.
   */
  send(frame: QueuedFrame, onTime: boolean, plannedAtMs?: number): Promise<void>;
  /** `send` threw: the frame is lost, the pacer carries on. */
  sendFailed(error: unknown): void;
  /**
   * How long the viewers' links need before the next frame may go (send-budget.ts): the pacer
   * takes nothing meanwhile. Absent or 0: now.
   */
  sendBudgetWaitMs?(): number;
  /** The pacer waited this long for the send budget (metrics). */
  waitedForSendBudget?(ms: number): void;
}

/** The send budget is looked at again at least this often while waiting (estimates and viewers change). */
const SEND_BUDGET_RECHECK_MS = 50;

export class OutputVideoPacer {
  readonly #queue: VideoFrameQueue;
  readonly #intervalMs: number;
  /** Adaptive pacing; undefined: the fixed leaky bucket. */
  readonly #adaptive: AdaptivePacer | undefined;
  readonly #outlet: PacedFrameOutlet;
  /** When the pacer last let a frame go (performance.now()). */
  #lastSendAt = -Infinity;
  /** The pump holds a frame until its slot (counts as buffered for the adaptive pacer). */
  #holding = false;
  /** The pump, waiting for a viewer to connect. */
  #viewerWaiters: Array<() => void> = [];
  /** Producers waiting for the adaptive pacer to have room (woken at each send). */
  #roomWaiters: Array<() => void> = [];
  #wasViewed = false;
  /** When the previous emit() returned (performance.now()), and the viewing epoch then. */
  #lastEmitReturnAt: number | undefined;
  #lastEmitEpoch = -1;
  /** Bumped whenever viewing starts or stops: an emit gap spanning a change is no production sample. */
  #viewEpoch = 0;

  constructor(queue: VideoFrameQueue, fps: number, adaptive: AdaptivePacer | undefined, outlet: PacedFrameOutlet) {
    this.#queue = queue;
    this.#intervalMs = 1000 / fps;
    this.#adaptive = adaptive;
    this.#outlet = outlet;
  }

  /** Frames waiting to leave: queued, and the one the pump holds for its slot. */
  get buffered(): number {
    return this.#queue.length + (this.#holding ? 1 : 0);
  }

  /**
   * An adaptive track takes a batch: a `block` producer first waits while the stream is full (more
   * than a batch ahead), then the pacer learns of the batch and its production time.
   */
  async handOver(
    pacer: AdaptivePacer,
    frames: number,
    dropPolicy: DropPolicy,
    calledAt: number,
    productionMs: number | undefined,
    timed: boolean,
  ): Promise<void> {
    // A timed batch is not held here: its frames have their times already, and what bounds how far
    // ahead they are is the audio they keep time with (its own backpressure).
    if (dropPolicy === 'block' && !timed) {
      while (!this.#queue.closed && pacer.full(performance.now(), this.buffered)) {
        await new Promise<void>((resolve) => this.#roomWaiters.push(resolve));
      }
    }
    // Without the driver's figure: the gap since the previous emit returned, when viewing held
    // throughout (while nobody watched, the model waited in emit or was not asked to produce).
    const gap =
      this.#lastEmitReturnAt !== undefined && this.#lastEmitEpoch === this.#viewEpoch && this.#outlet.viewed()
        ? calledAt - this.#lastEmitReturnAt
        : undefined;
    pacer.produced(frames, productionMs ?? gap, performance.now(), this.buffered);
  }

  /** An emit() returned: the start of the next production gap. */
  emitReturned(): void {
    this.#lastEmitReturnAt = performance.now();
    this.#lastEmitEpoch = this.#viewEpoch;
  }

  /** The viewers changed: viewing may have started or stopped. */
  viewingChanged(): void {
    const viewed = this.#outlet.viewed();
    if (viewed !== this.#wasViewed) {
      this.#viewEpoch++;
      this.#adaptive?.reset();
    }
    if (viewed && !this.#wasViewed) {
      // Frames that waited while nobody was connected are stale: the newest is all anyone needs.
      this.#queue.dropAllButNewest('stale');
      for (const wake of this.#viewerWaiters.splice(0)) wake();
      this.wakeProducers();
    }
    this.#wasViewed = viewed;
  }

  wakeProducers(): void {
    for (const wake of this.#roomWaiters.splice(0)) wake();
  }

  /** The queue closed: everyone waiting here returns. */
  wakeAll(): void {
    for (const wake of this.#viewerWaiters.splice(0)) wake();
    this.wakeProducers();
  }

  /** Takes frames until the queue closes. */
  async run(): Promise<void> {
    for (;;) {
      // Take nothing while no viewer is connected: the queue fills and emit() applies
      // backpressure. A viewer that paused still lets frames through at the pace (dropped below).
      while (!this.#outlet.viewed() && !this.#queue.closed) {
        await new Promise<void>((resolve) => this.#viewerWaiters.push(resolve));
      }
      // The viewers' links come next: while they are behind, take nothing (the producer waits or
      // its frames are dropped before the encoder), rather than encode what cannot be sent.
      await this.#waitForSendBudget();
      if (this.#adaptive) {
        if (!(await this.#pumpAdaptive(this.#adaptive))) return;
        continue;
      }
      // Strict spacing (1/fps) only for a producer that outruns the track — a free-running model
      // or a batch, i.e. one blocked in emit(). A frame the pacer had to wait for, or a backlog
      // while nobody is blocked (a model at exactly the track's fps never drains one on its own:
      // production equals consumption), may leave after half an interval, so latency stays at
      // the encode time instead of settling one or two frames behind.
      const idle = this.#queue.length === 0;
      const producerBlocked = this.#queue.blockedPushers > 0;
      const frame = await this.#queue.shift();
      if (frame === undefined) return;
      const emittedAt = emittedAtOf(frame);
      const standing =
        !producerBlocked &&
        this.#queue.length > 0 &&
        emittedAt !== undefined &&
        performance.timeOrigin + performance.now() - emittedAt > 1.5 * this.#intervalMs;
      const relaxed = idle || standing;
      const gap = relaxed ? this.#intervalMs / 2 : this.#intervalMs;
      const wait = this.#lastSendAt + gap - PACING_SLACK_MS - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      this.#lastSendAt = performance.now();
      await this.#send(frame, relaxed);
    }
  }

  async #waitForSendBudget(): Promise<void> {
    const outlet = this.#outlet;
    if (outlet.sendBudgetWaitMs === undefined) return;
    let started: number | undefined;
    for (;;) {
      const wait = outlet.sendBudgetWaitMs();
      if (!(wait > 0) || this.#queue.closed || !outlet.viewed()) break;
      started ??= performance.now();
      this.#queue.overflowReason = 'congestion';
      await new Promise((resolve) => setTimeout(resolve, Math.min(wait, SEND_BUDGET_RECHECK_MS)));
    }
    if (started === undefined) return;
    this.#queue.overflowReason = 'queue_full';
    outlet.waitedForSendBudget?.(performance.now() - started);
  }

  /**
   * One frame of an adaptive track: held until the pacer's slot, then sent stamped with that slot
   * (an even grid of RTP timestamps). False once the track closed.
   */
  async #pumpAdaptive(pacer: AdaptivePacer): Promise<boolean> {
    const frame = await this.#queue.shift();
    if (frame === undefined) return false;
    this.#holding = true;
    let slotAt: number;
    try {
      // A timed frame (video following its step's audio) leaves at its own time; the rest at the pacer's.
      slotAt = plannedAtOf(frame) ?? pacer.slot(performance.now());
      const wait = slotAt - performance.now();
      if (wait > 0.5) await new Promise((resolve) => setTimeout(resolve, wait));
    } finally {
      this.#holding = false;
    }
    pacer.sent(slotAt, performance.now());
    this.wakeProducers();
    this.#lastSendAt = performance.now();
    await this.#send(frame, false, slotAt);
    return true;
  }

  async #send(frame: QueuedFrame, onTime: boolean, plannedAtMs?: number): Promise<void> {
    try {
      await this.#outlet.send(frame, onTime, plannedAtMs);
    } catch (error) {
      this.#outlet.sendFailed(error);
    } finally {
      this.#queue.release(frame);
    }
  }
}
