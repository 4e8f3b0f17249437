/**
 * The schema hash: one fingerprint of what a client relies on in a model — its name, each
 * command's parameters and reply, and the messages it declares. The runtime publishes it in
 * `Capabilities.schema_hash` and in `/schema` (`x-arclight.schema_hash`); `arclight types` writes
 * it into generated client types, so a client built against one model version can notice, at
 * connect, that it now talks to another (`schema_drift`).
 *
 * Descriptions, tracks and fps are left out on purpose: rewording a description is not drift, and
 * tracks are negotiated at connect anyway.
 */

import type { JsonSchema } from './json-schema.ts';
import { sha256Hex } from './sha256.ts';

/** A command as the hash sees it. `params` is the schema the runtime validates against. */
export interface HashedCommand {
  readonly name: string;
  readonly params: JsonSchema;
  /** The reply's message type and schema; absent when the command declares no reply. */
  readonly reply?: { readonly type: string; readonly schema?: JsonSchema };
}

/** The part of a model a client is compiled against. */
export interface ModelInterface {
  readonly name: string;
  readonly commands: readonly HashedCommand[];
  /** Declared message types (model → client) and the schema of their `data`, when given. */
  readonly messages: Readonly<Record<string, { readonly schema?: JsonSchema }>>;
}

/**
 * sha256 (hex) of the interface as canonical JSON: object keys sorted, commands in name order,
 * `undefined` members dropped — so the same model gives the same hash whether it is read from
 * its module or from a runtime's `/schema`.
 */
export function schemaHashOf(model: ModelInterface): string {
  const commands = [...model.commands]
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .map((c) => ({
      name: c.name,
      params: c.params,
      reply: c.reply === undefined ? null : { type: c.reply.type, schema: c.reply.schema ?? null },
    }));
  const messages = Object.fromEntries(Object.entries(model.messages).map(([type, m]) => [type, { schema: m.schema ?? null }]));
  return sha256Hex(canonicalJson({ name: model.name, commands, messages }));
}

/** JSON with object keys in code-point order at every depth (arrays keep their order). */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') {
    const text = JSON.stringify(value);
    return text === undefined ? 'null' : text;
  }
  if (Array.isArray(value)) return `[${value.map((item) => canonicalJson(item === undefined ? null : item)).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, member]) => member !== undefined && typeof member !== 'function')
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([key, member]) => `${JSON.stringify(key)}:${canonicalJson(member)}`).join(',')}}`;
}
