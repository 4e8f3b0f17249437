/**
 * `stylise` — webcam in, stylised video out, through an ONNX network on onnxruntime-node: the
 * centred square of each webcam frame, scaled to the processing size (256² by default, 512² with
 * `ARCLIGHT_STYLISE_SIZE=512`), goes through a small image-to-image network generated in code
 * (stylise-network.ts: blur, colour grade, ink edges, posterise) and is blended with the input by
 * `strength` (the `set_strength` command; 0 shows the input, 1 the full effect) inside the graph.
 *
 * Frame → tensor and inference run on a worker thread (stylise-engine.ts), never on the runtime's
 * event loop; the execution provider is CUDA where onnxruntime-node has it, else the CPU
 * (docs/model-authors.md, "Example: stylise").
 */

import {
  commandFor,
  convertToYuv,
  defineModel,
  yuvByteLength,
  type ModelDefinition,
  type ModelSession,
  type VideoFrame,
} from 'arclight/runtime';
import { I420Canvas } from '../shared/i420-canvas.ts';
import { StyliseEngine } from './stylise-engine.ts';
import { buildStyliseNetwork } from './stylise-network.ts';

export type ProcessingSize = 256 | 512;
export const PROCESSING_SIZES: readonly ProcessingSize[] = [256, 512];
export const DEFAULT_STRENGTH = 0.8;

export interface StyliseOptions {
  /** Side of the square the network sees and the output track's size. Default 256. */
  readonly size?: ProcessingSize;
  /** Execution providers to try in order (default: ARCLIGHT_ONNX_PROVIDERS, else CUDA when installed, then CPU). */
  readonly providers?: readonly string[];
}

interface StyliseState {
  strength: number;
  /** The size of the last input frame, to announce changes. */
  inputSize: string | undefined;
}

const command = commandFor<StyliseState>();

/** `ARCLIGHT_STYLISE_SIZE` (256 or 512), else 256; anything else is a configuration error. */
export function processingSizeFromEnv(value = process.env['ARCLIGHT_STYLISE_SIZE']): ProcessingSize {
  if (value === undefined || value === '') return 256;
  const size = Number(value);
  if (size !== 256 && size !== 512) throw new RangeError(`ARCLIGHT_STYLISE_SIZE must be 256 or 512, got ${JSON.stringify(value)}`);
  return size;
}

export function createStyliseModel(options: StyliseOptions = {}): ModelDefinition<StyliseState> {
  const size = options.size ?? 256;
  if (!PROCESSING_SIZES.includes(size)) throw new RangeError(`stylise: size must be 256 or 512, got ${size}`);
  const network = buildStyliseNetwork();
  let engine: Promise<StyliseEngine> | undefined;

  /** The process's engine; a new one if the last one's worker died (that session ended with model_error). */
  const currentEngine = async (): Promise<StyliseEngine> => {
    const pending = engine;
    const existing = pending && (await pending.catch(() => undefined));
    if (existing && !existing.dead) return existing;
    if (engine === pending) {
      engine = StyliseEngine.start(network, options.providers ? { providers: options.providers } : {});
      engine.catch(() => {}); // a failed start is reported to whoever awaits it, not as unhandled
    }
    return engine!;
  };

  return defineModel<StyliseState>({
    name: 'stylise',
    version: '1.0.0',
    description: `Stylises the webcam with a small ONNX network (onnxruntime-node) at ${size}x${size}; set_strength blends it with the input.`,
    fps: 30,
    tracks: [
      { name: 'webcam', kind: 'video', direction: 'sendonly', format: 'i420' },
      { name: 'main_video', kind: 'video', direction: 'recvonly', width: size, height: size },
    ],
    createSessionState: () => ({ strength: DEFAULT_STRENGTH, inputSize: undefined }),
    commands: {
      set_strength: command({
        description: 'How strongly the style applies: 0 shows the webcam unchanged, 1 the full effect.',
        params: {
          type: 'object',
          properties: { strength: { type: 'number', minimum: 0, maximum: 1 } },
          required: ['strength'],
          additionalProperties: false,
        },
        reply: {
          type: 'strength_changed',
          schema: { type: 'object', properties: { strength: { type: 'number' } }, required: ['strength'] },
        },
        handler: ({ strength }, { session }) => {
          session.state.strength = strength;
          return { strength };
        },
      }),
    },
    messages: {
      stylise_info: {
        description:
          'Sent to each client as it connects: the onnxruntime execution provider in use, the network size and the current strength.',
        schema: {
          type: 'object',
          properties: { provider: { type: 'string' }, size: { type: 'integer' }, strength: { type: 'number', minimum: 0, maximum: 1 } },
          required: ['provider', 'size', 'strength'],
          additionalProperties: false,
        },
      },
      input_started: {
        description: 'Broadcast when the webcam input starts or changes size.',
        schema: {
          type: 'object',
          properties: { width: { type: 'integer' }, height: { type: 'integer' } },
          required: ['width', 'height'],
          additionalProperties: false,
        },
      },
    },
    hooks: {
      connected: async (session, connection) => {
        const { provider } = await currentEngine();
        connection.send('stylise_info', { provider, size, strength: session.state.strength });
      },
    },
    /** Loads the network once per process, so the first session does not wait for it. */
    async load() {
      await currentEngine();
    },
    async run(session) {
      const current = await currentEngine();
      session.log.info('stylise: onnxruntime-node execution provider', {
        provider: current.provider,
        size,
        ...(current.failures.length > 0 ? { not_loaded: current.failures.map((f) => `${f.provider}: ${f.message}`) } : {}),
      });
      await stylise(session, current, size);
    },
  });
}

async function stylise(session: ModelSession<StyliseState>, engine: StyliseEngine, size: number): Promise<void> {
  const webcam = session.inputVideo('webcam');
  const idle = new I420Canvas(size, size);
  idle.fill({ y: 60, u: 128, v: 128 });
  const scale = size / 256;
  idle.drawText('PUBLISH', 8 * scale, 100 * scale, 5 * scale);
  idle.drawText('YOUR WEBCAM', 8 * scale, 150 * scale, 3 * scale);
  const picture = new Uint8Array(yuvByteLength(size, size));
  let shown: { input: VideoFrame; strength: number } | undefined;
  let failures = 0;
  for await (const _tick of session.ticks()) {
    const input = webcam.latest();
    if (!input) {
      await session.emit('main_video', idle.frame());
      continue;
    }
    const inputSize = `${input.width}x${input.height}`;
    if (inputSize !== session.state.inputSize) {
      session.state.inputSize = inputSize;
      session.broadcast('input_started', { width: input.width, height: input.height });
    }
    const strength = session.state.strength;
    // A new picture, or a new strength: infer. Otherwise the last output goes out again.
    if (shown?.input !== input || shown.strength !== strength) {
      try {
        const { output } = await engine.stylise(input, size, strength);
        convertToYuv(output, { width: size, height: size, format: 'rgb', layout: 'chw', into: picture });
        shown = { input, strength };
      } catch (error) {
        if (engine.dead) throw error; // the worker is gone: end the session (model_error); the next one restarts it
        if (failures++ % 100 === 0)
          session.log.warn('stylise: inference failed; frame skipped', { error: (error as Error).message, failures });
        continue;
      }
    }
    await session.emit('main_video', { width: size, height: size, format: 'i420', data: picture, timestampUs: performance.now() * 1000 });
  }
}

export default createStyliseModel({ size: processingSizeFromEnv() });
