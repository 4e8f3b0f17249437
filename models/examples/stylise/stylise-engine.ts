/**
 * The stylise network on onnxruntime-node, off the event loop: one worker thread
 * (inference-worker.mjs) holds the InferenceSession; `run()` hands it a tensor and resolves with
 * the output. Choosing the execution provider: `ARCLIGHT_ONNX_PROVIDERS` (e.g. `cuda,cpu`) when
 * set, otherwise CUDA when onnxruntime-node lists it and its CUDA libraries are installed (see
 * docs/model-authors.md, "Example: stylise"), then the CPU. Each is tried in turn; the engine
 * says which one loaded and why the others did not.
 */

import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { listSupportedBackends } from 'onnxruntime-node';

export interface ProviderFailure {
  readonly provider: string;
  readonly message: string;
}

export interface InferenceResult {
  /** The stylised tensor, [1,3,H,W] CHW, 0–1. */
  readonly output: Float32Array;
  /** The input tensor's buffer, handed back for reuse. */
  readonly image: Float32Array;
  /** ort `session.run()` alone, on the worker. */
  readonly runMs: number;
}

type WorkerReply =
  | { type: 'ready'; provider: string; failures: ProviderFailure[] }
  | { type: 'failed'; message: string; failures: ProviderFailure[] }
  | { type: 'result'; id: number; output: Float32Array; image: Float32Array; runMs: number }
  | { type: 'error'; id: number; message: string };

interface Pending {
  resolve(result: InferenceResult): void;
  reject(error: Error): void;
}

/**
 * Providers to try, in order. `requested` is `ARCLIGHT_ONNX_PROVIDERS` (comma-separated); the CPU
 * is always the last resort.
 */
export function chooseProviders(requested: string | undefined, listed: readonly string[], cudaInstalled: boolean): string[] {
  const asked = (requested ?? '').split(',').map((p) => p.trim().toLowerCase()).filter((p) => p.length > 0);
  const candidates = asked.length > 0 ? asked : listed.includes('cuda') && cudaInstalled ? ['cuda'] : [];
  return [...new Set([...candidates, 'cpu'])];
}

/**
 * onnxruntime-node lists `cuda` on every Linux x64 host, but its CUDA provider libraries are a
 * separate download (skipped by this project's .npmrc). Trying without them makes ORT print an
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

export class StyliseEngine {
  readonly provider: string;
  readonly failures: readonly ProviderFailure[];
  readonly #worker: Worker;
  readonly #pending = new Map<number, Pending>();
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
    // of the worker, or the CPU after them would load and be reported as them.
    const providers = wanted.filter((p) => listed.includes(p));
    const skipped = wanted
      .filter((p) => !listed.includes(p))
      .map((provider) => ({ provider, message: `not a backend of this onnxruntime-node (it has ${listed.join(', ')})` }));
    if (providers.length === 0) {
      return Promise.reject(new Error(`no execution provider could load the network (tried ${wanted.join(', ')}) (${skipped.map((f) => `${f.provider}: ${f.message}`).join('; ')})`));
    }
    // The worker is plain JavaScript beside this file, run by bare Node (no TypeScript loader).
    const worker = new Worker(new URL('./inference-worker.mjs', import.meta.url), { workerData: { model, providers } });
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
        if (reply.type === 'ready') resolve(new StyliseEngine(worker, reply.provider, [...skipped, ...reply.failures]));
        else {
          void worker.terminate();
          const failures = reply.type === 'failed' ? [...skipped, ...reply.failures] : [];
          const detail = failures.map((f) => `${f.provider}: ${f.message}`).join('; ');
          reject(new Error(`${reply.type === 'failed' ? `no execution provider could load the network (tried ${wanted.join(', ')})` : 'unexpected reply from the inference worker'}${detail ? ` (${detail})` : ''}`));
        }
      };
      const cleanup = () => {
        worker.off('error', onError).off('exit', onExit).off('message', onMessage);
      };
      worker.on('error', onError).on('exit', onExit).on('message', onMessage);
    });
  }

  /** Whether the worker has died (every later run rejects). */
  get dead(): boolean {
    return this.#dead !== undefined;
  }

  /**
   * Stylises one CHW tensor (3·width·height values in 0–1). `image`'s buffer moves to the worker
   * and comes back in the result.
   */
  run(image: Float32Array, width: number, height: number, strength: number): Promise<InferenceResult> {
    if (this.#dead) return Promise.reject(this.#dead);
    if (image.length !== 3 * width * height) return Promise.reject(new RangeError(`image must hold 3x${width}x${height} values, got ${image.length}`));
    // Only a tensor that owns its whole buffer can be handed over; a view is copied.
    const owned = image.buffer instanceof ArrayBuffer && image.byteOffset === 0 && image.byteLength === image.buffer.byteLength ? image : image.slice();
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      this.#worker.postMessage({ type: 'run', id, image: owned, width, height, strength }, [owned.buffer as ArrayBuffer]);
    });
  }

  async close(): Promise<void> {
    this.#fail(new Error('the stylise engine was closed'));
    await this.#worker.terminate();
  }

  #settle(reply: WorkerReply): void {
    if (reply.type !== 'result' && reply.type !== 'error') return;
    const pending = this.#pending.get(reply.id);
    if (!pending) return;
    this.#pending.delete(reply.id);
    if (reply.type === 'result') pending.resolve({ output: reply.output, image: reply.image, runMs: reply.runMs });
    else pending.reject(new Error(`inference failed: ${reply.message}`));
  }

  #fail(error: Error): void {
    this.#dead ??= error;
    for (const pending of this.#pending.values()) pending.reject(error);
    this.#pending.clear();
  }
}
