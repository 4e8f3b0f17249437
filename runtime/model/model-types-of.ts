/**
 * `ModelTypesOf<typeof model>`: a typed client's model interface derived from a model module's
 * definition type, for apps that can import the model (a monorepo, tests). It has the shape
 * `arclight types` generates (client/model-types.ts `ModelTypes`), read from the types that
 * `defineModel` and `command` infer instead of from the served schema.
 *
 * @example
 * ```ts
 * import type { ModelTypesOf } from 'arclight/runtime';
 * import type pattern from './models/pattern/index.ts';
 * const client = new ArclightClient<ModelTypesOf<typeof pattern>>({ modelName: 'pattern', local: true });
 * await client.sendCommand('set_speed', { speed: 4 });
 * ```
 */

import type { FromSchema, JSONSchema } from 'json-schema-to-ts';
import type { CommandSpec, MessageMap, ModelDefinition, ParamsOf, ReplySpec } from './definition.ts';

/**
 * What a client sends for a params schema: like the handler's `ParamsOf`, except that a parameter
 * with a `default` stays optional (the runtime fills it in).
 */
export type ClientParamsOf<Schema> = Schema extends JSONSchema ? FromSchema<Schema, { keepDefaultedPropertiesOptional: true }> : unknown;

/** The reply a command with this declared `reply` resolves to (`undefined` when none is declared). */
export type ReplyTypeOf<Name extends string, Reply> = Reply extends ReplySpec
  ? {
      readonly type: Reply['type'] extends string ? Reply['type'] : `${Name}_result`;
      readonly data: Reply extends { readonly schema: infer Schema } ? ParamsOf<Schema> : unknown;
    }
  : undefined;

/** The `commands` half of ModelTypesOf: each command's client-side params and reply. */
export type CommandTypesOf<Commands> = {
  readonly [Name in keyof Commands & string]: Commands[Name] extends CommandSpec<never, unknown, infer Reply, infer Schema>
    ? { readonly params: ClientParamsOf<Schema>; readonly reply: ReplyTypeOf<Name, Reply> }
    : never;
};

/** The `messages` half of ModelTypesOf: each declared message type's data. */
export type MessageTypesOf<Messages> = string extends keyof Messages
  ? {} // eslint-disable-line @typescript-eslint/no-empty-object-type -- the plain MessageMap: nothing declared
  : { readonly [Type in keyof Messages & string]: Messages[Type] extends { readonly schema: infer Schema } ? ParamsOf<Schema> : unknown };

/** The typed-client interface of a model definition (see the module's example). */
export type ModelTypesOf<Model> =
  Model extends ModelDefinition<infer _State, infer Commands, infer Messages extends MessageMap>
    ? {
        readonly commands: CommandTypesOf<Commands>;
        readonly messages: MessageTypesOf<Messages>;
        /** Only `arclight types` knows the hash; compare it at run time with the `schemaHash` option. */
        readonly schemaHash: string;
      }
    : never;
