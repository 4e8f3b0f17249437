/**
 * Lets a soak's virtual users churn, and stops them together: at a deadline, and briefly at
 * quiet points, when no session may be open so a process's descriptors and memory can be read
 * without any session's share in them. Users asked to drain cut their waits short and finish the
 * session they are in.
 */

export class ChurnGate {
  readonly #deadline: number;
  #busy = 0;
  #draining = false;
  /** Wakes sleeping users when a drain starts. */
  #drainStarted: (() => void)[] = [];
  /** Wakes `drain()` when the last busy user leaves, and users waiting at the gate on `resume()`. */
  #idle: (() => void)[] = [];
  #resumed: (() => void)[] = [];

  constructor(deadline: number) {
    this.#deadline = deadline;
  }

  get stopped(): boolean {
    return Date.now() >= this.#deadline;
  }

  /** Milliseconds until the deadline. */
  remainingMs(): number {
    return Math.max(0, this.#deadline - Date.now());
  }

  /** Waits while drained; false once the deadline passed (the user stops), true when it may start a session. */
  async enter(): Promise<boolean> {
    while (this.#draining && !this.stopped) await new Promise<void>((resolve) => this.#resumed.push(resolve));
    if (this.stopped) return false;
    this.#busy++;
    return true;
  }

  leave(): void {
    this.#busy--;
    if (this.#busy === 0) for (const wake of this.#idle.splice(0)) wake();
  }

  /** Sleeps `ms`, or less when a drain starts or the deadline comes first. */
  async sleep(ms: number): Promise<void> {
    if (this.#draining) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, Math.min(ms, this.remainingMs()));
      const drainStarted = this.#drainStarted;
      function done() {
        clearTimeout(timer);
        const at = drainStarted.indexOf(done);
        if (at >= 0) drainStarted.splice(at, 1);
        resolve();
      }
      drainStarted.push(done);
    });
  }

  /** Holds users at the gate and resolves once none is in a session. */
  async drain(): Promise<void> {
    this.#draining = true;
    for (const wake of this.#drainStarted.splice(0)) wake();
    if (this.#busy > 0) await new Promise<void>((resolve) => this.#idle.push(resolve));
  }

  resume(): void {
    this.#draining = false;
    for (const wake of this.#resumed.splice(0)) wake();
  }
}
