/**
 * The failure a command handler throws on purpose. The calling client receives a
 * `command_failed` correlated to its command, carrying this code and message verbatim.
 * Any other exception becomes `internal_error`, with its detail kept in the runtime log.
 *
 * @example
 * ```ts
 * if (!loaded.styles.has(params.style)) throw new CommandError('unknown_style', `no style "${params.style}"`);
 * ```
 */
export class CommandError extends Error {
  override readonly name = 'CommandError';
  readonly code: string;

  constructor(code: string, message: string) {
    super(message);
    if (!/^[a-z][a-z0-9_]{0,63}$/.test(code)) {
      throw new TypeError(`CommandError code must be snake_case (a-z, 0-9, _), ≤ 64 chars; got ${JSON.stringify(code)}`);
    }
    this.code = code;
  }
}

/**
 * True for a CommandError from any copy of this module: a model may import Arclight from a
 * different path (dist vs source) than the runtime that hosts it, so `instanceof` is not enough.
 */
export function isCommandError(error: unknown): error is CommandError {
  return (
    error instanceof CommandError ||
    (error instanceof Error && error.name === 'CommandError' && typeof (error as { code?: unknown }).code === 'string')
  );
}
