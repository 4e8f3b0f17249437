/**
 * `echo` — webcam in, processed video out: the model reads the client's `webcam` track,
 * scales its brightness (the `set_brightness` command), and streams the result back on
 * `main_video`. Until a client publishes, it shows a prompt. When input starts it tells every
 * client the input size.
 */

import { commandFor, defineModel, type VideoFrame } from 'arclight/runtime';
import { I420Canvas } from '../shared/i420-canvas.ts';

export const WIDTH = 640;
export const HEIGHT = 480;

interface EchoState {
  brightness: number;
  /** The size of the last input frame, to announce changes. */
  inputSize: string | undefined;
}

const command = commandFor<EchoState>();

// State is inferred from createSessionState, so `ModelTypesOf<typeof echo>` sees the commands and messages.
export default defineModel({
  name: 'echo',
  version: '1.0.0',
  description: 'Streams the webcam back with adjustable brightness.',
  fps: 30,
  tracks: [
    { name: 'webcam', kind: 'video', direction: 'sendonly', format: 'i420' },
    { name: 'main_video', kind: 'video', direction: 'recvonly', width: WIDTH, height: HEIGHT },
  ],
  createSessionState: (): EchoState => ({ brightness: 1, inputSize: undefined }),
  commands: {
    set_brightness: command({
      description: 'Multiplies the picture brightness: 0 is black, 1 unchanged, 2 twice as bright.',
      params: {
        type: 'object',
        properties: { value: { type: 'number', minimum: 0, maximum: 2 } },
        required: ['value'],
        additionalProperties: false,
      },
      reply: {
        type: 'brightness_changed',
        schema: { type: 'object', properties: { brightness: { type: 'number' } }, required: ['brightness'] },
      },
      handler: ({ value }, { session }) => {
        session.state.brightness = value;
        return { brightness: value };
      },
    }),
  },
  messages: {
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
  async run(session) {
    const webcam = session.inputVideo('webcam');
    const idle = new I420Canvas(WIDTH, HEIGHT);
    idle.fill({ y: 60, u: 128, v: 128 });
    idle.drawText('PUBLISH YOUR WEBCAM', 60, 220, 5);
    let output = new Uint8Array(0);
    for await (const _tick of session.ticks()) {
      const input = webcam.latest();
      if (!input) {
        await session.emit('main_video', idle.frame());
        continue;
      }
      const size = `${input.width}x${input.height}`;
      if (size !== session.state.inputSize) {
        session.state.inputSize = size;
        session.broadcast('input_started', { width: input.width, height: input.height });
      }
      if (output.length !== input.data.length) output = new Uint8Array(input.data.length);
      adjustBrightness(input, output, session.state.brightness);
      await session.emit('main_video', { ...input, data: output, timestampUs: performance.now() * 1000 });
    }
  },
});

/** Scales luma around black (16) and chroma around neutral (128, by the square root, so colour survives). */
function adjustBrightness(input: VideoFrame, out: Uint8Array, factor: number): void {
  const lumaLength = input.width * input.height;
  const src = input.data;
  for (let i = 0; i < lumaLength; i++) {
    const y = 16 + (src[i]! - 16) * factor;
    out[i] = y < 0 ? 0 : y > 255 ? 255 : y;
  }
  const chroma = Math.sqrt(Math.min(factor, 1));
  for (let i = lumaLength; i < src.length; i++) {
    const c = 128 + (src[i]! - 128) * chroma;
    out[i] = c < 0 ? 0 : c > 255 ? 255 : c;
  }
}
