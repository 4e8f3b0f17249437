/**
 * The runtime's state changes as a sequence of events (sessions, connections, model load,
 * encoders, recording segments) for operators and the coordinator: `GET /events` streams them.
 * The newest are kept, numbered, so a reader that reconnects with `Last-Event-ID` misses
 * nothing that is still kept, and one that starts late still sees how the runtime came up.
 */

import type { RuntimeEvent, RuntimeEventBody } from '../../protocol/session-logs.ts';

/** Events kept for readers that resume or start late. */
const DEFAULT_KEPT = 1000;

export type RuntimeEventListener = (event: RuntimeEvent) => void;

/** What the parts of the runtime that report events are given: publishing only. */
export interface RuntimeEventSink {
  publish(body: RuntimeEventBody): void;
}

export class RuntimeEventLog implements RuntimeEventSink {
  readonly #kept: number;
  readonly #now: () => number;
  #events: RuntimeEvent[] = [];
  #lastSeq = 0;
  readonly #listeners = new Set<RuntimeEventListener>();

  constructor(options: { readonly kept?: number; readonly now?: () => number } = {}) {
    this.#kept = options.kept ?? DEFAULT_KEPT;
    this.#now = options.now ?? Date.now;
  }

  get lastSeq(): number {
    return this.#lastSeq;
  }

  publish(body: RuntimeEventBody): void {
    const event = { seq: ++this.#lastSeq, time: this.#now(), ...body } as RuntimeEvent;
    this.#events.push(event);
    if (this.#events.length > this.#kept * 2) this.#events = this.#events.slice(-this.#kept);
    for (const listener of [...this.#listeners]) listener(event);
  }

  /** Kept events with seq > `after`, oldest first, and how many after it are no longer kept. */
  since(after: number): { events: RuntimeEvent[]; missed: number } {
    const kept = this.#events.slice(-this.#kept);
    const first = kept[0]?.seq ?? this.#lastSeq + 1;
    return { events: kept.filter((e) => e.seq > after), missed: Math.max(0, first - (after + 1)) };
  }

  subscribe(listener: RuntimeEventListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }
}
