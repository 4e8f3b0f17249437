/**
 * `pattern` — a synthetic generator that needs no input: scrolling colour bars, a solid colour
 * patch, the frame counter and wall-clock time drawn in, a machine-readable frame stamp, and a
 * tone on an audio track. Commands change the patch colour, the scroll speed, the caption and
 * the tone. It is what `npm start` serves, and what the end-to-end tests and benchmarks watch.
 */

import { commandFor, CommandError, defineModel, moderated, type ModelSession } from 'arclight/runtime';
import { drawFrameStamp, I420Canvas, parseHexColor, rgbToYuv, type Yuv } from '../shared/i420-canvas.ts';

export const WIDTH = 1280;
export const HEIGHT = 720;
export const FPS = 30;
/** Where the colour patch sits; tests sample its centre. */
export const PATCH = { x: 40, y: 40, size: 200 } as const;
/** Where the frame stamp sits (see readFrameStamp). */
export const STAMP = { x: 40, y: 280 } as const;

interface PatternState {
  color: string;
  patch: Yuv;
  speed: number;
  text: string;
  toneHz: number;
  volume: number;
  frame: number;
}

const command = commandFor<PatternState>();

const BARS: readonly Yuv[] = [
  [192, 192, 192],
  [192, 192, 0],
  [0, 192, 192],
  [0, 192, 0],
  [192, 0, 192],
  [192, 0, 0],
  [0, 0, 192],
  [32, 32, 32],
].map(([r, g, b]) => rgbToYuv(r!, g!, b!));

// State is inferred from createSessionState (not `defineModel<PatternState>`), so that the
// command and message types stay visible to `ModelTypesOf<typeof pattern>`.
export default defineModel({
  name: 'pattern',
  version: '1.0.0',
  description: 'Scrolling test pattern with a colour patch, frame counter, clock, caption and a tone.',
  fps: FPS,
  tracks: [
    { name: 'main_video', kind: 'video', direction: 'recvonly', width: WIDTH, height: HEIGHT },
    { name: 'tone', kind: 'audio', direction: 'recvonly', channels: 1 },
  ],
  createSessionState: (): PatternState => ({
    color: '#e01010',
    patch: rgbToYuv(0xe0, 0x10, 0x10),
    speed: 4,
    text: 'ARCLIGHT',
    toneHz: 440,
    volume: 0.2,
    frame: 0,
  }),
  commands: {
    set_color: command({
      description: 'Colour of the square patch, as #rrggbb.',
      params: {
        type: 'object',
        properties: { color: { type: 'string', pattern: '^#[0-9a-fA-F]{6}$', description: 'e.g. #00ff00' } },
        required: ['color'],
        additionalProperties: false,
      },
      reply: {
        type: 'color_changed',
        schema: { type: 'object', properties: { color: { type: 'string' } }, required: ['color'] },
      },
      handler: ({ color }, { session }) => {
        const { r, g, b } = parseHexColor(color);
        session.state.color = color.toLowerCase();
        session.state.patch = rgbToYuv(r, g, b);
        // Lands in the session's log too: the playground's Session log panel shows it.
        session.log.info('patch colour set', { color: session.state.color });
        return { color: session.state.color };
      },
    }),
    set_speed: command({
      description: 'Scroll speed of the colour bars, in pixels per frame.',
      params: {
        type: 'object',
        properties: { speed: { type: 'number', minimum: 0, maximum: 64 } },
        required: ['speed'],
        additionalProperties: false,
      },
      handler: ({ speed }, { session }) => {
        session.state.speed = speed;
      },
    }),
    set_text: command({
      description: 'Caption drawn under the patch (letters, digits and punctuation; at most 40 characters).',
      params: {
        type: 'object',
        // Viewers' free text: checked by the runtime's moderator, when it has one.
        properties: { text: moderated({ type: 'string', maxLength: 40 }) },
        required: ['text'],
        additionalProperties: false,
      },
      handler: ({ text }, { session }) => {
        if (/[\u0000-\u001f]/.test(text)) throw new CommandError('unprintable_text', 'The caption may not contain control characters.');
        session.state.text = text;
      },
    }),
    set_tone: command({
      description: 'Tone on the audio track: frequency in Hz (0 mutes) and volume 0..1.',
      params: {
        type: 'object',
        properties: {
          frequency: { type: 'number', minimum: 0, maximum: 4000 },
          volume: { type: 'number', minimum: 0, maximum: 1, default: 0.2 },
        },
        required: ['frequency'],
        additionalProperties: false,
      },
      handler: ({ frequency, volume }, { session }) => {
        session.state.toneHz = frequency;
        session.state.volume = volume;
      },
    }),
    get_state: command({
      description: 'The current pattern settings and frame counter.',
      params: { type: 'object', additionalProperties: false },
      reply: {
        type: 'state',
        schema: {
          type: 'object',
          properties: { color: { type: 'string' }, speed: { type: 'number' }, text: { type: 'string' }, frame: { type: 'integer' } },
        },
      },
      handler: (_params, { session }) => {
        const { color, speed, text, frame } = session.state;
        return { color, speed, text, frame };
      },
    }),
  },
  messages: {
    welcome: {
      description: 'Sent to each client as it connects: the model and the frame counter at that moment.',
      schema: {
        type: 'object',
        properties: { model: { const: 'pattern' }, frame: { type: 'integer', minimum: 0 } },
        required: ['model', 'frame'],
        additionalProperties: false,
      },
    },
  },
  hooks: {
    connected: (session, connection) => {
      connection.send('welcome', { model: 'pattern', frame: session.state.frame });
    },
  },
  async run(session) {
    void playTone(session);
    const canvas = new I420Canvas(WIDTH, HEIGHT);
    for await (const frame of session.ticks()) {
      session.state.frame = frame;
      drawPattern(canvas, session.state, frame);
      await session.emit('main_video', canvas.frame());
    }
  },
});

