/**
 * The one error type of the Python bridge. Its `code` is stable (docs/errors.md, "Python worker");
 * it is a `CommandError`, so a command that fails because of the worker reaches the client with
 * that code rather than as `internal_error`.
 */

import { CommandError } from '../model/command-error.ts';

export type PythonWorkerErrorCode =
  /** No usable Python: not found, or it cannot import numpy (or the arclight_worker package). */
  | 'python_unavailable'
  /** The model module failed to import or its `@model.load` raised; the worker never became ready. */
  | 'python_load_failed'
  /** A worker process (any rank) exited or was killed. */
  | 'python_worker_crashed'
  /** A worker sent no heartbeat, or no reply to a request, within its bound; it was killed. */
  | 'python_worker_timeout'
  /** The model's Python code raised in `generate` (the traceback is in the session's log). */
  | 'python_error'
  /** The worker broke the control protocol (a malformed message, a frame outside its slot). */
  | 'python_protocol_error';

export class PythonWorkerError extends CommandError {
  declare readonly code: PythonWorkerErrorCode;
  /** The Python traceback or the worker's last stderr lines, when there are any. */
  readonly detail: string | undefined;

  constructor(code: PythonWorkerErrorCode, message: string, detail?: string) {
    super(code, message);
    this.detail = detail;
  }
}

export function isPythonWorkerError(error: unknown): error is PythonWorkerError {
  return error instanceof PythonWorkerError;
}
