/**
 * arclight-template-model — your model. It draws a moving square on a scrolling gradient; the
 * `set_color` and `set_speed` commands change it while it streams.
 *
 * Replace `run` with your model's loop: read inputs (`session.inputVideo('webcam').latest()`),
 * run inference, `await session.emit('main_video', frame)`. Everything a model can do is in the
 * guide: https://github.com/arclight-dev/arclight/blob/main/docs/first-model.md
 */

import { commandFor, CommandError, defineModel } from 'arclight/runtime';

export const WIDTH = 640;
export const HEIGHT = 360;
const SQUARE = 80;

interface State {
  /** The square's colour in Y, U, V. */
  color: { y: number; u: number; v: number };
  /** Pixels per frame. */
  speed: number;
  /** How far the square has travelled. */
  position: number;
}

// `commandFor<State>()` gives handlers a typed `session.state`; params are typed from the schema.
const command = commandFor<State>();

// No type argument on defineModel: it then keeps each command's and message's exact types, which
// `ModelTypesOf<typeof model>` and `arclight types` turn into a typed client.
export default defineModel({
  name: 'arclight-template-model',
  version: '0.1.0',
  description: 'A moving square on a scrolling gradient: the starting point of a new model.',
  fps: 30,
  // Interactive models show each frame as soon as it is decoded.
  latencyMode: 'realtime',
  tracks: [{ name: 'main_video', kind: 'video', direction: 'recvonly', width: WIDTH, height: HEIGHT }],
  createSessionState: (): State => ({ color: rgbToYuv(230, 60, 40), speed: 4, position: 0 }),
  commands: {
    set_color: command({
      description: 'Colour of the square, as #rrggbb.',
      params: {
        type: 'object',
        properties: { color: { type: 'string', pattern: '^#[0-9a-fA-F]{6}$', description: 'e.g. #00ff00' } },
        required: ['color'],
        additionalProperties: false,
      },
      reply: { type: 'color_changed', schema: { type: 'object', properties: { color: { type: 'string' } }, required: ['color'] } },
      handler: ({ color }, { session }) => {
        const value = Number.parseInt(color.slice(1), 16);
        session.state.color = rgbToYuv(value >> 16, (value >> 8) & 0xff, value & 0xff);
        session.log.info('square colour set', { color });
        return { color: color.toLowerCase() };
      },
    }),
    set_speed: command({
      description: 'How fast the square moves, in pixels per frame.',
      params: {
        type: 'object',
        properties: { speed: { type: 'integer', minimum: 0, maximum: 40 } },
        required: ['speed'],
        additionalProperties: false,
      },
      handler: ({ speed }, { session }) => {
        // The schema checks the range; rules it cannot express fail with a CommandError, which the
        // client receives as a failed command with this code and message.
        if (speed === 13) throw new CommandError('unlucky_speed', 'Any speed but 13.');
        session.state.speed = speed;
      },
    }),
  },
  messages: {
    welcome: {
      description: 'Sent to each client as it connects.',
      schema: { type: 'object', properties: { model: { type: 'string' }, speed: { type: 'integer' } }, required: ['model', 'speed'] },
    },
  },
  hooks: {
    // Each client gets a greeting when it connects.
    connected: (session, connection) => connection.send('welcome', { model: 'arclight-template-model', speed: session.state.speed }),
  },
  async run(session) {
    const frame = new Uint8Array(WIDTH * HEIGHT * 1.5);
    for await (const tick of session.ticks()) {
      session.state.position += session.state.speed;
      draw(frame, tick, session.state);
      // The runtime copies the frame before emit resolves, so the buffer can be reused.
      await session.emit('main_video', { width: WIDTH, height: HEIGHT, format: 'i420', data: frame });
    }
  },
});

/** Fills an I420 frame: a luma gradient scrolling with the tick, and the square. */
function draw(frame: Uint8Array, tick: number, state: State): void {
  const chroma = WIDTH * HEIGHT;
  const half = (WIDTH / 2) * (HEIGHT / 2);
  for (let y = 0; y < HEIGHT; y++) {
    const row = y * WIDTH;
    for (let x = 0; x < WIDTH; x++) frame[row + x] = 40 + ((x + tick * 2) % WIDTH) * (120 / WIDTH);
  }
  frame.fill(128, chroma, chroma + 2 * half);
  const left = (state.position % (WIDTH - SQUARE)) & ~1; // even: chroma is half resolution
  const top = (HEIGHT - SQUARE) / 2;
  for (let y = top; y < top + SQUARE; y++) frame.fill(state.color.y, y * WIDTH + left, y * WIDTH + left + SQUARE);
  for (let y = top / 2; y < (top + SQUARE) / 2; y++) {
    frame.fill(state.color.u, chroma + y * (WIDTH / 2) + left / 2, chroma + y * (WIDTH / 2) + (left + SQUARE) / 2);
    frame.fill(state.color.v, chroma + half + y * (WIDTH / 2) + left / 2, chroma + half + y * (WIDTH / 2) + (left + SQUARE) / 2);
  }
}

/** BT.601 limited range, as video encoders expect. */
export function rgbToYuv(r: number, g: number, b: number): State['color'] {
  return {
    y: Math.round(16 + 0.257 * r + 0.504 * g + 0.098 * b),
    u: Math.round(128 - 0.148 * r - 0.291 * g + 0.439 * b),
    v: Math.round(128 + 0.439 * r - 0.368 * g - 0.071 * b),
  };
}
