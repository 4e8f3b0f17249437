/**
 * The model interface `arclight types` prints, read from the OpenAPI document a runtime serves
 * at `/schema` — or built in-process from a model module exactly as a runtime would build that
 * document, so both sources give the same types and the same schema hash.
 */

import type { JsonSchema } from '../../protocol/json-schema.ts';
import { schemaHashOf } from '../../protocol/schema-hash.ts';
import { createLogger } from '../../server-kit/log.ts';
import { CommandRouter } from '../../runtime/model/command-router.ts';
import { loadModelModule } from '../../runtime/model/load-model-module.ts';
import { modelCapabilities } from '../../runtime/model/model-capabilities.ts';
import { buildOpenApi } from '../../runtime/openapi.ts';

export interface ModelSchemaCommand {
  readonly name: string;
  readonly description: string;
  readonly params: JsonSchema;
  /** Absent when the command declares no reply. */
  readonly reply?: { readonly type: string; readonly schema?: JsonSchema };
}

export interface ModelSchemaMessage {
  readonly type: string;
  readonly description?: string;
  readonly schema?: JsonSchema;
}

/** A model's client-facing interface, as `arclight types` needs it. */
export interface ModelSchema {
  readonly name: string;
  readonly version: string | null;
  readonly commands: readonly ModelSchemaCommand[];
  readonly messages: readonly ModelSchemaMessage[];
  /** The runtime's `x-arclight.schema_hash` (computed here for runtimes that predate it). */
  readonly schemaHash: string;
}

/** The document is not an Arclight runtime's `/schema`. */
export class NotAnArclightSchemaError extends Error {
  override readonly name = 'NotAnArclightSchemaError';
}

/** Reads the model's interface out of a runtime's `/schema` document. */
export function modelSchemaFromOpenApi(document: unknown): ModelSchema {
  const doc = asObject(document, 'the document is not a JSON object');
  const extension = asObject(doc['x-arclight'], 'it has no "x-arclight" section (is this an Arclight runtime\'s /schema?)');
  const model = asObject(extension['model'], '"x-arclight.model" is missing');
  if (typeof model['name'] !== 'string') throw new NotAnArclightSchemaError('"x-arclight.model.name" is missing');
  const components = optionalObject(doc['components']);
  const requestBodies = optionalObject(components['requestBodies']);
  const responses = optionalObject(components['responses']);
  const commands: ModelSchemaCommand[] = Object.entries(optionalObject(extension['commands'])).map(([name, raw]) => {
    const command = optionalObject(raw);
    const params = jsonContentSchema(requestBodies[name]) ?? { type: 'object' };
    const replyType = command['reply_type'];
    const replySchema = jsonContentSchema(responses[name]);
    return {
      name,
      description: typeof command['description'] === 'string' ? command['description'] : '',
      params,
      ...(typeof replyType === 'string'
        ? { reply: replySchema === undefined ? { type: replyType } : { type: replyType, schema: replySchema } }
        : {}),
    };
  });
  const messages: ModelSchemaMessage[] = Object.entries(optionalObject(extension['messages'])).map(([type, raw]) => {
    const message = optionalObject(raw);
    return {
      type,
      ...(typeof message['description'] === 'string' ? { description: message['description'] } : {}),
      ...(isSchema(message['schema']) ? { schema: message['schema'] } : {}),
    };
  });
  const name = model['name'];
  const hash = extension['schema_hash'];
  return {
    name,
    version: typeof model['version'] === 'string' ? model['version'] : null,
    commands,
    messages,
    schemaHash:
      typeof hash === 'string'
        ? hash
        : schemaHashOf({
            name,
            commands: commands.map((c) => ({ name: c.name, params: c.params, ...(c.reply ? { reply: c.reply } : {}) })),
            messages: Object.fromEntries(messages.map((m) => [m.type, m.schema === undefined ? {} : { schema: m.schema }])),
          }),
  };
}

/**
 * Loads a model module (a file or a folder with index.ts) and builds the `/schema` document a
 * runtime hosting it would serve, then reads it like a fetched one.
 */
export async function modelSchemaFromModule(path: string): Promise<ModelSchema> {
  const model = await loadModelModule(path);
  // The router resolves what the runtime advertises (default params schema, reply type).
  const router = new CommandRouter(model.commands ?? {}, createLogger({}, 'silent'));
  const document = buildOpenApi(model, modelCapabilities(model, router.capabilities()));
  // Through JSON, as over HTTP: undefined members disappear the same way.
  return modelSchemaFromOpenApi(JSON.parse(JSON.stringify(document)));
}

function jsonContentSchema(entry: unknown): JsonSchema | undefined {
  const schema = optionalObject(optionalObject(optionalObject(entry)['content'])['application/json'])['schema'];
  return isSchema(schema) ? schema : undefined;
}

function isSchema(value: unknown): value is JsonSchema {
  return typeof value === 'boolean' || (typeof value === 'object' && value !== null && !Array.isArray(value));
}

function asObject(value: unknown, problem: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new NotAnArclightSchemaError(`Not an Arclight schema: ${problem}.`);
  return value as Record<string, unknown>;
}

function optionalObject(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}
