/**
 * Runs model authors' code (hooks, handlers, load, run) so that nothing it does can take the
 * runtime down: a throw or a rejection is caught and logged, a hung hook is abandoned after a
 * deadline. Every call into author code goes through here.
 */

import type { Logger } from '../../server-kit/log.ts';

export type AuthorOutcome<T> = { ok: true; value: T } | { ok: false; error: unknown; timedOut: boolean };

/** Hooks get this long before the runtime stops waiting for them (they keep running detached). */
export const DEFAULT_HOOK_DEADLINE_MS = 10_000;

/**
 * Calls `fn` and settles to an outcome; never throws or rejects.
 * @param what names the call in logs, e.g. `hook session_started`.
 */
export async function callAuthorCode<T>(
  log: Logger,
  what: string,
  fn: () => T | Promise<T>,
  deadlineMs?: number,
  /** Failures that are part of normal operation (e.g. emit after the session ended): not logged. */
  isExpected?: (error: unknown) => boolean,
): Promise<AuthorOutcome<Awaited<T>>> {
  let timer: NodeJS.Timeout | undefined;
  try {
    const pending = Promise.resolve().then(fn);
    const value =
      deadlineMs === undefined
        ? await pending
        : await Promise.race([
            pending,
            new Promise<never>((_, reject) => {
              timer = setTimeout(() => reject(new AuthorDeadlineError(what, deadlineMs)), deadlineMs);
            }),
          ]);
    return { ok: true, value: value as Awaited<T> };
  } catch (error) {
    const timedOut = error instanceof AuthorDeadlineError;
    if (!isExpected?.(error)) log.error(`model ${what} failed`, { error });
    return { ok: false, error, timedOut };
  } finally {
    if (timer) clearTimeout(timer);
  }
}

class AuthorDeadlineError extends Error {
  override readonly name = 'AuthorDeadlineError';
  constructor(what: string, ms: number) {
    super(`${what} did not settle within ${ms} ms; the runtime stopped waiting for it`);
  }
}

/** True for the rejection `emit()` gives once its session has ended. */
export function isSessionEnded(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === 'session_ended';
}

let guardsInstalled = false;

/**
 * Last line of defence for model code that escapes every call site: a promise it forgot to
 * await, a throw inside its own timer. Node would end the process on either; a runtime hosting
 * other people's code logs it and keeps serving.
 */
export function installProcessGuards(log: Logger): void {
  if (guardsInstalled) return;
  guardsInstalled = true;
  process.on('unhandledRejection', (reason) => {
    if (isSessionEnded(reason)) return;
    log.error('unhandled promise rejection (model code?); the runtime keeps serving', { error: reason });
  });
  process.on('uncaughtException', (error) => {
    log.error('uncaught exception (model code?); the runtime keeps serving', { error });
  });
}
