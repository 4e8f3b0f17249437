// The stylise example's inference thread. onnxruntime-node's `session.run()` returns a promise
// but runs the graph synchronously on the calling thread (its backend defers a blocking native
// call with setImmediate), which would stall the runtime's event loop — RTP pacing, commands,
// encoders — for the whole inference (tens of ms a frame on a CPU). So the session lives here,
// on a worker thread, and the model talks to it with messages (stylise-engine.ts).
//
// Plain JavaScript on purpose: a worker does not inherit the tsx loader that runs the model's
// TypeScript (or vitest's transform), so this file must run under bare Node.
//
// workerData: { model: Uint8Array, providers: string[] } — providers tried in order, one at a time.
// Messages in:  { type: 'run', id, image: Float32Array, width, height, strength }
// Messages out: { type: 'ready', provider, failures: [{ provider, message }] }
//               { type: 'failed', message, failures }
//               { type: 'result', id, output: Float32Array, image: Float32Array, runMs }
//               { type: 'error', id, message }
import { parentPort, workerData } from 'node:worker_threads';
import { InferenceSession, Tensor } from 'onnxruntime-node';

const port = parentPort;
if (!port) throw new Error('inference-worker.mjs runs as a worker thread');

/** @type {{ model: Uint8Array, providers: string[] }} */
const { model, providers } = workerData;

/** @type {InferenceSession | undefined} */
let session;
const failures = [];
for (const provider of providers) {
  try {
    // CPU after the accelerator: nodes the accelerator lacks run on the CPU instead of failing.
    const executionProviders = provider === 'cpu' ? ['cpu'] : [provider, 'cpu'];
    session = await InferenceSession.create(model, { executionProviders, graphOptimizationLevel: 'all' });
    port.postMessage({ type: 'ready', provider, failures });
    break;
  } catch (error) {
    failures.push({ provider, message: error instanceof Error ? error.message : String(error) });
  }
}
if (!session) {
  port.postMessage({ type: 'failed', message: `no execution provider could load the network (tried ${providers.join(', ')})`, failures });
} else {
  const ready = session;
  port.on('message', async (/** @type {{ type: 'run', id: number, image: Float32Array, width: number, height: number, strength: number }} */ message) => {
    const { id, image, width, height, strength } = message;
    try {
      const started = performance.now();
      const results = await ready.run({
        image: new Tensor('float32', image, [1, 3, height, width]),
        strength: new Tensor('float32', Float32Array.of(strength), [1]),
      });
      const runMs = performance.now() - started;
      const data = results['stylised']?.data;
      if (!(data instanceof Float32Array)) throw new TypeError('the network returned no float32 "stylised" output');
      // Copy when the output does not own its whole buffer (it cannot be handed over then).
      const output = data.byteOffset === 0 && data.byteLength === data.buffer.byteLength ? data : data.slice();
      port.postMessage({ type: 'result', id, output, image, runMs }, [output.buffer, image.buffer]);
    } catch (error) {
      port.postMessage({ type: 'error', id, message: error instanceof Error ? error.message : String(error) });
    }
  });
}
