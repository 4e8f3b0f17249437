/**
 * The model a runtime hosts, through its life: the first version's `load()` (reported as
 * `model_load` events), new versions loaded while the current one serves (`Runtime.reloadModel`,
 * what `arclight dev` does on each save), whether the runtime is ready for sessions, and the
 * `unload()` at close. /health, /dev/status, new sessions and reloads all ask it, so they always
 * agree on the runtime's state. The sessions are the session host's: it is only told to adopt
 * each new version (and, at close, to end the open session before the model unloads).
 */

import type { Capabilities } from '../../protocol/capabilities.ts';
import { ArclightError } from '../../protocol/errors.ts';
import type { ModelLoadErrorInfo } from '../../protocol/session-logs.ts';
import type { Logger } from '../../server-kit/log.ts';
import type { RuntimeEventSink } from '../events/runtime-event-log.ts';
import type { RuntimeMetrics } from '../metrics.ts';
import { callAuthorCode } from '../model/author-code.ts';
import type { CommandRouter } from '../model/command-router.ts';
import type { ModelDefinition } from '../model/definition.ts';
import { describeLoadError } from '../model/load-error.ts';
import { ModelSlot, type ServedModel } from '../model/model-slot.ts';
import { validateModelDefinition } from '../model/validate-definition.ts';
import type { ServedVersionBuilder } from './served-version.ts';

export type RuntimeState = 'loading' | 'available' | 'serving' | 'terminated';

/** What `Runtime.reloadModel` did. */
export type ModelReloadOutcome =
  /** The new version serves; `sessions`: the open session runs it in place (`kept`), ended with reason `model_reloaded` (`ended`, its tracks or fps changed), or there was none. */
  | { readonly ok: true; readonly version: number; readonly sessions: 'no_session' | 'kept' | 'ended'; readonly loadMs: number }
  /** It could not be loaded; the previous version keeps serving. */
  | { readonly ok: false; readonly error: ModelLoadErrorInfo };

/** The serving version's load: still running (the first), done, or failed (nothing serves). */
export type ModelLoadState = 'loading' | 'loaded' | 'failed';

/** What the model host needs of the sessions (the runtime's LocalSessionHost). */
export interface ModelSessions {
  /** The open session, if any. */
  readonly current: unknown;
  /** Moves the open session to a new version (or ends it when its media changed). */
  adoptModel(
    definition: ModelDefinition<unknown>,
    router: CommandRouter,
    capabilities: Capabilities,
  ): Promise<'no_session' | 'kept' | 'ended'>;
  close(): Promise<void>;
}

export interface ModelHostOptions {
  /** Version 1, built by the caller (a bad schema fails the start before anything else is made). */
  readonly first: ServedModel;
  readonly buildVersion: ServedVersionBuilder;
  readonly sessions: ModelSessions;
  readonly events: RuntimeEventSink;
  readonly metrics: Pick<RuntimeMetrics, 'modelLoadDuration'>;
  readonly log: Logger;
}

/** While the model loads, a `model_load` event says it still is this often. */
const MODEL_LOAD_PROGRESS_MS = 5_000;

export class ModelHost {
  /** Resolves when the first version's `load()` has finished (or failed). */
  readonly loaded: Promise<void>;
  readonly #options: ModelHostOptions;
  readonly #log: Logger;
  readonly #slot: ModelSlot;
  #loadState: ModelLoadState = 'loading';
  #closed = false;
  /** A new version is loading (reload) while the current one serves: reported as `loading`. */
  #reloading = false;
  #lastLoadError: ModelLoadErrorInfo | undefined;
  /** Reloads one at a time, in the order asked. */
  #reloadQueue: Promise<unknown>;

  /** Starts the first version's `load()` at once. */
  constructor(options: ModelHostOptions) {
    this.#options = options;
    this.#log = options.log;
    this.#slot = new ModelSlot(options.first);
    this.loaded = this.#loadFirst();
    this.#reloadQueue = this.loaded;
  }

  /** The version serving now: what /schema, /capabilities and new sessions read. */
  get current(): ServedModel {
    return this.#slot.current;
  }

  get loadState(): ModelLoadState {
    return this.#loadState;
  }

  /** Once close() has begun: no new sessions, no reloads. */
  get closed(): boolean {
    return this.#closed;
  }

  /** Why the model's last version could not be loaded; undefined once a version loads. */
  get lastLoadError(): ModelLoadErrorInfo | undefined {
    return this.#lastLoadError;
  }

