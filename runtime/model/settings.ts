/**
 * Client-settable state, declared once: a model's `settings` (name → JSON Schema of the value,
 * with a `default`) become one validated `set_<name>` command each, and `session.settings`, a
 * frozen snapshot that such a command replaces whole (between steps for step models: a step sees
 * one consistent snapshot, also handed to it as `step.settings`).
 */

import { MODERATED_KEYWORD } from '../../protocol/moderation.ts';
import type { CommandMap, CommandSpec } from './definition.ts';

export type { SettingSpec, SettingsMap, SettingValueOf, SettingsOf, SettingCommandName } from './setting-types.ts';
import type { SettingSpec, SettingsMap } from './setting-types.ts';

/** Marks a command as generated from a setting (so normalising twice is not a name clash). */
const GENERATED = Symbol.for('arclight.setting_command');

/** The session's current settings, shared by all of a session's facades. */
export class SessionSettings {
  #current: Readonly<Record<string, unknown>>;

  constructor(settings: SettingsMap | undefined) {
    const initial: Record<string, unknown> = {};
    for (const [name, spec] of Object.entries(settings ?? {})) initial[name] = structuredClone(spec.default);
    this.#current = Object.freeze(initial);
  }

  /** A frozen snapshot; never changes (a `set_<name>` replaces it). */
  get current(): Readonly<Record<string, unknown>> {
    return this.#current;
  }

  set(name: string, value: unknown): void {
    this.#current = Object.freeze({ ...this.#current, [name]: value });
  }
}

const bound = new WeakMap<object, SessionSettings>();

/** @internal Ties a session facade to its settings, for the generated commands' handlers. */
export function bindSessionSettings<T extends object>(facade: T, settings: SessionSettings): T {
  bound.set(facade, settings);
  return facade;
}

/**
 * The JSON Schema of one setting's value, as its command's `value` parameter. Without the
 * `default`: the validator would fill it in, making `value` optional (a bare `set_x` a reset).
 */
export function settingValueSchema(spec: SettingSpec): Record<string, unknown> {
  const { moderated, default: _default, ...schema } = spec;
  return { ...schema, ...(moderated === true ? { [MODERATED_KEYWORD]: true } : {}) };
}

/** The `set_<name>` command generated for one setting. */
export function settingCommand(name: string, spec: SettingSpec): CommandSpec<unknown, { value: unknown }> {
  const command: CommandSpec<unknown, { value: unknown }> = {
    description: spec.description ?? `Sets ${name}; applies from the next step.`,
    params: {
      type: 'object',
      properties: { value: settingValueSchema(spec) },
      required: ['value'],
      additionalProperties: false,
    },
    handler: ({ value }, { session }) => {
      const settings = bound.get(session);
      if (!settings) throw new Error(`set_${name}: this session has no settings`);
      settings.set(name, value);
    },
  };
  Object.defineProperty(command, GENERATED, { value: name });
  return command;
}

/** Whether `spec` is the command generated for setting `name`. */
export function isSettingCommand(spec: unknown, name: string): boolean {
  return typeof spec === 'object' && spec !== null && (spec as Record<symbol, unknown>)[GENERATED] === name;
}

/**
 * The model's commands with one `set_<name>` per setting added. A hand-written command of the
 * same name is kept (the validator reports the clash).
 */
export function withSettingCommands<C extends CommandMap<never> | undefined>(commands: C, settings: SettingsMap | undefined): C {
  if (!settings || typeof settings !== 'object') return commands;
  const merged: Record<string, unknown> = {};
  for (const [name, spec] of Object.entries(settings)) {
    if (typeof spec === 'object' && spec !== null) merged[`set_${name}`] = settingCommand(name, spec);
  }
  return { ...merged, ...(commands ?? {}) } as C;
}
