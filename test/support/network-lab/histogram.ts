/**
 * A fixed-bucket histogram of milliseconds (the lab's queueing delays): cheap to update for every
 * datagram, and a percentile read from it is the upper bound of the bucket it falls in.
 */

export const DELAY_BUCKETS_MS: readonly number[] = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000];

export interface HistogramSnapshot {
  /** Upper bounds, ms; the last bucket (not listed) is everything above the last bound. */
  readonly boundsMs: readonly number[];
  /** Counts per bucket: `boundsMs.length + 1` entries. */
  readonly counts: readonly number[];
  readonly count: number;
  readonly sumMs: number;
  readonly maxMs: number;
}

export class DelayHistogram {
  readonly #bounds: readonly number[];
  readonly #counts: number[];
  #count = 0;
  #sum = 0;
  #max = 0;

  constructor(bounds: readonly number[] = DELAY_BUCKETS_MS) {
    this.#bounds = bounds;
    this.#counts = new Array<number>(bounds.length + 1).fill(0);
  }

  record(ms: number): void {
    let i = 0;
    while (i < this.#bounds.length && ms > this.#bounds[i]!) i++;
    this.#counts[i]!++;
    this.#count++;
    this.#sum += ms;
    this.#max = Math.max(this.#max, ms);
  }

  snapshot(): HistogramSnapshot {
    return { boundsMs: this.#bounds, counts: [...this.#counts], count: this.#count, sumMs: this.#sum, maxMs: this.#max };
  }
}

/** The bucket bound at or under which a fraction `q` (0–1) of the values lie (the max for the last bucket). */
export function histogramQuantile(snapshot: HistogramSnapshot, q: number): number {
  if (snapshot.count === 0) return NaN;
  const rank = Math.max(1, Math.ceil(q * snapshot.count));
  let seen = 0;
  for (let i = 0; i < snapshot.counts.length; i++) {
    seen += snapshot.counts[i]!;
    if (seen >= rank) return Math.min(snapshot.boundsMs[i] ?? snapshot.maxMs, snapshot.maxMs);
  }
  return snapshot.maxMs;
}
