/**
 * The stylise network on onnxruntime-node, off the event loop: one worker thread
 * (inference-worker.ts) holds the InferenceSession and turns frames into tensors; `stylise()`
 * hands it a webcam frame and resolves with the output tensor. Choosing the execution provider:
 * `ARCLIGHT_ONNX_PROVIDERS` (e.g. `cuda,cpu`) when set, otherwise CUDA when onnxruntime-node lists
 * it and its CUDA libraries are installed (docs/model-authors.md, "Example: stylise"), then the
 * CPU. Each is tried in turn; the engine says which one loaded and why the others did not.
 */

import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { listSupportedBackends } from 'onnxruntime-node';
import type { VideoFrame } from 'arclight/runtime';
import type { ProviderFailure, RunRequest, WorkerData, WorkerReply } from './inference-protocol.ts';

export type { ProviderFailure };

export interface StyliseResult {
  /** The stylised picture, [1,3,size,size] RGB CHW in 0–1. */
  readonly output: Float32Array;
  /** frame → tensor, on the worker. */
  readonly prepareMs: number;
  /** ort `session.run()` alone, on the worker. */
  readonly runMs: number;
}

interface Pending {
  resolve(result: StyliseResult): void;
  reject(error: Error): void;
}

/**
 * Providers to try, in order. `requested` is `ARCLIGHT_ONNX_PROVIDERS` (comma-separated); the CPU
 * is always the last resort.
 */
export function chooseProviders(requested: string | undefined, listed: readonly string[], cudaInstalled: boolean): string[] {
  const asked = (requested ?? '')
    .split(',')
    .map((p) => p.trim().toLowerCase())
    .filter((p) => p.length > 0);
  const candidates = asked.length > 0 ? asked : listed.includes('cuda') && cudaInstalled ? ['cuda'] : [];
  return [...new Set([...candidates, 'cpu'])];
}

/**
 * onnxruntime-node lists `cuda` on every Linux x64 host, but its CUDA provider libraries are a
 * separate download (skipped by this project's package.json allowScripts). Trying without them makes ORT print an
 * error on every CPU-only start, so look for the library first.
 */
function cudaProviderInstalled(): boolean {
  try {
    const packageDir = dirname(createRequire(import.meta.url).resolve('onnxruntime-node/package.json'));
    return existsSync(join(packageDir, 'bin', 'napi-v6', process.platform, process.arch, 'libonnxruntime_providers_cuda.so'));
  } catch {
    return false;
  }
}

const describe = (failures: readonly ProviderFailure[]): string => failures.map((f) => `${f.provider}: ${f.message}`).join('; ');

export class StyliseEngine {
  readonly provider: string;
  readonly failures: readonly ProviderFailure[];
  readonly #worker: Worker;
  readonly #pending = new Map<number, Pending>();
  /** A frame buffer the worker handed back, reused for the next frame of the same size. */
  #spare: Uint8Array | undefined;
  #nextId = 1;
  #dead: Error | undefined;

  private constructor(worker: Worker, provider: string, failures: readonly ProviderFailure[]) {
    this.#worker = worker;
    this.provider = provider;
    this.failures = failures;
    worker.on('message', (reply: WorkerReply) => this.#settle(reply));
    worker.on('error', (error) => this.#fail(error));
    worker.on('exit', (code) => this.#fail(new Error(`the inference worker exited (code ${code})`)));
  }

  /** Starts the worker and loads `model` with the first provider that works. */
  static start(model: Uint8Array, options: { providers?: readonly string[] } = {}): Promise<StyliseEngine> {
    const listed = listSupportedBackends().map((b) => b.name);
    const wanted = options.providers ?? chooseProviders(process.env['ARCLIGHT_ONNX_PROVIDERS'], listed, cudaProviderInstalled());
    // onnxruntime-node quietly drops a provider it does not have from a list: keep such names out
    // of the worker, or the CPU behind them would load and be reported as them.
    const providers = wanted.filter((p) => listed.includes(p));
    const skipped = wanted
      .filter((p) => !listed.includes(p))
      .map((provider) => ({ provider, message: `not a backend of this onnxruntime-node (it has ${listed.join(', ')})` }));
    const noProvider = (failures: readonly ProviderFailure[]) =>
      new Error(`no execution provider could load the network (tried ${wanted.join(', ')}): ${describe(failures)}`);
    if (providers.length === 0) return Promise.reject(noProvider(skipped));
    const workerData: WorkerData = { model, providers };
    // A plain-JavaScript entry that registers the TypeScript loader, then runs inference-worker.ts.
    const worker = new Worker(new URL('./inference-worker.mjs', import.meta.url), { workerData });
    // Never the reason a process stays up: the runtime decides when to exit.
    worker.unref();
    return new Promise((resolve, reject) => {
      const onError = (error: Error) => {
        cleanup();
        reject(error);
      };
      const onExit = (code: number) => {
        cleanup();
        reject(new Error(`the inference worker exited during start (code ${code})`));
      };
      const onMessage = (reply: WorkerReply) => {
        cleanup();
        if (reply.type === 'ready') {
          resolve(new StyliseEngine(worker, reply.provider, [...skipped, ...reply.failures]));
          return;
        }
        void worker.terminate();
        reject(
          reply.type === 'failed'
            ? noProvider([...skipped, ...reply.failures])
            : new Error(`unexpected ${reply.type} from the inference worker during start`),
        );
      };
      const cleanup = () => {
        worker.off('error', onError).off('exit', onExit).off('message', onMessage);
      };
      worker.on('error', onError).on('exit', onExit).on('message', onMessage);
    });
  }

  /** Whether the worker has died (every later call rejects). */
  get dead(): boolean {
    return this.#dead !== undefined;
  }

  /**
   * Stylises the centred square of `frame` (I420 or RGBA, any size) at size × size. The frame's
   * bytes are copied once, into a buffer that moves to the worker and back.
   */
  stylise(frame: VideoFrame, size: number, strength: number): Promise<StyliseResult> {
    if (this.#dead) return Promise.reject(this.#dead);
    if (!Number.isInteger(size) || size < 1) return Promise.reject(new RangeError(`size must be a positive integer, got ${size}`));
    const data = this.#spare?.length === frame.data.length ? this.#spare : new Uint8Array(frame.data.length);
    this.#spare = undefined;
    data.set(frame.data);
    const request: RunRequest = {
      type: 'run',
      id: this.#nextId++,
      frame: { width: frame.width, height: frame.height, format: frame.format, data },
      size,
      strength,
    };
    return new Promise((resolve, reject) => {
      this.#pending.set(request.id, { resolve, reject });
      this.#worker.postMessage(request, [data.buffer as ArrayBuffer]);
    });
  }

  async close(): Promise<void> {
    this.#fail(new Error('the stylise engine was closed'));
    await this.#worker.terminate();
  }

  #settle(reply: WorkerReply): void {
    if (reply.type !== 'result' && reply.type !== 'error') return;
    this.#spare = reply.frameData;
    const pending = this.#pending.get(reply.id);
    if (!pending) return;
    this.#pending.delete(reply.id);
    if (reply.type === 'result') pending.resolve({ output: reply.output, prepareMs: reply.prepareMs, runMs: reply.runMs });
    else pending.reject(new Error(`inference failed: ${reply.message}`));
  }

  #fail(error: Error): void {
    this.#dead ??= error;
    for (const pending of this.#pending.values()) pending.reject(error);
    this.#pending.clear();
  }
}
