/**
 * The types of a model's `settings` declaration (settings.ts has what they do). Their own file:
 * the model definition's types use them, and settings.ts's generated commands use the
 * definition's, so kept in settings.ts they made an import cycle.
 */

/**
 * One settable field: a JSON Schema of its value (`type`, `minimum`, `maxLength`, `enum`, …) with
 * a `default` (the value each session starts from), an optional `description`, and `moderated:
 * true` for free text that goes through moderation (as `moderated()` marks a command parameter).
 */
export interface SettingSpec {
  readonly default: unknown;
  readonly description?: string;
  readonly moderated?: boolean;
  readonly [keyword: string]: unknown;
}

export type SettingsMap = Readonly<Record<string, SettingSpec>>;

/** The value type a setting declares: from its `enum`, else its `type`, else its default's type. */
export type SettingValueOf<S> = S extends { readonly enum: readonly (infer E)[] }
  ? E
  : S extends { readonly type: 'string' }
    ? string
    : S extends { readonly type: 'number' | 'integer' }
      ? number
      : S extends { readonly type: 'boolean' }
        ? boolean
        : S extends { readonly default: infer D }
          ? D
          : unknown;

/** `session.settings` as a model's `settings` declaration types it. */
export type SettingsOf<S> = { readonly [K in keyof S]: SettingValueOf<S[K]> };

/** The generated commands' names. */
export type SettingCommandName<S> = `set_${Extract<keyof S, string>}`;
