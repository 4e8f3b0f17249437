/**
 * The Python side of one model in this runtime: its ranks (one worker process each, rank 0 the
 * leader), the frame ring they share, and the sessions they serve. Requests go to every rank, one
 * at a time for the whole group (so every output slot is free when a step begins); the reply that
 * counts is the leader's, after every rank has answered.
 *
 * Failure: when any rank crashes or hangs, every rank is killed, the ring closed, and each
 * session the group was serving is marked failed with that error (its next request throws it, so
 * the session ends with a clear error). Then a fresh group of processes starts at once, for the
 * next session; a session never spans two generations of workers.
 */

import type { JsonValue } from '../../protocol/json-schema.ts';
import { FrameRing } from './frame-ring.ts';
import { PythonWorkerProcess } from './python-worker-process.ts';
import { PythonWorkerError } from './python-worker-error.ts';
import type { ModelDescription, SlotFrame, SuccessfulReply, WorkerMessage, WorkerRequest } from './worker-protocol.ts';

export interface PythonWorkerGroupOptions {
  readonly python: string;
  readonly modulePath: string;
  /** Worker processes (ranks); default 1. */
  readonly ranks?: number;
  readonly slotBytes: number;
  readonly inputSlots: number;
  readonly outputSlots: number;
  readonly heartbeatMs?: number;
  readonly heartbeatTimeoutMs?: number;
  /** How long the workers may take to load (import + `@model.load`); default 10 minutes. */
  readonly startTimeoutMs?: number;
  readonly env?: Readonly<Record<string, string>>;
  readonly onSessionMessage?: (message: Extract<WorkerMessage, { type: 'log' | 'broadcast' }>) => void;
  readonly onOutput?: (line: string, stream: 'stdout' | 'stderr', rank: number) => void;
  /** A generation of workers failed (the sessions it served are failed too). */
  readonly onFailure?: (error: PythonWorkerError, sessions: readonly string[]) => void;
}

interface Generation {
  readonly number: number;
  readonly ring: FrameRing;
  readonly ranks: readonly PythonWorkerProcess[];
  readonly ready: Promise<ModelDescription>;
  failure: PythonWorkerError | undefined;
  /** Every rank reported ready once: only such a generation is replaced at once when it fails. */
  loaded: boolean;
}

export class PythonWorkerGroup {
  readonly #options: PythonWorkerGroupOptions;
  readonly worldSize: number;
  #generation: Generation | undefined;
  #count = 0;
  #queue: Promise<unknown> = Promise.resolve();
  /** Sessions by id → the generation they started on, and why they failed. */
  readonly #sessions = new Map<string, { generation: number; failure?: PythonWorkerError }>();
  #closed = false;
  #progress: ((fraction: number, message: string | undefined) => void) | undefined;

  constructor(options: PythonWorkerGroupOptions) {
    this.#options = options;
    this.worldSize = options.ranks ?? 1;
    if (!Number.isInteger(this.worldSize) || this.worldSize < 1)
      throw new RangeError(`ranks must be a positive integer, got ${options.ranks}`);
    liveGroups.add(this);
    if (!exitHandlerInstalled) {
      exitHandlerInstalled = true;
      // The runtime is exiting (a signal handled, process.exit): no worker outlives it.
      process.on('exit', () => {
        for (const group of liveGroups) group.#killAll();
      });
    }
  }

  /** The ring of the live generation (undefined before start and after close). */
  get ring(): FrameRing | undefined {
    return this.#generation?.ring;
  }

  /** The live workers' process ids (for tests and diagnostics). */
  get pids(): readonly (number | undefined)[] {
    return this.#generation?.ranks.map((r) => r.pid) ?? [];
  }

  /** How many generations of workers have started (1 + restarts). */
  get generations(): number {
    return this.#count;
  }

