/**
 * One Python worker process (one rank): spawns `python -m arclight_worker serve MODULE` with the
 * frame ring as fd 3 and its control socket (a socketpair) as fd 4, waits for `ready` (forwarding
 * load progress), and carries requests and replies. It watches the process: an exit, a missing
 * heartbeat or a request past its deadline fails everything pending with a PythonWorkerError and
 * the process is killed — never the runtime. It does not restart itself (worker-group.ts does).
 */

import { spawn, type ChildProcess } from 'node:child_process';
import type { Duplex } from 'node:stream';
import { CommandError } from '../model/command-error.ts';
import { ControlChannel } from './control-channel.ts';
import type { FrameRing } from './frame-ring.ts';
import { pythonEnvironment } from './python-environment.ts';
import { PythonWorkerError } from './python-worker-error.ts';
import {
  WORKER_PROTOCOL_VERSION,
  type ModelDescription,
  type SuccessfulReply,
  type WorkerMessage,
  type WorkerRequest,
} from './worker-protocol.ts';

export interface PythonWorkerProcessOptions {
  readonly python: string;
  readonly modulePath: string;
  readonly ring: FrameRing;
  readonly rank: number;
  readonly worldSize: number;
  /** Extra environment (MASTER_PORT for torch.distributed, the model's own). */
  readonly env?: Readonly<Record<string, string>>;
  /** How often the worker sends a heartbeat. */
  readonly heartbeatMs: number;
  /** No message at all for this long: the worker is hung (frozen, deadlocked) and is killed. */
  readonly heartbeatTimeoutMs: number;
  /** Load progress, 0–1. */
  readonly onProgress?: (fraction: number, message: string | undefined) => void;
  /** `log` and `broadcast` messages for a session. */
  readonly onSessionMessage?: (message: Extract<WorkerMessage, { type: 'log' | 'broadcast' }>) => void;
  /** A line the worker wrote on stdout or stderr. */
  readonly onOutput?: (line: string, stream: 'stdout' | 'stderr') => void;
  /** Called once when the process is gone or declared dead, with why. */
  readonly onFailure?: (error: PythonWorkerError) => void;
}

/** Lines of the worker's output kept for error messages. */
const TAIL_LINES = 20;

interface Pending {
  readonly resolve: (reply: SuccessfulReply) => void;
  readonly reject: (error: Error) => void;
  readonly what: string;
  readonly timer: NodeJS.Timeout | undefined;
}

export class PythonWorkerProcess {
  readonly rank: number;
  readonly #options: PythonWorkerProcessOptions;
  readonly #child: ChildProcess;
  readonly #channel: ControlChannel;
  readonly #pending = new Map<number, Pending>();
  readonly #tail: string[] = [];
  readonly #watchdog: NodeJS.Timeout;
  readonly ready: Promise<ModelDescription>;
  #resolveReady!: (description: ModelDescription) => void;
  #rejectReady!: (error: Error) => void;
  #nextId = 1;
  #lastSeen = performance.now();
  #failure: PythonWorkerError | undefined;
  #exited = false;
  #channelClosed = false;
  #ready = false;
  #stopping = false;
  #pid: number | undefined;

