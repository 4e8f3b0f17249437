/**
 * Commands awaiting their outcome, keyed by request id. Each settles exactly once: with the
 * model's reply, an ack, a failure, a timeout, or the connection going away.
 */

import { ArclightError } from '../protocol/errors.ts';
import type { JsonValue } from '../protocol/json-schema.ts';

/** What a successful command resolves to: the model's reply message, or undefined for an ack. */
export interface CommandReply {
  readonly type: string;
  readonly data: JsonValue | undefined;
}

interface Pending {
  readonly command: string;
  readonly resolve: (reply: CommandReply | undefined) => void;
  readonly reject: (error: ArclightError) => void;
  readonly timer: ReturnType<typeof setTimeout>;
}

export class PendingCommands {
  readonly #pending = new Map<string, Pending>();
  #counter = 0;

  nextId(): string {
    this.#counter = (this.#counter + 1) % Number.MAX_SAFE_INTEGER;
    return `c${this.#counter.toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
  }

  track(requestId: string, command: string, timeoutMs: number): Promise<CommandReply | undefined> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(requestId);
        reject(new ArclightError('timeout', `No outcome for command "${command}" within ${timeoutMs} ms.`));
      }, timeoutMs);
      this.#pending.set(requestId, { command, resolve, reject, timer });
    });
  }

  resolve(requestId: string, reply: CommandReply | undefined): boolean {
    const pending = this.#take(requestId);
    pending?.resolve(reply);
    return pending !== undefined;
  }

  reject(requestId: string, error: ArclightError): boolean {
    const pending = this.#take(requestId);
    pending?.reject(error);
    return pending !== undefined;
  }

  rejectAll(error: ArclightError): void {
    for (const id of [...this.#pending.keys()]) this.reject(id, error);
  }

  #take(requestId: string): Pending | undefined {
    const pending = this.#pending.get(requestId);
    if (!pending) return undefined;
    clearTimeout(pending.timer);
    this.#pending.delete(requestId);
    return pending;
  }
}
