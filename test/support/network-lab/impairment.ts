/**
 * What the lab does to one direction of a link, and how a change is applied.
 *
 * The order a datagram meets these in is that of a path with one bottleneck: random and bursty
 * loss (a lossy radio hop), then the bottleneck's queue and its serialisation at `capMbps` (tail
 * drop when the queue is full), then the propagation delay with its jitter. See
 * docs/network-lab.md for the semantics of each field.
 */

/**
 * Gilbert–Elliott bursty loss: a two-state Markov chain stepped once per datagram. In the Good
 * state a datagram is lost with probability `lossInGood` (default 0), in the Bad state with
 * `lossInBad` (default 1). `p` = P(Good → Bad), `r` = P(Bad → Good). With the defaults the mean
 * loss is p / (p + r) and the mean burst (run of Bad datagrams) is 1 / r datagrams;
 * `burstLoss()` computes p and r from those two figures.
 */
export interface GilbertElliott {
  readonly p: number;
  readonly r: number;
  readonly lossInGood?: number;
  readonly lossInBad?: number;
}

/** A change to one direction: a field left out keeps its value; `null` turns it off. */
export interface LinkImpairment {
  /** Independent random loss, percent of datagrams (0–100). */
  readonly lossPercent?: number;
  /** Bursty loss on top of the random loss (`null`: off). */
  readonly burstLoss?: GilbertElliott | null;
  /** One-way propagation delay, ms. */
  readonly delayMs?: number;
  /** Each datagram's delay is `delayMs` plus a uniform draw in [−jitterMs, +jitterMs] (never below 0). */
  readonly jitterMs?: number;
  /**
   * Whether jitter may reorder datagrams (netem's default): each is delivered at its own time.
   * false (the default): a datagram is never delivered before one sent earlier, so jitter only
   * adds delay, as a path whose jitter comes from queues behaves.
   */
  readonly reorder?: boolean;
  /** The bottleneck's rate, Mbit/s (10^6 bit/s, counting UDP payload bytes); `null`: no cap. */
  readonly capMbps?: number | null;
  /** The bottleneck queue's limit as time at the current cap, ms (default 200). */
  readonly queueMs?: number;
  /** The queue's limit in bytes; when set it wins over `queueMs` (`null`: use `queueMs`). */
  readonly queueBytes?: number | null;
}

/** Every setting of one direction, resolved. */
export interface LinkSettings {
  readonly lossPercent: number;
  readonly burstLoss: GilbertElliott | null;
  readonly delayMs: number;
  readonly jitterMs: number;
  readonly reorder: boolean;
  readonly capMbps: number | null;
  readonly queueMs: number;
  readonly queueBytes: number | null;
}

export const CLEAN_LINK: LinkSettings = Object.freeze({
  lossPercent: 0,
  burstLoss: null,
  delayMs: 0,
  jitterMs: 0,
  reorder: false,
  capMbps: null,
  queueMs: 200,
  queueBytes: null,
});

/** Both directions: `down` is server → client, `up` client → server. */
export interface LabImpairment {
  readonly down?: LinkImpairment;
  readonly up?: LinkImpairment;
}

/** One step of a schedule: at `at` ms after the schedule starts, apply `down` and `up`. */
export interface ScheduleStep extends LabImpairment {
  readonly at: number;
}

function check(condition: boolean, message: string): void {
  if (!condition) throw new RangeError(`network lab: ${message}`);
}

const probability = (value: number | undefined): boolean => value === undefined || (value >= 0 && value <= 1);

/** `settings` with `change` applied; throws RangeError for a value out of range. */
export function applyImpairment(settings: LinkSettings, change: LinkImpairment): LinkSettings {
  const next: LinkSettings = {
    ...settings,
    ...(Object.fromEntries(Object.entries(change).filter(([, v]) => v !== undefined)) as Partial<LinkSettings>),
  };
  check(next.lossPercent >= 0 && next.lossPercent <= 100, `lossPercent ${next.lossPercent} is not in 0–100`);
  check(next.delayMs >= 0 && Number.isFinite(next.delayMs), `delayMs ${next.delayMs} must be ≥ 0`);
  check(next.jitterMs >= 0 && Number.isFinite(next.jitterMs), `jitterMs ${next.jitterMs} must be ≥ 0`);
  check(next.capMbps === null || next.capMbps > 0, `capMbps ${next.capMbps} must be > 0 (null: no cap)`);
  check(next.queueMs > 0, `queueMs ${next.queueMs} must be > 0`);
  check(next.queueBytes === null || next.queueBytes > 0, `queueBytes ${next.queueBytes} must be > 0 (null: use queueMs)`);
  const burst = next.burstLoss;
  if (burst) {
    check(
      burst.p >= 0 && burst.p <= 1 && burst.r > 0 && burst.r <= 1,
      `burstLoss needs 0 ≤ p ≤ 1 and 0 < r ≤ 1 (got p ${burst.p}, r ${burst.r})`,
    );
    check(probability(burst.lossInGood) && probability(burst.lossInBad), 'burstLoss lossInGood and lossInBad are probabilities (0–1)');
  }
  return Object.freeze(next);
}

/**
 * Gilbert–Elliott parameters for a mean loss and a mean burst length (Good loses nothing, Bad
 * loses everything): r = 1 / meanBurst, p = r · loss / (1 − loss).
 * @example burstLoss({ meanLossPercent: 5, meanBurst: 3 }) // { p: 0.01754…, r: 0.3333… }
 */
export function burstLoss(options: { readonly meanLossPercent: number; readonly meanBurst: number }): GilbertElliott {
  const loss = options.meanLossPercent / 100;
  check(loss >= 0 && loss < 1, `meanLossPercent ${options.meanLossPercent} must be in [0, 100)`);
  check(options.meanBurst >= 1, `meanBurst ${options.meanBurst} must be ≥ 1 datagram`);
  const r = 1 / options.meanBurst;
  return { p: (r * loss) / (1 - loss), r };
}

/** The long-run loss (0–1) and mean Bad-state run length (datagrams) of a Gilbert–Elliott chain. */
export function burstLossFigures(model: GilbertElliott): { readonly meanLoss: number; readonly meanBadRun: number } {
  const bad = model.p / (model.p + model.r);
  return { meanLoss: bad * (model.lossInBad ?? 1) + (1 - bad) * (model.lossInGood ?? 0), meanBadRun: 1 / model.r };
}
