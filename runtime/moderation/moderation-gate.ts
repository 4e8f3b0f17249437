/**
 * One session's moderation queue. Commands with moderated text wait here for the moderator's
 * verdict; the specification's rules, and why each is shaped as it is:
 *
 * - **One check at a time, in arrival order.** A session's checks form a FIFO; the next starts
 *   when the previous one has a verdict or is abandoned. A moderator thus sees a session's text
 *   in the order the client sent it (a conversation-aware one can rely on that) and one session
 *   cannot flood it.
 * - **Admitted after `admitAfterMs` (2 s).** Counted from the command's arrival here, its wait
 *   in the queue included: a slow or dead moderator delays a command by at most that, and the
 *   command then runs unchecked (fail-open, as the specification says). A command whose turn
 *   has not come is dropped from the queue without being checked; a running check is abandoned
 *   (its `signal` aborts) and the queue moves on at once — waiting for a moderator that ignores
 *   the signal would cost every later command its full 2 s. A verdict that arrives after the
 *   command was admitted is ignored.
 * - **A moderator that throws, or answers something that is not a verdict, admits** the command
 *   (fail-open, logged, counted): moderation is a policy the operator adds, never a new way for
 *   a session to stop working.
 * - **Session end** abandons every check; the commands waiting fail with `session_ended` rather
 *   than run in a session that is gone.
 *
 * Commands without moderated text never come here, so they are never delayed by a pending check.
 */

import type { Logger } from '../../server-kit/log.ts';
import type { RuntimeMetrics } from '../metrics.ts';
import type { Moderator } from './moderator.ts';

export type GateDecision =
  | { readonly admitted: true; readonly outcome: 'allowed' | 'timeout' | 'error' }
  | {
      readonly admitted: false;
      readonly outcome: 'rejected';
      readonly reason?: string;
      readonly category?: string;
      readonly field?: string;
    }
  | { readonly admitted: false; readonly outcome: 'ended' };

export interface ModerationGateOptions {
  readonly sessionId: string;
  readonly moderator: Moderator;
  readonly admitAfterMs: number;
  /** The session's signal: when it aborts, every check is abandoned. */
  readonly signal: AbortSignal;
  readonly log: Logger;
  readonly metrics?: RuntimeMetrics;
}

interface WaitingCommand {
  readonly command: string;
  readonly fields: Readonly<Record<string, string>>;
  readonly abort: AbortController;
  readonly decide: (decision: GateDecision) => void;
  /** `performance.now()` at which it runs unchecked. */
  readonly deadline: number;
  timer: NodeJS.Timeout | undefined;
  decided: boolean;
}

const ENDED: GateDecision = { admitted: false, outcome: 'ended' };

export class ModerationGate {
  readonly #options: ModerationGateOptions;
  readonly #queue: WaitingCommand[] = [];
  #checking: WaitingCommand | undefined;
  #closed = false;

  constructor(options: ModerationGateOptions) {
    this.#options = options;
    if (options.signal.aborted) this.#closed = true;
    else options.signal.addEventListener('abort', () => this.#close(), { once: true });
  }

  /** Commands waiting for their check, the one being checked included. */
  get waiting(): number {
    return this.#queue.length + (this.#checking ? 1 : 0);
  }

  /** Resolves when the command may run (`admitted`) or must fail; never rejects. */
  check(command: string, fields: Readonly<Record<string, string>>): Promise<GateDecision> {
    if (this.#closed) return Promise.resolve(ENDED);
    return new Promise((resolve) => {
      const entry: WaitingCommand = {
        command,
        fields,
        abort: new AbortController(),
        deadline: performance.now() + this.#options.admitAfterMs,
        timer: undefined,
        decided: false,
        decide: (decision) => {
          if (entry.decided) return;
          entry.decided = true;
          clearTimeout(entry.timer);
          resolve(decision);
        },
      };
      entry.timer = setTimeout(() => this.#admitUnchecked(entry), this.#options.admitAfterMs);
      this.#queue.push(entry);
      this.#next();
    });
  }

  #next(): void {
    while (!this.#checking && !this.#closed) {
      const entry = this.#queue.shift();
      if (!entry) return;
      // Its deadline is now (its timer is due in this same turn): admit it rather than start a
      // check that would be abandoned at once.
      if (performance.now() >= entry.deadline) {
        this.#admitUnchecked(entry);
        continue;
      }
      this.#checking = entry;
      void this.#run(entry).finally(() => {
        this.#checking = undefined;
        this.#next();
      });
    }
  }

