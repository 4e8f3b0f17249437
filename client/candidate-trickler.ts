/**
 * Sends the ICE candidates a client peer finds after its offer went out to the runtime
 * (`POST .../connections/{cid}/ice_candidates`), in order, a batch per request: candidates come
 * in bursts (one per interface and server), and one request per burst is enough.
 */

import { ArclightError } from '../protocol/errors.ts';
import type { IceCandidateEntry, IceCandidatesRequest } from '../protocol/transport.ts';

/** How long a candidate waits for others of its burst before the batch goes. */
const BATCH_MS = 20;

export class CandidateTrickler {
  readonly #send: (request: IceCandidatesRequest) => Promise<void>;
  readonly #onError: (error: ArclightError) => void;
  #batch: IceCandidateEntry[] = [];
  #ended = false;
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** The request in flight: the next waits for it, so the runtime sees candidates in order. */
  #chain: Promise<void> = Promise.resolve();
  #stopped = false;

  /** `onError`: a refusal the app should hear of (not the races of a connection moving on). */
  constructor(send: (request: IceCandidatesRequest) => Promise<void>, onError: (error: ArclightError) => void) {
    this.#send = send;
    this.#onError = onError;
  }

  /** A candidate, or `undefined` for the end of them. */
  push(candidate: IceCandidateEntry | undefined): void {
    if (this.#stopped || this.#ended) return;
    if (candidate) this.#batch.push(candidate);
    else this.#ended = true;
    this.#timer ??= setTimeout(() => this.#flush(), BATCH_MS);
  }

  /** Sends nothing more (the link closed or was replaced). */
  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#batch = [];
  }

  /** Resolves once everything pushed so far has been sent (or refused). */
  async settled(): Promise<void> {
    while (this.#timer !== undefined) await new Promise((resolve) => setTimeout(resolve, BATCH_MS));
    await this.#chain;
  }

  #flush(): void {
    this.#timer = undefined;
    if (this.#stopped) return;
    const request: IceCandidatesRequest = { candidates: this.#batch, ...(this.#ended ? { end_of_candidates: true } : {}) };
    this.#batch = [];
    this.#chain = this.#chain.then(async () => {
      if (this.#stopped) return;
      try {
        await this.#send(request);
      } catch (error) {
        if (this.#stopped) return;
        const failure =
          error instanceof ArclightError
            ? error
            : new ArclightError('connection_failed', String((error as Error)?.message ?? error), { cause: error });
        // The connection moved on (a newer offer, closed, the runtime restarted): nothing to tell.
        if (['not_ready', 'connection_closed', 'connection_not_found', 'connection_failed'].includes(failure.code)) return;
        this.#onError(failure);
      }
    });
  }
}
