/**
 * `defineModel`: a model definition with its types, and its settings' generated commands added.
 * Apart from definition.ts (the types) because it calls settings.ts, whose generated commands are
 * typed by definition.ts: kept there, the two imported each other.
 */

import type { CommandMap, MessageMap, ModelDefinition, SettingCommandsOf } from './definition.ts';
import type { SettingsMap } from './setting-types.ts';
import { withSettingCommands } from './settings.ts';

/**
 * Identity at run time; gives the definition its types. Let `State` be inferred (type
 * `createSessionState`'s return, e.g. `(): MyState => ({...})`) rather than writing
 * `defineModel<MyState>(...)`: an explicit type argument turns off the inference of the command
 * and message types that `ModelTypesOf<typeof model>` reads.
 */
export function defineModel<
  State = Record<string, unknown>,
  const Commands extends CommandMap<State> = CommandMap<State>,
  const Messages extends MessageMap = MessageMap,
  Input = undefined,
  const Settings extends SettingsMap = SettingsMap,
>(
  definition: ModelDefinition<State, Commands, Messages, Input, Settings>,
): ModelDefinition<State, Commands & SettingCommandsOf<State, Settings>, Messages, Input, Settings> {
  if (definition.settings === undefined) return definition as never;
  return { ...definition, commands: withSettingCommands(definition.commands, definition.settings) } as never;
}