  async #run(entry: WaitingCommand): Promise<void> {
    const { moderator, sessionId, metrics } = this.#options;
    const started = performance.now();
    let verdict: unknown;
    try {
      const checking = Promise.resolve().then(() =>
        moderator.check({ sessionId, command: entry.command, fields: entry.fields, signal: entry.abort.signal }),
      );
      verdict = await untilAborted(checking, entry.abort.signal);
    } catch (error) {
      if (entry.decided) return; // abandoned: admitted at the deadline, or the session ended
      metrics?.moderationCheckDuration.observe((performance.now() - started) / 1000);
      this.#admitOnError(entry, 'the moderator failed', { error });
      return;
    }
    if (entry.decided) return;
    metrics?.moderationCheckDuration.observe((performance.now() - started) / 1000);
    const decision = toDecision(verdict, entry.fields);
    if (!decision) {
      this.#admitOnError(entry, 'the moderator answered something that is not a verdict', { verdict });
      return;
    }
    metrics?.moderationChecks.inc({ outcome: decision.outcome });
    entry.decide(decision);
  }

  #admitOnError(entry: WaitingCommand, what: string, detail: Record<string, unknown>): void {
    this.#options.log.warn(`${what}; the command runs unchecked`, { command: entry.command, ...detail });
    this.#options.metrics?.moderationChecks.inc({ outcome: 'error' });
    entry.decide({ admitted: true, outcome: 'error' });
  }

  #admitUnchecked(entry: WaitingCommand): void {
    if (entry.decided) return;
    const queued = this.#queue.indexOf(entry);
    if (queued >= 0) this.#queue.splice(queued, 1);
    this.#options.log.debug('no moderation verdict in time; the command runs unchecked', {
      command: entry.command,
      admitAfterMs: this.#options.admitAfterMs,
      checkStarted: entry === this.#checking,
    });
    this.#options.metrics?.moderationChecks.inc({ outcome: 'timeout' });
    entry.decide({ admitted: true, outcome: 'timeout' });
    // Abort after deciding: the running check's rejection then finds the entry decided.
    entry.abort.abort(new Error('moderation check abandoned: the command was admitted unchecked'));
  }

  #close(): void {
    this.#closed = true;
    for (const entry of [...(this.#checking ? [this.#checking] : []), ...this.#queue.splice(0)]) {
      entry.decide(ENDED);
      entry.abort.abort(new Error('moderation check abandoned: the session ended'));
    }
  }
}

/** Settles with `promise`, or rejects as soon as `signal` aborts (the promise is left to settle unobserved). */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  promise.catch(() => {}); // a late rejection of an abandoned check is nobody's business
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/** A verdict as the gate acts on it, or undefined for anything that is not one. */
function toDecision(verdict: unknown, fields: Readonly<Record<string, string>>): GateDecision | undefined {
  if (typeof verdict !== 'object' || verdict === null) return undefined;
  const v = verdict as { allowed?: unknown } & Partial<Record<'reason' | 'category' | 'field', unknown>>;
  if (v.allowed === true) return { admitted: true, outcome: 'allowed' };
  if (v.allowed !== false) return undefined;
  return {
    admitted: false,
    outcome: 'rejected',
    ...(typeof v.reason === 'string' && v.reason !== '' ? { reason: v.reason.slice(0, 1024) } : {}),
    ...(typeof v.category === 'string' && v.category !== '' ? { category: v.category.slice(0, 128) } : {}),
    // Only a field that was checked: a moderator cannot point the client at something else.
    ...(typeof v.field === 'string' && Object.hasOwn(fields, v.field) ? { field: v.field } : {}),
  };
}
