/**
 * Decides, datagram by datagram, which are lost: independent random loss and a Gilbert–Elliott
 * chain (its state carries over from one datagram to the next, which is what makes bursts).
 */

import type { GilbertElliott } from './impairment.ts';

export type LossVerdict = 'pass' | 'random' | 'burst';

export class LossProcess {
  readonly #random: () => number;
  /** The Gilbert–Elliott chain's state; starts (and restarts when the model changes) in Good. */
  #bad = false;
  #model: GilbertElliott | null = null;

  constructor(random: () => number) {
    this.#random = random;
  }

  /** Whether the chain is in its Bad state now. */
  get inBadState(): boolean {
    return this.#bad;
  }

  /** One datagram's fate under `lossPercent` and `burst`. */
  decide(lossPercent: number, burst: GilbertElliott | null): LossVerdict {
    if (burst !== this.#model) {
      this.#model = burst;
      this.#bad = false;
    }
    let verdict: LossVerdict = 'pass';
    if (burst) {
      // Step the chain, then draw this datagram's loss in the state it is now in.
      this.#bad = this.#bad ? this.#random() >= burst.r : this.#random() < burst.p;
      const lossProbability = this.#bad ? (burst.lossInBad ?? 1) : (burst.lossInGood ?? 0);
      if (lossProbability >= 1 || (lossProbability > 0 && this.#random() < lossProbability)) verdict = 'burst';
    }
    if (verdict === 'pass' && lossPercent > 0 && this.#random() < lossPercent / 100) verdict = 'random';
    return verdict;
  }
}