  constructor(options: PythonWorkerProcessOptions) {
    this.#options = options;
    this.rank = options.rank;
    this.ready = new Promise((resolve, reject) => {
      this.#resolveReady = resolve;
      this.#rejectReady = reject;
    });
    this.ready.catch(() => undefined);
    this.#child = spawn(options.python, ['-m', 'arclight_worker', 'serve', options.modulePath], {
      stdio: ['ignore', 'pipe', 'pipe', options.ring.fd, 'pipe'],
      env: pythonEnvironment({
        ...options.env,
        ARCLIGHT_RING_FD: '3',
        ARCLIGHT_CONTROL_FD: '4',
        ARCLIGHT_RANK: String(options.rank),
        ARCLIGHT_WORLD_SIZE: String(options.worldSize),
        ARCLIGHT_HEARTBEAT_MS: String(options.heartbeatMs),
        ARCLIGHT_PARENT_PID: String(process.pid),
      }),
    });
    this.#pid = this.#child.pid;
    this.#channel = new ControlChannel(this.#child.stdio[4] as Duplex, {
      onMessage: (message) => this.#onMessage(message),
      onInvalid: (line) =>
        this.#fail(
          new PythonWorkerError(
            'python_protocol_error',
            `Python worker (rank ${this.rank}) sent a line that is not a control message: ${line.slice(0, 200)}`,
          ),
        ),
      onClose: () => {
        this.#channelClosed = true;
      },
    });
    for (const stream of ['stdout', 'stderr'] as const) {
      let partial = '';
      this.#child[stream]?.setEncoding('utf8');
      this.#child[stream]?.on('data', (chunk: string) => {
        const lines = (partial + chunk).split('\n');
        partial = lines.pop() ?? '';
        for (const line of lines) this.#output(line, stream);
      });
    }
    this.#child.on('error', (error) => {
      this.#fail(
        new PythonWorkerError(
          'python_unavailable',
          `Cannot start the Python worker "${options.python}": ${error.message}. Set ARCLIGHT_PYTHON to a Python with numpy.`,
        ),
      );
    });
    this.#child.on('exit', (code, signal) => {
      this.#exited = true;
      // Its last words (a `fatal`, a traceback on stderr) may still be in flight: read them first.
      const report = (): void => {
        const how = signal ? `was killed by ${signal}` : `exited with code ${code}`;
        this.#fail(
          new PythonWorkerError('python_worker_crashed', `Python worker (rank ${this.rank}, pid ${this.#pid}) ${how}`, this.tail()),
        );
      };
      if (this.#channelClosed) report();
      else setTimeout(report, 300).unref();
    });
    this.#watchdog = setInterval(
      () => {
        // Loading (import + @model.load) is bounded by the group's start timeout instead: a loader
        // in native code may hold the GIL, and with it the heartbeat thread, for a long time.
        if (!this.#ready) return;
        const silentMs = performance.now() - this.#lastSeen;
        if (silentMs > options.heartbeatTimeoutMs) {
          this.#fail(
            new PythonWorkerError(
              'python_worker_timeout',
              `Python worker (rank ${this.rank}, pid ${this.#pid}) sent no heartbeat for ${Math.round(silentMs)} ms (limit ${options.heartbeatTimeoutMs} ms); it was killed`,
              this.tail(),
            ),
          );
        }
      },
      Math.min(1_000, Math.max(50, options.heartbeatTimeoutMs / 4)),
    );
    this.#watchdog.unref();
  }

  get pid(): number | undefined {
    return this.#pid;
  }

  /** Why the worker is dead, once it is. */
  get failure(): PythonWorkerError | undefined {
    return this.#failure;
  }

  /** The worker's last output lines (its traceback, usually). */
  tail(): string {
    return this.#tail.join('\n');
  }

  /**
   * Sends one request and resolves with its reply. A failed reply (the model raised) rejects with
   * a CommandError-compatible PythonWorkerError (`python_error`, or the model's own code); no reply
   * within `timeoutMs` kills the worker (`python_worker_timeout`).
   */
  request(body: WorkerRequest, timeoutMs: number | undefined, what: string): Promise<SuccessfulReply> {
    if (this.#failure) return Promise.reject(this.#failure);
    const id = this.#nextId++;
    return new Promise<SuccessfulReply>((resolve, reject) => {
      const timer =
        timeoutMs === undefined
          ? undefined
          : setTimeout(() => {
              this.#fail(
                new PythonWorkerError(
                  'python_worker_timeout',
                  `Python worker (rank ${this.rank}, pid ${this.#pid}) did not answer ${what} within ${timeoutMs} ms; it was killed`,
                  this.tail(),
                ),
              );
            }, timeoutMs);
      this.#pending.set(id, { resolve, reject, what, timer });
      this.#channel.send({ ...body, id });
    });
  }

  /** Asks the worker to exit (shutdown, then SIGKILL after `graceMs`). */
  stop(graceMs = 2_000): Promise<void> {
    this.#stopping = true;
    if (this.#exited) return Promise.resolve();
    this.#channel.send({ type: 'shutdown' });
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.kill(), graceMs);
      timer.unref();
      this.#child.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /** SIGKILL, at once (synchronous: safe in a process 'exit' handler). */
  kill(): void {
    this.#stopping = true;
    if (!this.#exited) this.#child.kill('SIGKILL');
    this.#channel.close();
  }

  /** Resolves when the process has exited. */
  exited(): Promise<void> {
    if (this.#exited) return Promise.resolve();
    return new Promise((resolve) => this.#child.once('exit', () => resolve()));
  }

  #onMessage(message: WorkerMessage): void {
    this.#lastSeen = performance.now();
    switch (message.type) {
      case 'hello':
        if (message.protocol !== WORKER_PROTOCOL_VERSION) {
          this.#fail(
            new PythonWorkerError(
              'python_protocol_error',
              `the arclight_worker package speaks protocol ${message.protocol}; this runtime speaks ${WORKER_PROTOCOL_VERSION}`,
            ),
          );
        }
        return;
      case 'progress':
        this.#options.onProgress?.(message.fraction, message.message ?? undefined);
        return;
      case 'ready':
        this.#ready = true;
        this.#resolveReady({ commands: message.commands, has_generate: message.has_generate });
        return;
      case 'fatal':
        this.#fail(
          new PythonWorkerError(
            'python_load_failed',
            `The Python model failed to load (rank ${this.rank}): ${message.message}`,
            message.traceback,
          ),
        );
        return;
      case 'heartbeat':
        return;
      case 'log':
      case 'broadcast':
        this.#options.onSessionMessage?.(message);
        return;
      case 'reply': {
        const pending = this.#pending.get(message.id);
        if (!pending) return;
        this.#pending.delete(message.id);
        clearTimeout(pending.timer);
        if (message.ok) {
          pending.resolve(message);
        } else {
          const { error } = message;
          pending.reject(
            error.command_error && error.code && /^[a-z][a-z0-9_]{0,63}$/.test(error.code)
              ? new PythonCommandError(error.code, error.message)
              : new PythonWorkerError('python_error', `Python ${pending.what} raised ${error.message}`, error.traceback),
          );
        }
        return;
      }
    }
  }

  #output(line: string, stream: 'stdout' | 'stderr'): void {
    this.#tail.push(line);
    if (this.#tail.length > TAIL_LINES) this.#tail.shift();
    this.#options.onOutput?.(line, stream);
  }

  #fail(error: PythonWorkerError): void {
    if (this.#failure) return;
    this.#failure = error;
    const expected = this.#stopping && error.code === 'python_worker_crashed';
    clearInterval(this.#watchdog);
    this.kill();
    this.#rejectReady(error);
    for (const [id, pending] of this.#pending) {
      clearTimeout(pending.timer);
      pending.reject(error);
      this.#pending.delete(id);
    }
    if (!expected) this.#options.onFailure?.(error);
  }
}

/** A `CommandError(code, message)` the Python model raised: reaches the client verbatim. */
export class PythonCommandError extends CommandError {}
