/**
 * The moderator interface. The runtime moderates nothing itself: an operator plugs a moderator
 * in (`startRuntime({ moderation: { moderator } })`, or `arclight serve --moderator-url` for
 * `HttpModerator`) and the runtime asks it about the free-text parameters a model opted in
 * (`moderated()` in a command's params schema) before the command runs.
 *
 * @example
 * ```ts
 * import { startRuntime, type Moderator } from 'arclight/runtime';
 * const moderator: Moderator = {
 *   async check({ fields, signal }) {
 *     const verdict = await myClassifier(Object.values(fields), { signal });
 *     return verdict.ok ? { allowed: true } : { allowed: false, reason: verdict.why, category: verdict.label };
 *   },
 * };
 * await startRuntime({ model, moderation: { moderator } });
 * ```
 */

export interface ModerationRequest {
  readonly sessionId: string;
  readonly command: string;
  /** The command's moderated parameters that are present and not blank, by JSON pointer into its params: `{ '/prompt': 'a cat' }`. */
  readonly fields: Readonly<Record<string, string>>;
  /**
   * Aborts when the runtime stops waiting: the command was admitted unchecked (`admitAfterMs`)
   * or the session ended. Honour it: the session's next check starts as soon as this one is
   * abandoned, so a moderator that ignores it may see two checks of a session at once.
   */
  readonly signal: AbortSignal;
}

export type ModerationVerdict =
  | { readonly allowed: true }
  | {
      readonly allowed: false;
      /** Why; the client reads it in the failure's message. */
      readonly reason?: string;
      /** A classification of the moderator's own (e.g. `violence`); also in the message. */
      readonly category?: string;
      /** The JSON pointer (a key of `fields`) at fault; becomes the failure's `field`. */
      readonly field?: string;
    };

export interface Moderator {
  /** A throw or rejection admits the command (fail-open) and is logged and counted (`outcome="error"`). */
  check(request: ModerationRequest): ModerationVerdict | Promise<ModerationVerdict>;
}

export interface ModerationOptions {
  readonly moderator: Moderator;
  /**
   * A command still without a verdict this long after it arrived (its wait in the session's
   * queue included) runs unchecked. Default 2000 ms, as the specification says.
   */
  readonly admitAfterMs?: number;
}

/** The specification's two seconds. */
export const DEFAULT_ADMIT_AFTER_MS = 2_000;

/**
 * The options with their defaults filled in.
 * @throws TypeError for options a runtime cannot use: reported at start, not at the first command.
 */
export function resolveModerationOptions(options: ModerationOptions): Required<ModerationOptions> {
  if (typeof options?.moderator?.check !== 'function') throw new TypeError('moderation.moderator must have a check(request) method');
  const admitAfterMs = options.admitAfterMs ?? DEFAULT_ADMIT_AFTER_MS;
  if (!(admitAfterMs > 0) || !Number.isFinite(admitAfterMs)) {
    throw new TypeError(`moderation.admitAfterMs must be a positive number of milliseconds; got ${String(options.admitAfterMs)}`);
  }
  return { moderator: options.moderator, admitAfterMs };
}
