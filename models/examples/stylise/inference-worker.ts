/**
 * The stylise example's inference thread (started by inference-worker.mjs). onnxruntime-node's
 * `session.run()` returns a promise but runs the graph synchronously on the calling thread (its
 * backend defers a blocking native call with setImmediate), which would stall the runtime's event
 * loop — RTP pacing, commands, encoders — for the whole inference; frame → tensor is a per-pixel
 * loop of the same order. Both run here; the main thread only moves bytes and converts the output
 * to I420 (stylise-engine.ts).
 */

import { parentPort, workerData } from 'node:worker_threads';
import { InferenceSession, Tensor } from 'onnxruntime-node';
import { frameToTensor } from './frame-tensor.ts';
import type { ProviderFailure, RunRequest, WorkerData, WorkerReply } from './inference-protocol.ts';
import { STYLISE_IO } from './stylise-network.ts';

const port = parentPort;
if (!port) throw new Error('inference-worker runs as a worker thread');
const post = (reply: WorkerReply, transfer: ArrayBuffer[] = []): void => port.postMessage(reply, transfer);
const { model, providers } = workerData as WorkerData;

async function load(): Promise<InferenceSession | undefined> {
  const failures: ProviderFailure[] = [];
  for (const provider of providers) {
    try {
      // The CPU after an accelerator: nodes the accelerator lacks run there instead of failing.
      const executionProviders = provider === 'cpu' ? ['cpu'] : [provider, 'cpu'];
      const session = await InferenceSession.create(model, { executionProviders, graphOptimizationLevel: 'all' });
      post({ type: 'ready', provider, failures });
      return session;
    } catch (error) {
      failures.push({ provider, message: error instanceof Error ? error.message : String(error) });
    }
  }
  post({ type: 'failed', failures });
  return undefined;
}

const session = await load();
if (session) {
  let tensor = new Float32Array(0);
  port.on('message', async ({ id, frame, size, strength }: RunRequest) => {
    const frameData = frame.data;
    try {
      const started = performance.now();
      if (tensor.length !== 3 * size * size) tensor = new Float32Array(3 * size * size);
      frameToTensor(frame, size, tensor);
      const prepared = performance.now();
      const results = await session.run({
        [STYLISE_IO.image]: new Tensor('float32', tensor, [1, 3, size, size]),
        [STYLISE_IO.strength]: new Tensor('float32', Float32Array.of(strength), [1]),
      });
      const runMs = performance.now() - prepared;
      const data = results[STYLISE_IO.output]?.data;
      if (!(data instanceof Float32Array)) throw new TypeError(`the network returned no float32 "${STYLISE_IO.output}" output`);
      // Only an array that owns its whole buffer can be handed over; otherwise copy.
      const output = data.byteOffset === 0 && data.byteLength === data.buffer.byteLength ? data : data.slice();
      post({ type: 'result', id, output, frameData, prepareMs: prepared - started, runMs }, [
        output.buffer as ArrayBuffer,
        frameData.buffer as ArrayBuffer,
      ]);
    } catch (error) {
      post({ type: 'error', id, message: error instanceof Error ? error.message : String(error), frameData }, [
        frameData.buffer as ArrayBuffer,
      ]);
    }
  });
}