  get state(): RuntimeState {
    if (this.#closed || this.#loadState === 'failed') return 'terminated';
    if (this.#loadState === 'loading' || this.#reloading) return 'loading';
    return this.#options.sessions.current ? 'serving' : 'available';
  }

  /** Throws `model_not_ready` unless a loaded version serves and the runtime is not closing. */
  assertReady(): void {
    if (this.#loadState === 'loading') throw new ArclightError('model_not_ready', 'The model is still loading; retry shortly.');
    if (this.#loadState === 'failed') throw new ArclightError('model_not_ready', 'The model failed to load; see the runtime log.');
    if (this.#closed) throw new ArclightError('model_not_ready', 'The runtime is shutting down.');
  }

  /** Loads `definition` as the next version and serves it (see `Runtime.reloadModel`); after any reload already asked for. */
  reload(definition: ModelDefinition<never>): Promise<ModelReloadOutcome> {
    const outcome = this.#reloadQueue.then(() => this.#reload(definition));
    this.#reloadQueue = outcome.catch(() => {});
    return outcome;
  }

  /** Records that a version could not be loaded (or imported): `lastLoadError` and a `model_load` event (phase `failed`). */
  reportLoadError(error: unknown, elapsedSeconds = 0): ModelLoadErrorInfo {
    this.#lastLoadError = describeLoadError(error);
    this.#options.events.publish({ type: 'model_load', phase: 'failed', elapsed_seconds: elapsedSeconds, error: this.#lastLoadError });
    return this.#lastLoadError;
  }

  /**
   * Stops serving: from now on the state is `terminated` and nothing new starts. The open session
   * ends first (it runs the model's code), then the serving version's `unload()`.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#options.sessions.close();
    await this.#unload(this.#slot.current.definition);
  }

  async #loadFirst(): Promise<void> {
    const outcome = await this.#runLoad(this.#slot.current.definition);
    if (!outcome.ok) {
      this.#loadState = 'failed';
      return;
    }
    this.#options.metrics.modelLoadDuration.set(outcome.seconds);
    this.#loadState = 'loaded';
    this.#lastLoadError = undefined;
    this.#log.info('model loaded', { seconds: outcome.seconds });
  }

  async #reload(next: ModelDefinition<never>): Promise<ModelReloadOutcome> {
    const started = performance.now();
    let definition: ModelDefinition<unknown>;
    let served: ServedModel;
    try {
      definition = validateModelDefinition(next, `model "${(next as { name?: string }).name ?? '?'}"`);
      served = this.#options.buildVersion(definition, this.#slot.current.version + 1);
    } catch (error) {
      return { ok: false, error: this.reportLoadError(error, 0) };
    }
    this.#reloading = true;
    try {
      const outcome = await this.#runLoad(definition);
      // A version that never serves gives back what its load() took, as a replaced one does.
      if (!outcome.ok) {
        await this.#unload(definition);
        return outcome;
      }
      if (this.#closed) {
        await this.#unload(definition);
        return { ok: false, error: this.reportLoadError(new Error('The runtime is shutting down.'), 0) };
      }
      const previous = this.#slot.current.definition;
      this.#slot.replace(served);
      const sessions = await this.#options.sessions.adoptModel(served.definition, served.router, served.capabilities);
      // The old version's sessions have moved on (or ended): what its load() took can go.
      if (previous !== served.definition) await this.#unload(previous);
      this.#loadState = 'loaded';
      this.#lastLoadError = undefined;
      this.#options.events.publish({ type: 'model_reloaded', version: served.version, sessions_kept: sessions === 'kept' });
      this.#log.info('model reloaded', { version: served.version, sessions, seconds: outcome.seconds });
      return { ok: true, version: served.version, sessions, loadMs: performance.now() - started };
    } finally {
      this.#reloading = false;
    }
  }

  /** Runs a version's load(), reporting its progress as `model_load` events; the error when it throws. */
  async #runLoad(definition: ModelDefinition<unknown>): Promise<{ ok: true; seconds: number } | { ok: false; error: ModelLoadErrorInfo }> {
    const events = this.#options.events;
    const started = performance.now();
    const seconds = (): number => Math.round(performance.now() - started) / 1000;
    let latest: { progress: number; message?: string } | undefined;
    let publishedAt = -Infinity;
    /** A report held back by the rate limit, published when the limit allows (the last one wins). */
    let trailing: NodeJS.Timeout | undefined;
    const publishLoading = (): void => {
      clearTimeout(trailing);
      trailing = undefined;
      publishedAt = performance.now();
      events.publish({ type: 'model_load', phase: 'loading', elapsed_seconds: seconds(), ...latest });
    };
    publishLoading();
    // A load() that reports no progress of its own: say every few seconds that it still runs.
    const heartbeat = setInterval(publishLoading, MODEL_LOAD_PROGRESS_MS);
    heartbeat.unref();
    try {
      if (definition.load) {
        const context = {
          progress(fraction: number, message?: string): void {
            if (typeof fraction !== 'number' || Number.isNaN(fraction)) return;
            latest = { progress: Math.min(1, Math.max(0, fraction)), ...(typeof message === 'string' ? { message } : {}) };
            // A model may report per tensor: at most ten events a second reach the stream.
            const wait = publishedAt + 100 - performance.now();
            if (wait <= 0 || latest.progress === 1) publishLoading();
            else trailing ??= setTimeout(publishLoading, wait);
          },
        };
        const outcome = await callAuthorCode(this.#log, 'load', () => definition.load!(context));
        if (!outcome.ok) return { ok: false, error: this.reportLoadError(outcome.error, seconds()) };
      }
    } finally {
      clearInterval(heartbeat);
      clearTimeout(trailing);
    }
    events.publish({ type: 'model_load', phase: 'loaded', elapsed_seconds: seconds() });
    return { ok: true, seconds: (performance.now() - started) / 1000 };
  }

  /** A version's unload(), isolated: the model's code must not take the runtime down. */
  async #unload(definition: ModelDefinition<unknown>): Promise<void> {
    try {
      await definition.unload?.();
    } catch (error) {
      this.#log.error("the model's unload() failed", { error: error instanceof Error ? error.message : String(error) });
    }
  }
}
