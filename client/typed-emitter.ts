/**
 * A minimal typed event emitter. A throwing listener is reported on the console and never
 * breaks the client or the other listeners (application code must not take the library down).
 */
// Listeners are stored untyped; `on`/`off` keep the public surface typed.
export class TypedEmitter<Events extends Record<string, unknown[]>> {
  // eslint-disable-next-line @typescript-eslint/no-unsafe-function-type
  readonly #listeners = new Map<keyof Events, Set<Function>>();

  on<E extends keyof Events>(event: E, listener: (...args: Events[E]) => void): void {
    let set = this.#listeners.get(event);
    if (!set) {
      set = new Set();
      this.#listeners.set(event, set);
    }
    set.add(listener);
  }

  off<E extends keyof Events>(event: E, listener: (...args: Events[E]) => void): void {
    this.#listeners.get(event)?.delete(listener);
  }

  protected hasListeners(event: keyof Events): boolean {
    return (this.#listeners.get(event)?.size ?? 0) > 0;
  }

  protected emit<E extends keyof Events>(event: E, ...args: Events[E]): void {
    for (const listener of [...(this.#listeners.get(event) ?? [])]) {
      try {
        (listener as (...a: Events[E]) => void)(...args);
      } catch (error) {
        console.error(`[arclight] a "${String(event)}" listener threw`, error);
      }
    }
  }
}