  /** Starts the workers (if none are alive) and resolves with the model's description once every rank is ready. */
  async start(progress?: (fraction: number, message: string | undefined) => void): Promise<ModelDescription> {
    if (this.#closed) throw new Error('the Python worker group is closed');
    if (progress) this.#progress = progress;
    const live = this.#generation;
    if (live && !live.failure) return live.ready;
    return this.#spawn().ready;
  }

  /** Tells the workers a session begins (starting workers first if the last ones died). */
  async startSession(session: string): Promise<void> {
    await this.start();
    const generation = this.#generation!;
    this.#sessions.set(session, { generation: generation.number });
    await this.#request(session, { type: 'session_start', session }, 30_000, 'session_start');
  }

  /** Tells the workers a session ended; never throws (a dead worker has nothing to end). */
  async endSession(session: string, reason: string): Promise<void> {
    const entry = this.#sessions.get(session);
    this.#sessions.delete(session);
    if (!entry || entry.failure || entry.generation !== this.#generation?.number) return;
    await this.#enqueue(() => this.#all({ type: 'session_end', session, reason }, 10_000, 'session_end')).catch(() => undefined);
  }

  command(session: string, name: string, params: JsonValue, timeoutMs: number): Promise<SuccessfulReply> {
    return this.#request(session, { type: 'command', session, name, params }, timeoutMs, `command ${name}`);
  }

  /**
   * One step: `writeInputs` puts input frames into the ring (under the group's turn, so no other
   * request uses the slots meanwhile) and returns their descriptions; the reply lists the frames
   * written, which `readOutputs` copies out before the turn ends.
   */
  step<T>(
    session: string,
    index: number,
    size: { width: number; height: number },
    slices: boolean,
    maxChunk: number,
    writeInputs: (ring: FrameRing, inputSlots: readonly number[]) => Record<string, SlotFrame>,
    readOutputs: (ring: FrameRing, reply: SuccessfulReply) => T,
    timeoutMs: number,
  ): Promise<T> {
    return this.#enqueue(async () => {
      const generation = this.#checkSession(session);
      const { inputSlots } = this.#options;
      const inputs = writeInputs(
        generation.ring,
        Array.from({ length: inputSlots }, (_, i) => i),
      );
      const outputs = Array.from({ length: Math.min(maxChunk, this.#options.outputSlots) }, (_, i) => inputSlots + i);
      const replies = await Promise.all(
        generation.ranks.map((rank) =>
          rank.request(
            {
              type: 'step',
              session,
              index,
              width: size.width,
              height: size.height,
              inputs,
              outputs: rank.rank === 0 || slices ? outputs : [],
              slices,
            },
            timeoutMs,
            `step ${index}`,
          ),
        ),
      );
      const leader = replies[0]!;
      for (const frame of leader.frames ?? []) {
        if (!outputs.includes(frame.slot))
          throw new PythonWorkerError('python_protocol_error', `the worker named slot ${frame.slot}, which this step did not give it`);
      }
      return readOutputs(generation.ring, leader);
    }).catch((error: unknown) => this.#sessionFailure(session, error));
  }

  /** Stops every worker and closes the ring; no restart follows. */
  async close(): Promise<void> {
    this.#closed = true;
    liveGroups.delete(this);
    const generation = this.#generation;
    this.#generation = undefined;
    if (!generation) return;
    generation.failure ??= new PythonWorkerError('python_worker_crashed', 'the Python worker group was closed');
    await Promise.all(generation.ranks.map((rank) => rank.stop()));
    generation.ring.close();
  }

  #spawn(): Generation {
    const o = this.#options;
    const ring = FrameRing.create({ slotCount: o.inputSlots + o.outputSlots, slotBytes: o.slotBytes });
    const number = ++this.#count;
    const env: Record<string, string> = { ...o.env };
    const ranks: PythonWorkerProcess[] = [];
    const generation: Generation = {
      number,
      ring,
      ranks,
      ready: Promise.resolve({ commands: {}, has_generate: false }),
      failure: undefined,
      loaded: false,
    };
    const masterPort = this.worldSize > 1 ? freePortHint() : undefined;
    for (let rank = 0; rank < this.worldSize; rank++) {
      ranks.push(
        new PythonWorkerProcess({
          python: o.python,
          modulePath: o.modulePath,
          ring,
          rank,
          worldSize: this.worldSize,
          env: {
            ...env,
            RANK: String(rank),
            LOCAL_RANK: String(rank),
            WORLD_SIZE: String(this.worldSize),
            ...(masterPort ? { MASTER_ADDR: '127.0.0.1', MASTER_PORT: String(masterPort) } : {}),
          },
          heartbeatMs: o.heartbeatMs ?? 1_000,
          heartbeatTimeoutMs: o.heartbeatTimeoutMs ?? 10_000,
          onProgress: rank === 0 ? (fraction, message) => this.#progress?.(fraction, message) : undefined,
          onSessionMessage:
            rank === 0
              ? o.onSessionMessage
              : (m) => {
                  if (m.type === 'log') o.onSessionMessage?.(m);
                },
          onOutput: (line, stream) => o.onOutput?.(line, stream, rank),
          onFailure: (error) => this.#generationFailed(generation, error),
        }),
      );
    }
    const startTimeoutMs = o.startTimeoutMs ?? 600_000;
    let timer: NodeJS.Timeout | undefined;
    const ready = Promise.race([
      Promise.all(ranks.map((r) => r.ready)).then((all) => all[0]!),
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new PythonWorkerError('python_worker_timeout', `the Python workers were not ready within ${startTimeoutMs} ms`)),
          startTimeoutMs,
        );
        timer.unref();
      }),
    ])
      .then((description) => {
        generation.loaded = true;
        return description;
      })
      .finally(() => clearTimeout(timer));
    ready.catch((error: unknown) =>
      this.#generationFailed(
        generation,
        error instanceof PythonWorkerError ? error : new PythonWorkerError('python_load_failed', String(error)),
      ),
    );
    (generation as { ready: Promise<ModelDescription> }).ready = ready;
    this.#generation = generation;
    return generation;
  }

  #generationFailed(generation: Generation, error: PythonWorkerError): void {
    if (generation.failure) return;
    generation.failure = error;
    for (const rank of generation.ranks) rank.kill();
    // The ring's memory goes when the last rank's process is gone; our descriptor now.
    void Promise.all(generation.ranks.map((r) => r.exited())).then(() => generation.ring.close());
    const failed: string[] = [];
    for (const [id, entry] of this.#sessions) {
      if (entry.generation === generation.number && !entry.failure) {
        entry.failure = error;
        failed.push(id);
      }
    }
    this.#options.onFailure?.(error, failed);
    // A fresh generation for the next session — unless this one never got ready (a module that
    // raises or crashes while loading): then the next session's start tries again, so a broken
    // module is not respawned in a loop.
    if (!this.#closed && this.#generation === generation && generation.loaded) {
      this.#spawn().ready.catch(() => undefined);
    }
  }

  #checkSession(session: string): Generation {
    const entry = this.#sessions.get(session);
    if (!entry) throw new PythonWorkerError('python_protocol_error', `session ${session} was not started on the Python workers`);
    if (entry.failure) throw entry.failure;
    const generation = this.#generation;
    if (!generation || generation.number !== entry.generation)
      throw new PythonWorkerError('python_worker_crashed', `the Python workers serving session ${session} are gone`);
    if (generation.failure) throw generation.failure;
    return generation;
  }

  #request(session: string, body: WorkerRequest, timeoutMs: number, what: string): Promise<SuccessfulReply> {
    return this.#enqueue(() => {
      this.#checkSession(session);
      return this.#all(body, timeoutMs, what);
    }).catch((error: unknown) => this.#sessionFailure(session, error));
  }

  async #all(body: WorkerRequest, timeoutMs: number, what: string): Promise<SuccessfulReply> {
    const generation = this.#generation;
    if (!generation || generation.failure)
      throw generation?.failure ?? new PythonWorkerError('python_worker_crashed', 'no Python worker is running');
    const replies = await Promise.all(generation.ranks.map((rank) => rank.request(body, timeoutMs, what)));
    return replies[0]!;
  }

  /** A request failed: if the workers died meanwhile, the session fails with their error. */
  #sessionFailure(session: string, error: unknown): never {
    const entry = this.#sessions.get(session);
    if (entry?.failure) throw entry.failure;
    throw error;
  }

  #enqueue<T>(fn: () => Promise<T>): Promise<T> {
    const result = this.#queue.then(fn);
    this.#queue = result.catch(() => undefined);
    return result;
  }

  #killAll(): void {
    for (const rank of this.#generation?.ranks ?? []) rank.kill();
  }
}

/** Groups not yet closed, whose workers the process's exit handler kills. */
const liveGroups = new Set<PythonWorkerGroup>();
let exitHandlerInstalled = false;

let portHint = 29_500 + (process.pid % 1_000);
/** A port for torch.distributed's rendezvous (MASTER_PORT): distinct per generation and process. */
function freePortHint(): number {
  portHint = portHint >= 39_000 ? 29_500 : portHint + 1;
  return portHint;
}
