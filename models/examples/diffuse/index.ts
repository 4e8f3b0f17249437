/**
 * `diffuse` — a stand-in for a generative video model (diffusion, world model), written with the
 * step API: the runtime calls `generate` step after step, each step "denoises" a chunk of 4–8
 * frames from the current prompt in a variable time (~60 ms a frame, ±20 %), and the output track
 * is paced adaptively (`fps: 'adaptive'`): frames play evenly at the rate the model makes them,
 * whatever the chunk sizes and step times.
 *
 * What a client may set is declared once, as `settings`: `prompt` (moderated free text),
 * `paused` (the session stays, the model stays loaded; `beforeStep` skips steps meanwhile) and
 * `ms_per_frame` (the compute time per frame, to watch the playout rate follow). Each becomes a
 * validated `set_<field>` command (`set_prompt`, `set_paused`, `set_ms_per_frame`), and a step
 * reads them as one snapshot, `step.settings`, so a command never changes them half-way through a
 * chunk. The one hand-written command is what a field cannot carry: `reset`, an action (start the
 * scene over), not a value.
 *
 * The compute is simulated with `session.sleep` — a real model runs its network there (on a
 * worker, or a GPU, so the event loop stays free; see the stylise example). Everything else is
 * what a real one needs: settings read once per step; pause without unloading; one bad step logged
 * and skipped.
 */

import { commandFor, defineModel, SKIP_STEP, type SettingsOf, type VideoFrame } from 'arclight/runtime';
import { I420Canvas, rgbToYuv, type Yuv } from '../shared/i420-canvas.ts';

export const WIDTH = 640;
export const HEIGHT = 360;
/** The ceiling of the adaptive rate (and the encoder's rate control). */
export const FPS = 30;
export const MIN_CHUNK = 4;
export const MAX_CHUNK = 8;

interface DiffuseState {
  /** Frames made so far (positions the moving shape: continuous across chunks; `reset` zeroes it). */
  frame: number;
  /** Steps that failed and were skipped. */
  failedSteps: number;
  /** Random state (mulberry32): chunk sizes and step-time jitter, reproducible in tests. */
  seed: number;
}

/** The first prompt, and what `reset` returns to. */
export const DEFAULT_PROMPT = 'a lighthouse at dusk';

/** Client-settable state: each field is a `set_<field>` command with params `{ value }`. */
const settings = {
  prompt: {
    type: 'string',
    default: DEFAULT_PROMPT,
    minLength: 1,
    maxLength: 80,
    // No control characters: the prompt is drawn on the picture and shown in logs.
    pattern: '^[^\\u0000-\\u001f]*$',
    moderated: true,
    description: 'What to generate; applies from the next step.',
  },
  paused: {
    type: 'boolean',
    default: false,
    description: 'Stops generating while true (the session and the model stay; the picture holds its last frame).',
  },
  ms_per_frame: {
    type: 'number',
    default: 60,
    minimum: 20,
    maximum: 1000,
    description: 'Simulated compute per frame, in ms (the playout rate follows: 60 ms ≈ 16 fps).',
  },
} as const;

export type DiffuseSettings = SettingsOf<typeof settings>;

const command = commandFor<DiffuseState, DiffuseSettings>();

/** A number in [0, 1) from the state's seed (mulberry32), advancing it. */
function random(state: DiffuseState): number {
  let t = (state.seed = (state.seed + 0x6d2b79f5) | 0);
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}

/** The prompt's colour: a stable hue per prompt. */
function paletteOf(prompt: string): { background: Yuv; shape: Yuv } {
  let hash = 2166136261;
  for (const char of prompt) hash = Math.imul(hash ^ char.codePointAt(0)!, 16777619) >>> 0;
  const hue = (hash % 360) / 60;
  const channel = (offset: number): number => Math.round(255 * Math.max(0, Math.min(1, Math.abs(((hue + offset) % 6) - 3) - 1)));
  const [r, g, b] = [channel(0), channel(4), channel(2)];
  return { background: rgbToYuv(r * 0.35, g * 0.35, b * 0.35), shape: rgbToYuv(r, g, b) };
}

function draw(canvas: I420Canvas, prompt: string, frame: number, step: number, index: number, count: number): VideoFrame {
  const { background, shape } = paletteOf(prompt);
  canvas.fill(background);
  // A shape that moves 6 px a frame: uneven pacing shows as uneven motion.
  const x = ((frame * 6) % (WIDTH + 120)) - 120;
  canvas.fillRect(x, 120, 120, 120, shape);
  canvas.drawText(prompt.toUpperCase().slice(0, 24), 20, 20, 3);
  canvas.drawText(`STEP ${step} FRAME ${index + 1}/${count}`, 20, HEIGHT - 40, 3, 180);
  return { width: WIDTH, height: HEIGHT, format: 'i420', data: canvas.data.slice(), metadata: { step, frame, prompt } };
}

export default defineModel({
  name: 'diffuse',
  version: '1.0.0',
  description:
    'A simulated generative model on the step API: chunks of 4–8 frames per step, settings (prompt, paused, speed), adaptive playout.',
  fps: FPS,
  tracks: [{ name: 'main_video', kind: 'video', direction: 'recvonly', width: WIDTH, height: HEIGHT, fps: 'adaptive' }],
  createSessionState: (): DiffuseState => ({ frame: 0, failedSteps: 0, seed: 24 }),
  settings,
  commands: {
    // An action, not a value, so not a setting: start the scene over (the shape from the left, a
    // black frame between), keeping the settings.
    reset: command({
      description: 'Starts the scene over from its first frame (the settings stay).',
      params: { type: 'object', additionalProperties: false },
      reply: { type: 'scene_reset', schema: { type: 'object', properties: { prompt: { type: 'string' } }, required: ['prompt'] } },
      handler: async (_params, { session }) => {
        session.state.frame = 0;
        await session.flush('main_video');
        return { prompt: session.settings.prompt };
      },
    }),
  },
  beforeStep(session, step) {
    // Pause without unloading: skip the step; the runtime tries again after the next command.
    if (step.settings.paused) return SKIP_STEP;
    return undefined;
  },
  async generate(_input, session, step) {
    // step.settings: the snapshot this step began with (a set_prompt meanwhile applies next step).
    const { prompt, ms_per_frame: msPerFrame } = step.settings;
    const state = session.state;
    const count = MIN_CHUNK + Math.floor(random(state) * (MAX_CHUNK - MIN_CHUNK + 1));
    const computeMs = count * msPerFrame * (0.8 + 0.4 * random(state));
    await session.sleep(computeMs); // a real model runs its network here
    const canvas = new I420Canvas(WIDTH, HEIGHT);
    return { video: Array.from({ length: count }, (_, i) => draw(canvas, prompt, state.frame++, step.index, i, count)) };
  },
  onStepError(error, session, step) {
    // One bad step (an out-of-memory, a NaN) costs a chunk, not the session; five in a row end it.
    session.state.failedSteps++;
    session.log.warn('step failed; skipped', { step: step.index, error: String(error) });
    return step.failures >= 5 ? 'end' : 'continue';
  },
});