function drawPattern(canvas: I420Canvas, state: PatternState, frame: number): void {
  const barWidth = WIDTH / BARS.length;
  const offset = Math.floor(frame * state.speed) % WIDTH;
  for (let i = 0; i < BARS.length; i++) {
    const x = (i * barWidth + offset) % WIDTH;
    canvas.fillRect(x, 0, barWidth, HEIGHT, BARS[i]!);
    if (x + barWidth > WIDTH) canvas.fillRect(0, 0, x + barWidth - WIDTH, HEIGHT, BARS[i]!);
  }
  const black = { y: 16, u: 128, v: 128 };
  canvas.fillRect(PATCH.x - 8, PATCH.y - 8, PATCH.size + 16, PATCH.size + 16, black);
  canvas.fillRect(PATCH.x, PATCH.y, PATCH.size, PATCH.size, state.patch);
  canvas.fillRect(STAMP.x - 8, STAMP.y - 8, 16 * 16 + 16, 32, black);
  drawFrameStamp(canvas, frame & 0xffff, STAMP.x, STAMP.y);
  canvas.fillRect(0, HEIGHT - 150, WIDTH, 150, black);
  canvas.drawText(`FRAME ${String(frame).padStart(6, '0')}`, 40, HEIGHT - 130, 6);
  canvas.drawText(new Date().toISOString().slice(11, 23), 640, HEIGHT - 130, 6);
  canvas.drawText(state.text, 40, HEIGHT - 60, 5);
}

/** A sine tone, 20 ms at a time; emit() paces the loop on the runtime's audio clock. */
async function playTone(session: ModelSession<PatternState>): Promise<void> {
  const rate = 48_000;
  const chunk = new Int16Array(rate / 50);
  let phase = 0;
  while (!session.signal.aborted) {
    const { toneHz, volume } = session.state;
    const step = (2 * Math.PI * toneHz) / rate;
    for (let i = 0; i < chunk.length; i++) {
      chunk[i] = Math.round(Math.sin(phase) * volume * 32767);
      phase += step;
    }
    phase %= 2 * Math.PI;
    await session.emit('tone', { sampleRate: rate, channels: 1, samples: chunk.slice() });
  }
}
