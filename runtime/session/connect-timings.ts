/**
 * When each step of one peer's connect happened on the runtime's side, from the offer's arrival
 * to "ready": written into the session log's `connection ready` line (`steps`), so a benchmark or
 * an operator can tell which step a slow connect spent its time in (bench/time-to-ready.ts).
 *
 * Times are wall-clock milliseconds (`performance.timeOrigin + performance.now()`, sub-millisecond
 * and monotonic within the process), so a client on the same machine can lay them beside its own.
 * Each step keeps its first time only; recording costs a property write.
 */

/** The runtime's connect steps, in the order they happen. */
export type ConnectStep =
  /** The offer arrived (POST/PUT sdp_params). */
  | 'offer'
  /** werift applied it (setRemoteDescription). */
  | 'offer_applied'
  /** The answer, with every runtime candidate, is ready for the client. */
  | 'answer_ready'
  /** ICE nominated a pair (the peer's ICE state `connected`). */
  | 'ice_connected'
  /** DTLS finished (the peer's connection state `connected`). */
  | 'dtls_connected'
  /** The client's data channel opened on the runtime (SCTP associated, DCEP open received). */
  | 'channel_open'
  /** Peer connected and channel open: the connection is ready. */
  | 'ready';

export function wallClockMs(): number {
  return performance.timeOrigin + performance.now();
}

export class ConnectTimings {
  readonly #at = new Map<ConnectStep, number>();

  constructor(offerAt: number = wallClockMs()) {
    this.#at.set('offer', offerAt);
  }

  /** Records `step` now, unless it was recorded already. */
  mark(step: ConnectStep): void {
    if (!this.#at.has(step)) this.#at.set(step, wallClockMs());
  }

  /** `{offer_at}` (wall clock) and each recorded step as milliseconds after the offer, rounded to 0.1 ms. */
  toFields(): { offer_at: number } & Partial<Record<Exclude<ConnectStep, 'offer'>, number>> {
    const offerAt = this.#at.get('offer')!;
    const fields: { offer_at: number } & Partial<Record<Exclude<ConnectStep, 'offer'>, number>> = {
      offer_at: Math.round(offerAt * 10) / 10,
    };
    for (const [step, at] of this.#at) {
      if (step !== 'offer') fields[step] = Math.round((at - offerAt) * 10) / 10;
    }
    return fields;
  }
}
