/**
 * What a model offers a client, computed from its definition alone: the `Capabilities` sent at
 * connect (tracks, commands, declared messages, schema hash). Kept apart from the server so
 * `arclight types --from <module>` can build exactly what a runtime would serve without starting one.
 */

import type { Capabilities, CommandCapability, MessageCapability } from '../../protocol/capabilities.ts';
import type { JsonSchema } from '../../protocol/json-schema.ts';
import { schemaHashOf, type ModelInterface } from '../../protocol/schema-hash.ts';
import { CAPABILITIES_PROTOCOL_VERSION } from '../../protocol/versions.ts';
import type { ModelDefinition } from './definition.ts';

/** `commands`: the command router's view of them (schemas defaulted, reply types resolved). */
export function modelCapabilities(model: ModelDefinition<unknown>, commands: readonly CommandCapability[]): Capabilities {
  const messages = messageCapabilitiesOf(model);
  return {
    protocol_version: CAPABILITIES_PROTOCOL_VERSION,
    tracks: model.tracks.map((t) => ({
      name: t.name,
      kind: t.kind,
      direction: t.direction,
      ...(t.kind === 'video' && t.direction === 'recvonly' ? { width: t.width, height: t.height } : {}),
      ...(t.kind === 'audio' ? { sample_rate: 48_000, channels: t.channels ?? 1 } : {}),
    })),
    commands,
    emission_fps: model.fps,
    // Arclight extensions: 2.9.0's parser keeps the fields it knows and ignores these.
    ...(messages.length > 0 ? { messages } : {}),
    schema_hash: schemaHashOf(modelInterfaceOf(model.name, commands, messages)),
  };
}

/** The model's declared messages, in declaration order. */
export function messageCapabilitiesOf(model: ModelDefinition<unknown>): MessageCapability[] {
  return Object.entries(model.messages ?? {}).map(([type, spec]) => ({
    type,
    ...(spec.description === undefined ? {} : { description: spec.description }),
    ...(spec.schema === undefined ? {} : { schema: spec.schema as JsonSchema }),
  }));
}

/** The interface the schema hash covers, from the capabilities' commands and messages. */
export function modelInterfaceOf(
  name: string,
  commands: readonly CommandCapability[],
  messages: readonly MessageCapability[],
): ModelInterface {
  return {
    name,
    commands: commands.map((c) => ({
      name: c.name,
      params: c.schema ?? { type: 'object' },
      ...(c.reply === undefined ? {} : { reply: c.reply }),
    })),
    messages: Object.fromEntries(messages.map((m) => [m.type, m.schema === undefined ? {} : { schema: m.schema }])),
  };
}
