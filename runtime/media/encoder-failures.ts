/**
 * What to do when a video encoder fails in use: restart it, or give up on its backend.
 *
 * A single failure is treated as the encoder instance's problem: the caller frees it and the next
 * frame opens a fresh one of the same backend (`restart`). A backend that fails `limit.failures`
 * times within `limit.windowMs` — or cannot even be opened any more after it was selected — is
 * taken to be broken for this process (an NVENC session whose GPU is gone, a driver reset) and is
 * demoted process-wide, so every stream moves to the next candidate (`fallback`). The last
 * candidate is never demoted (see `EncoderBackendRegistry.demote`): it keeps being restarted, and
 * frames are dropped while it fails. The policy demotes through the function it is given, so it
 * knows nothing of the registry that owns it (encoder-backends.ts: one policy per registry).
 */
import type { EncoderBackend } from './video-encoder.ts';

export type EncoderFailureAction = 'restart' | 'fallback';
export type EncoderFailurePhase = 'open' | 'encode';

export interface EncoderFailureLimit {
  readonly failures: number;
  readonly windowMs: number;
}

/** Three failures of one backend within 30 s: a broken backend, not a bad frame. */
export const ENCODER_FAILURE_LIMIT: EncoderFailureLimit = { failures: 3, windowMs: 30_000 };

export interface EncoderFailureOutcome {
  readonly action: EncoderFailureAction;
  /** Why the backend was demoted (for the log), when `action` is `fallback`. */
  readonly reason?: string;
}

/** Failure times per key, each key keeping only those inside the window. */
export class FailureWindow {
  readonly #limit: EncoderFailureLimit;
  readonly #times = new Map<string, number[]>();

  constructor(limit: EncoderFailureLimit) {
    this.#limit = limit;
  }

  /** Notes a failure of `key` at `nowMs`; returns how many fell within the window, this one included. */
  record(key: string, nowMs: number): number {
    const recent = (this.#times.get(key) ?? []).filter((t) => nowMs - t < this.#limit.windowMs);
    recent.push(nowMs);
    this.#times.set(key, recent);
    return recent.length;
  }

  /** Forgets `key`'s failures (its backend was demoted: a later re-selection starts clean). */
  forget(key: string): void {
    this.#times.delete(key);
  }
}

/** Decides restart or fallback for failures of any backend; one per backend registry (`EncoderBackendRegistry.failures`). */
export class EncoderFailurePolicy {
  readonly #limit: EncoderFailureLimit;
  readonly #window: FailureWindow;
  readonly #demote: (codec: EncoderBackend['codec'], backendName: string, reason: string) => boolean;

  constructor(limit: EncoderFailureLimit, demote: (codec: EncoderBackend['codec'], backendName: string, reason: string) => boolean) {
    this.#limit = limit;
    this.#window = new FailureWindow(limit);
    this.#demote = demote;
  }

  failed(backend: EncoderBackend, phase: EncoderFailurePhase, error: unknown, nowMs: number): EncoderFailureOutcome {
    const key = `${backend.codec}/${backend.name}`;
    const count = this.#window.record(key, nowMs);
    const message = error instanceof Error ? error.message : String(error);
    let reason: string | undefined;
    if (phase === 'open') reason = `failed to open: ${message}`;
    else if (count >= this.#limit.failures)
      reason = `${count} encode failures within ${this.#limit.windowMs / 1000} s, the last: ${message}`;
    if (reason === undefined || !this.#demote(backend.codec, backend.name, reason)) return { action: 'restart' };
    this.#window.forget(key);
    return { action: 'fallback', reason };
  }
}
