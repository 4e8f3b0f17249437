/**
 * Declared settings (client-settable state): the `set_<name>` commands generated from them, their
 * validation, `session.settings`, and the snapshot a step reads — under the harness's manual clock.
 */

import { afterEach, describe, expect, expectTypeOf, it } from 'vitest';
import { createTestSession, type TestSession } from '../testing/index.ts';
import { defineModel } from './define-model.ts';
import { ModelDefinitionError, validateModelDefinition } from './validate-definition.ts';
import { CommandRouter } from './command-router.ts';
import { createLogger } from '../../server-kit/log.ts';
import type { VideoFrame } from '../media/frames.ts';

const W = 32;
const H = 18;
const frame = (metadata: Record<string, unknown>): VideoFrame => ({
  width: W,
  height: H,
  format: 'i420',
  data: new Uint8Array((W * H * 3) / 2),
  metadata: metadata as never,
});

function settingsModel() {
  return defineModel({
    name: 'settable',
    fps: 10,
    tracks: [{ name: 'main_video', kind: 'video', direction: 'recvonly', width: W, height: H }],
    settings: {
      prompt: { type: 'string', default: 'a forest', minLength: 1, maxLength: 20, description: 'What to draw', moderated: true },
      speed: { type: 'number', default: 1, minimum: 0.1, maximum: 4 },
    },
    createSessionState: () => ({ seen: [] as string[] }),
    async generate(_input, session, step) {
      const { prompt, speed } = step.settings;
      expectTypeOf(prompt).toEqualTypeOf<string>();
      expectTypeOf(speed).toEqualTypeOf<number>();
      await session.sleep(100);
      // The snapshot is the one the step began with, whatever ran meanwhile.
      expect(session.settings).toBe(step.settings);
      session.state.seen.push(`${step.index} ${prompt} ${speed}`);
      return frame({ prompt, speed });
    },
  });
}

describe('settings: generated commands', () => {
  it('adds a validated set_<name> command per setting, listed like hand-written ones', () => {
    const model = settingsModel();
    expect(Object.keys(model.commands!)).toEqual(['set_prompt', 'set_speed']);
    expect(model.commands!.set_speed.params).toEqual({
      type: 'object',
      properties: { value: { type: 'number', minimum: 0.1, maximum: 4 } },
      required: ['value'],
      additionalProperties: false,
    });
    expect(model.commands!.set_prompt.params).toMatchObject({
      properties: { value: { type: 'string', maxLength: 20, 'x-arclight-moderated': true } },
    });
    expect(model.commands!.set_prompt.description).toBe('What to draw');
    // Validating again (defineModel already merged) is not a clash.
    const validated = validateModelDefinition(model, 'settable');
    const router = new CommandRouter(validated.commands ?? {}, createLogger({}, 'silent'));
    expect(router.capabilities().map((c) => c.name)).toEqual(['set_prompt', 'set_speed']);
  });

  it('generates the commands for a plain object too (the validator normalises)', () => {
    const plain = { name: 'plain', fps: 10, tracks: [], settings: { level: { type: 'integer', default: 3 } }, run: async () => {} };
    expect(Object.keys(validateModelDefinition(plain, 'plain').commands!)).toEqual(['set_level']);
  });

  it('rejects a hand-written command of the same name, a missing default and a bad spec', () => {
    const clash = defineModel({
      name: 'clash',
      fps: 10,
      tracks: [],
      settings: {
        speed: { type: 'number', default: 1 },
        bare: { type: 'string' } as never,
        text: { type: 'number', default: 1, moderated: true },
      },
      commands: { set_speed: { handler: () => undefined } },
      run: async () => {},
    });
    let error: unknown;
    try {
      validateModelDefinition(clash, 'clash');
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ModelDefinitionError);
    expect((error as ModelDefinitionError).problems).toEqual([
      "commands.set_speed clashes with the command generated for settings.speed: remove one (a setting's command is set_<name>)",
      'settings.bare.default is required (each session starts from it)',
      'settings.text.moderated: only string settings are moderated',
    ]);
  });
});

describe('settings: in a session', () => {
  let t: TestSession<{ seen: string[] }> | undefined;
  afterEach(async () => {
    await t?.end();
    t = undefined;
  });

  it('starts from the defaults; a set_<name> during a step is seen whole at the next step', async () => {
    t = await createTestSession(settingsModel());
    expect(t.session.settings).toEqual({ prompt: 'a forest', speed: 1 });
    expect(Object.isFrozen(t.session.settings)).toBe(true);
    await t.advance(50); // step 0 is in generate
    // Both arrive during step 0: they run after it, before step 1 (commands queue behind a step).
    await Promise.all([t.sendCommand('set_prompt', { value: 'a desert' }), t.sendCommand('set_speed', { value: 2.5 })]);
    await t.advance(300);
    expect(t.session.state.seen.slice(0, 2)).toEqual(['0 a forest 1', '1 a desert 2.5']);
    expect(t.session.settings).toEqual({ prompt: 'a desert', speed: 2.5 });
  });

  it('rejects an out-of-bounds value and keeps the old one', async () => {
    t = await createTestSession(settingsModel());
    await expect(t.sendCommand('set_speed', { value: 9 })).rejects.toMatchObject({ code: 'invalid_params', field: '/value' });
    await expect(t.sendCommand('set_prompt', { value: 'x'.repeat(21) })).rejects.toMatchObject({ code: 'invalid_params' });
    await expect(t.sendCommand('set_speed', {})).rejects.toMatchObject({ code: 'invalid_params' });
    expect(t.session.settings).toEqual({ prompt: 'a forest', speed: 1 });
  });
});
