/**
 * `session.settings` is typed from the model's `settings` declaration, as `step.settings` is: in
 * `generate`, `beforeStep`, `onStepError`, `run`, the hooks, and handlers bound with
 * `commandFor<State, SettingsOf<typeof settings>>()`.
 *
 * The assertions are types (expectTypeOf, @ts-expect-error), which vitest does not check when it
 * runs a file: the test below compiles this file with the project's tsconfig and fails on any
 * diagnostic, so a regression of the typing fails `vitest run` as well as `npm run typecheck`.
 */

import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { commandFor } from './definition.ts';
import { defineModel } from './define-model.ts';
import type { SettingsOf } from './settings.ts';

const settings = {
  prompt: { type: 'string', default: 'a forest', maxLength: 20 },
  strength: { type: 'number', default: 0.5, minimum: 0, maximum: 1 },
  paused: { type: 'boolean', default: false },
  mode: { type: 'string', enum: ['fast', 'fine'], default: 'fast' },
} as const;

interface Declared {
  readonly prompt: string;
  readonly strength: number;
  readonly paused: boolean;
  readonly mode: 'fast' | 'fine';
}

const command = commandFor<{ count: number }, SettingsOf<typeof settings>>();

/** A step model: every place author code sees the session. Never run; compiled by the test below. */
export const stepModel = defineModel({
  name: 'typed-settings',
  fps: 10,
  tracks: [],
  settings,
  createSessionState: () => ({ count: 0 }),
  commands: {
    reset: command({
      params: { type: 'object', additionalProperties: false },
      handler: (_params, { session }) => {
        expectTypeOf(session.settings).toEqualTypeOf<Declared>();
      },
    }),
  },
  hooks: {
    session_started(session) {
      expectTypeOf(session.settings).toEqualTypeOf<Declared>();
    },
    connected: (session) => {
      expectTypeOf(session.settings.mode).toEqualTypeOf<'fast' | 'fine'>();
    },
  },
  beforeStep(session, step) {
    expectTypeOf(session.settings).toEqualTypeOf<Declared>();
    expectTypeOf(session.settings).toEqualTypeOf(step.settings);
    // @ts-expect-error: not a declared setting
    void session.settings.steps;
    // @ts-expect-error: settings are read-only (a set_<name> command replaces them)
    session.settings.prompt = 'x';
    return session.settings.prompt;
  },
  generate(input, session) {
    expectTypeOf(input).toEqualTypeOf<string>();
    expectTypeOf(session.settings.strength).toEqualTypeOf<number>();
    expectTypeOf(session.settings.paused).toEqualTypeOf<boolean>();
    return undefined;
  },
  onStepError(_error, session) {
    expectTypeOf(session.settings).toEqualTypeOf<Declared>();
    return 'continue';
  },
});

/** A `run` model sees them typed too. */
export const runModel = defineModel({
  name: 'typed-settings-run',
  fps: 10,
  tracks: [],
  settings,
  async run(session) {
    expectTypeOf(session.settings).toEqualTypeOf<Declared>();
  },
});

/** Without a declaration: the plain record, as before. */
export const plainModel = defineModel({
  name: 'plain',
  fps: 10,
  tracks: [],
  async run(session) {
    expectTypeOf(session.settings).toEqualTypeOf<Readonly<Record<string, unknown>>>();
  },
});

describe('session.settings typing', () => {
  it('this file type-checks: the assertions above hold', () => {
    const file = fileURLToPath(import.meta.url);
    const root = join(dirname(file), '../..');
    const config = ts.parseJsonConfigFileContent(JSON.parse(readFileSync(join(root, 'tsconfig.json'), 'utf8')), ts.sys, root);
    const program = ts.createProgram([file], { ...config.options, noEmit: true });
    const diagnostics = ts.getPreEmitDiagnostics(program).filter((d) => d.file?.fileName === file || d.file === undefined);
    const text = diagnostics.map(
      (d) =>
        `${d.file ? `${d.file.fileName}:${d.file.getLineAndCharacterOfPosition(d.start ?? 0).line + 1}: ` : ''}${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`,
    );
    expect(text).toEqual([]);
  }, 60_000);
});
