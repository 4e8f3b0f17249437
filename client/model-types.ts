/**
 * The shape a typed client is compiled against: `new ArclightClient<PatternModel>(...)`, where
 * `PatternModel` comes from `arclight types` (or `ModelTypesOf<typeof model>` from
 * `arclight/runtime`). Without a type argument the client is untyped (`UntypedModel`) and behaves
 * exactly as before: any command name, `CommandData`, `ModelMessage`. Those two are declared here,
 * beside the untyped model they make up, so nothing this file imports imports it back.
 */

import type { JsonValue } from '../protocol/json-schema.ts';
import type { FileRef } from './file-ref.ts';
import type { CommandReply } from './pending-commands.ts';

/** Command data: JSON values, and `FileRef`s (from `uploadFile()`) for file parameters. */
export type CommandData = { readonly [key: string]: JsonValue | FileRef };

/** A message from the model (application scope). */
export interface ModelMessage {
  readonly type: string;
  readonly data?: JsonValue;
  /** Set when the message is the reply to a command this client sent. */
  readonly request_id?: string;
}

/** A command's reply as a client receives it: its message type and data. */
export interface TypedReply {
  readonly type: string;
  readonly data: unknown;
}

/**
 * A model's client-facing interface as types.
 * - `commands`: name → `params` (the `data` of `sendCommand`) and `reply` (what it resolves to;
 *   `undefined` when the command declares no reply).
 * - `messages`: declared message type → the type of its `data`.
 * - `schemaHash`: the model's schema hash (a string literal type in generated types).
 */
export interface ModelTypes {
  readonly commands: { readonly [name: string]: { readonly params: unknown; readonly reply: TypedReply | undefined } };
  readonly messages: { readonly [type: string]: unknown };
  readonly schemaHash: string;
}

/** The default: any command, untyped data and replies, any message (today's client). */
export interface UntypedModel extends ModelTypes {
  readonly commands: { readonly [name: string]: { readonly params: CommandData; readonly reply: CommandReply } };
  readonly messages: { readonly [type: string]: JsonValue | undefined };
  readonly schemaHash: string;
}

/** The command names `sendCommand` accepts. */
export type CommandName<Model extends ModelTypes> = keyof Model['commands'] & string;

/** `sendCommand`'s data argument: optional when every parameter is. */
export type CommandParamsArgument<Model extends ModelTypes, Name extends CommandName<Model>> =
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type -- `{} extends P`: every parameter is optional
  {} extends Model['commands'][Name]['params'] ? [data?: Model['commands'][Name]['params']] : [data: Model['commands'][Name]['params']];

/**
 * What `sendCommand` resolves to: the declared reply, or `undefined` for a bodyless ack (a
 * handler may return nothing even when a reply is declared).
 */
export type CommandResultOf<Model extends ModelTypes, Name extends CommandName<Model>> = Model['commands'][Name]['reply'] | undefined;

/** The union of an object type's property types (how the message unions below are formed). */
export type ValueOf<T> = T[keyof T];

/** A declared message, discriminated by `type`. */
export type DeclaredMessage<Model extends ModelTypes> = ValueOf<{
  [Type in keyof Model['messages'] & string]: { readonly type: Type; readonly data: Model['messages'][Type]; readonly request_id?: string };
}>;

/** A declared reply as it arrives on the `message` event (with the request id of its command). */
export type ReplyMessage<Model extends ModelTypes> = ValueOf<{
  [Name in CommandName<Model>]: Model['commands'][Name]['reply'] extends infer Reply
    ? Reply extends TypedReply
      ? { readonly type: Reply['type']; readonly data: Reply['data']; readonly request_id?: string }
      : never
    : never;
}>;

/**
 * What the `message` event carries: `ModelMessage` for an untyped client; for a typed one the
 * union of declared messages and replies, so `switch (message.type)` narrows `message.data`.
 */
export type MessageOf<Model extends ModelTypes> = string extends keyof Model['messages']
  ? ModelMessage
  : DeclaredMessage<Model> | ReplyMessage<Model>;
