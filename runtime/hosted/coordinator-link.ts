/**
 * Hosted mode, the runtime's side: it registers with the coordinator (its model, one slot, its
 * capabilities), heartbeats, re-registers when the coordinator has forgotten it, and reports when
 * a session gets its first ready client (the coordinator starts billing then) and when a session
 * ends here (idle timeout, the model's end). Every call carries the deployment's runtime secret.
 */

import { randomUUID } from 'node:crypto';
import type { Capabilities } from '../../protocol/capabilities.ts';
import { RUNTIME_SECRET_HEADER } from '../../protocol/coordinator.ts';
import type { Logger } from '../../server-kit/log.ts';

export interface HostedOptions {
  /** The coordinator's base URL. */
  readonly coordinatorUrl: string;
  /** The deployment's shared runtime secret. */
  readonly secret: string;
  /** Stable id of this runtime; default a fresh UUID per process. */
  readonly runtimeId?: string;
  /** Where the coordinator reaches this runtime; default the runtime's own URL. */
  readonly advertiseUrl?: string;
}

const RETRY_MIN_MS = 500;
const RETRY_MAX_MS = 10_000;

export class CoordinatorLink {
  readonly id: string;
  readonly #options: HostedOptions;
  readonly #registration: { url: string; model: string; capabilities: Capabilities };
  readonly #log: Logger;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  #draining = false;
  /** The heartbeat interval the coordinator asked for, once registered. */
  #interval: number | undefined;
  /** Per session, its ready report: whether the coordinator acknowledged it (it then bills from then). */
  readonly #reportedReady = new Map<string, Promise<boolean>>();
  /** Reports still being delivered. */
  readonly #reports = new Set<Promise<unknown>>();

  constructor(options: HostedOptions, registration: { url: string; model: string; capabilities: Capabilities }, log: Logger) {
    this.id = options.runtimeId ?? randomUUID();
    this.#options = options;
    this.#registration = { ...registration, url: options.advertiseUrl ?? registration.url };
    this.#log = log.child({ runtime_id: this.id });
  }

  /** Registers, retrying with backoff until the coordinator answers; then heartbeats. */
  start(): void {
    void this.#register(RETRY_MIN_MS);
  }

  /** No new sessions from now on (SIGTERM): tells the coordinator at once with a heartbeat. */
  async drain(): Promise<void> {
    this.#draining = true;
    if (this.#interval === undefined || this.#stopped) return; // not registered yet: it never gets sessions
    clearTimeout(this.#timer);
    await this.#heartbeat(this.#interval);
  }

  /**
   * Stops heartbeating, after the reports in flight (a session ended by the shutdown itself) have
   * gone out or `graceMs` passed — so the coordinator stops billing at shutdown, not one
   * heartbeat timeout later.
   */
  async stop(graceMs = 0): Promise<void> {
    clearTimeout(this.#timer);
    if (graceMs > 0 && this.#reports.size > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([Promise.all(this.#reports), new Promise((resolve) => (timer = setTimeout(resolve, graceMs)))]);
      clearTimeout(timer);
    }
    this.#stopped = true;
    clearTimeout(this.#timer);
  }

  /**
   * Reports the session's first ready client (once per session; later calls get the same
   * answer). Resolves true once the coordinator has acknowledged it — it has then recorded the
   * session `ready`, the moment its meter and maximum duration count from — or false when it
   * could not be told.
   */
  sessionReady(sessionId: string): Promise<boolean> {
    let report = this.#reportedReady.get(sessionId);
    if (!report) {
      report = this.#report(`/runtimes/${encodeURIComponent(this.id)}/sessions/${encodeURIComponent(sessionId)}/ready`, {});
      this.#reportedReady.set(sessionId, report);
      this.#track(report);
    }
    return report;
  }

  sessionEnded(sessionId: string, reason: string): void {
    this.#reportedReady.delete(sessionId);
    this.#track(this.#report(`/runtimes/${encodeURIComponent(this.id)}/sessions/${encodeURIComponent(sessionId)}/ended`, { reason }));
  }

  #track(report: Promise<unknown>): void {
    this.#reports.add(report);
    void report.finally(() => this.#reports.delete(report));
  }

  async #register(retryMs: number): Promise<void> {
    if (this.#stopped) return;
    try {
      const response = await this.#post('/runtimes', {
        id: this.id,
        url: this.#registration.url,
        model: this.#registration.model,
        slots: 1,
        capabilities: this.#registration.capabilities,
      });
      if (!response.ok) throw new Error(`registration answered ${response.status}: ${await response.text()}`);
      const { heartbeat_interval_ms: interval } = (await response.json()) as { heartbeat_interval_ms: number };
      this.#log.info('registered with the coordinator', { coordinator: this.#options.coordinatorUrl });
      this.#schedule(interval);
    } catch (error) {
      this.#log.warn('coordinator registration failed; retrying', { error, retry_ms: retryMs });
      this.#timer = setTimeout(() => void this.#register(Math.min(retryMs * 2, RETRY_MAX_MS)), retryMs);
      this.#timer.unref();
    }
  }

  #schedule(intervalMs: number): void {
    this.#interval = intervalMs;
    if (this.#stopped) return;
    this.#timer = setTimeout(() => void this.#heartbeat(intervalMs), intervalMs);
    this.#timer.unref();
  }

  async #heartbeat(intervalMs: number): Promise<void> {
    if (this.#stopped) return;
    try {
      const response = await this.#post(`/runtimes/${encodeURIComponent(this.id)}/heartbeat`, { draining: this.#draining });
      if (response.status === 404) {
        this.#log.warn('the coordinator forgot this runtime; registering again');
        return void this.#register(RETRY_MIN_MS);
      }
      if (!response.ok) this.#log.warn('heartbeat refused', { status: response.status });
    } catch (error) {
      this.#log.warn('heartbeat failed', { error });
    }
    this.#schedule(intervalMs);
  }

  /** Delivers a report, retrying server errors and network failures; true when the coordinator accepted it. */
  async #report(path: string, body: object): Promise<boolean> {
    for (let attempt = 0; attempt < 3 && !this.#stopped; attempt++) {
      try {
        const response = await this.#post(path, body);
        if (response.ok || response.status < 500) return response.ok;
      } catch {
        // retried below
      }
      await new Promise((resolve) => setTimeout(resolve, RETRY_MIN_MS * 2 ** attempt));
    }
    this.#log.warn('could not report to the coordinator', { path });
    return false;
  }

  #post(path: string, body: object): Promise<Response> {
    return fetch(`${this.#options.coordinatorUrl.replace(/\/+$/, '')}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', [RUNTIME_SECRET_HEADER]: this.#options.secret },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(5_000),
    });
  }
}
