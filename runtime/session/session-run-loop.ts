/**
 * A session's model loop: the author's `run(session)`, or for a step model the step driver
 * (model/step-driver.ts), started once the session has started and restarted in place when a new
 * version of the model is adopted (arclight dev). Also the gate a step model's author code takes
 * turns at: commands and hooks run between steps, never during one.
 */

import { ArclightError } from '../../protocol/errors.ts';
import type { Logger } from '../../server-kit/log.ts';
import { callAuthorCode, isSessionEnded } from '../model/author-code.ts';
import type { ModelDefinition } from '../model/definition.ts';
import type { ModelSession } from '../model/model-session.ts';
import { driveSteps, StepGate, type StepHost } from '../model/step-driver.ts';

/** What the loop needs of its session. */
export interface RunLoopSession {
  readonly log: Logger;
  /** Aborted when the session ends. */
  readonly signal: AbortSignal;
  readonly ended: boolean;
  /** A facade whose signal is `signal` (the session's and this run's together). */
  facade(signal: AbortSignal): ModelSession<unknown>;
  stepHost(): StepHost;
  /** The loop failed on its own (not because the session ended or the loop was restarted). */
  failed(): void;
}

export class SessionRunLoop {
  /** A step model's lock: steps, command handlers and hooks take turns (model/step-driver.ts). */
  readonly gate = new StepGate();
  readonly #session: RunLoopSession;
  #running: Promise<void> = Promise.resolve();
  /** Aborts the current run loop alone (a new version of the model restarts it; see restart). */
  #runAbort = new AbortController();

  constructor(session: RunLoopSession) {
    this.#session = session;
  }

  /** Starts `model`'s loop in the background (nothing for a model with neither `run` nor `generate`). */
  start(model: ModelDefinition<unknown>): void {
    const session = this.#session;
    const run = model.run;
    if ((!run && !model.generate) || session.ended) return;
    const runAbort = this.#runAbort;
    // The loop gets a facade whose signal and ticks also end when only this run is aborted.
    const signal = AbortSignal.any([session.signal, runAbort.signal]);
    const facade = session.facade(signal);
    const running = run
      ? callAuthorCode(session.log, 'run', () => run(facade), undefined, isSessionEnded)
      : driveSteps(model, facade, session.stepHost(), signal);
    this.#running = running.then((outcome) => {
      if (!outcome.ok && !session.ended && !runAbort.signal.aborted) session.failed();
    });
  }

  /**
   * Aborts the running loop through its own signal, waits for it (at most 2 s) so two versions
   * never emit at once, and starts `model`'s.
   */
  async restart(model: ModelDefinition<unknown>): Promise<void> {
    this.#runAbort.abort(new ArclightError('session_ended', 'The model was reloaded; its run loop restarts.'));
    await this.settled();
    this.#runAbort = new AbortController();
    this.start(model);
  }

  /** The loop has returned, or 2 s have passed (it saw its aborted signal; it is not waited for forever). */
  async settled(): Promise<void> {
    await Promise.race([this.#running, new Promise((resolve) => setTimeout(resolve, 2_000))]);
  }
}
