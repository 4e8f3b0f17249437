/**
 * A FIFO with a fixed capacity whose `push` waits for room: the backpressure between a model's
 * `emit()` and the encoder. `close()` releases every waiter so a session end never hangs a model.
 */
export class BoundedQueue<T> {
  readonly #items: T[] = [];
  readonly #capacity: number;
  #roomWaiters: Array<() => void> = [];
  #itemWaiters: Array<() => void> = [];
  #closed = false;

  constructor(capacity: number) {
    if (!(capacity >= 1)) throw new RangeError('capacity must be at least 1');
    this.#capacity = capacity;
  }

  get length(): number {
    return this.#items.length;
  }

  /** How many push() calls are waiting for room (a producer outrunning the consumer). */
  get blockedPushers(): number {
    return this.#roomWaiters.length;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Resolves once the item is queued (or dropped because the queue closed). */
  async push(item: T): Promise<void> {
    while (!this.#closed && this.#items.length >= this.#capacity) {
      await new Promise<void>((resolve) => this.#roomWaiters.push(resolve));
    }
    if (this.#closed) return;
    this.#items.push(item);
    this.#wake('item');
  }

  /**
   * Queues without waiting: when full, drops the oldest queued item (`'oldest'`) or the new one
   * (`'newest'`). Returns what was dropped, if anything.
   */
  pushDropping(item: T, drop: 'oldest' | 'newest'): T | undefined {
    if (this.#closed) return item;
    let dropped: T | undefined;
    if (this.#items.length >= this.#capacity) {
      if (drop === 'newest') return item;
      dropped = this.#items.shift();
    }
    this.#items.push(item);
    this.#wake('item');
    return dropped;
  }

  /** Removes and returns every queued item except the newest (stale frames after a pause). */
  keepNewest(): T[] {
    const stale = this.#items.splice(0, Math.max(0, this.#items.length - 1));
    if (stale.length > 0) this.#wake('room');
    return stale;
  }

  /** Removes and returns every queued item, keeping the queue open. */
  clear(): T[] {
    const all = this.#items.splice(0);
    if (all.length > 0) this.#wake('room');
    return all;
  }

  /** The next item, or undefined once closed and drained. */
  async shift(): Promise<T | undefined> {
    while (this.#items.length === 0) {
      if (this.#closed) return undefined;
      await new Promise<void>((resolve) => this.#itemWaiters.push(resolve));
    }
    const item = this.#items.shift();
    this.#wake('room');
    return item;
  }

  close(): void {
    this.#closed = true;
    this.#items.length = 0;
    this.#wake('room');
    this.#wake('item');
  }

  #wake(which: 'room' | 'item'): void {
    const waiters = which === 'room' ? this.#roomWaiters : this.#itemWaiters;
    if (which === 'room') this.#roomWaiters = [];
    else this.#itemWaiters = [];
    for (const resolve of waiters) resolve();
  }
}
