/**
 * Model messages in React: `useModelMessages()` renders the latest ones, `useModelMessage()`
 * calls a function for each.
 */

import { useEffect, useLayoutEffect, useMemo, useRef, useSyncExternalStore } from 'react';
import type { ModelMessage } from '../arclight-client.ts';
import type { MessageOf, ModelTypes, UntypedModel } from '../model-types.ts';
import { useArclightContext } from './arclight-context.ts';
import { MESSAGE_HISTORY, storeOf } from './client-store.ts';

/** The messages of `Model` whose `type` is `Type` (every message for an untyped model). */
export type MessageOfType<Model extends ModelTypes, Type extends string> = string extends MessageOf<Model>['type']
  ? MessageOf<Model>
  : Extract<MessageOf<Model>, { readonly type: Type }>;

/** Which messages `useModelMessages` returns. */
export interface ModelMessagesQuery<Type extends string = string> {
  /** Only messages of this `type` (e.g. `'input_started'`); default all, command replies included. */
  readonly type?: Type;
  /** How many of the latest to return; default 50, at most 500 (what the provider keeps). */
  readonly limit?: number;
}

const DEFAULT_LIMIT = 50;
const NO_MESSAGES: readonly ModelMessage[] = Object.freeze([]);

/**
 * The latest messages from the model (`message` events: broadcasts, sends and command replies)
 * in the current session, oldest first; the component renders again when one arrives that the
 * query selects. Messages that arrived before the component mounted are included (the provider
 * keeps the latest 500 of the session); a new session starts empty.
 *
 * `Model` (optional, see `useArclight`) types the messages: with `type`, their `data` is that
 * message's declared type. `typedHooks<Model>()` infers `Type` from the query.
 *
 * @example
 * ```tsx
 * const messages = useModelMessages({ type: 'caption', limit: 5 });
 * return <ul>{messages.map((m, i) => <li key={i}>{String(m.data)}</li>)}</ul>;
 * ```
 */
export function useModelMessages<Model extends ModelTypes = UntypedModel, Type extends string = string>(
  query: ModelMessagesQuery<Type> = {},
): readonly MessageOfType<Model, Type>[] {
  const { client } = useArclightContext('useModelMessages');
  const store = storeOf(client);
  const { type } = query;
  const limit = Math.max(0, Math.min(query.limit ?? DEFAULT_LIMIT, MESSAGE_HISTORY));
  const select = useMemo(() => messageSelector(type, limit), [type, limit]);
  const snapshot = (): readonly ModelMessage[] => select(store.messages);
  // The runtime sent what the model declares (a changed model is reported as schema_drift at connect).
  return useSyncExternalStore(store.subscribeMessages, snapshot, snapshot) as readonly MessageOfType<Model, Type>[];
}

/**
 * A selection of `messages` that returns the same array as long as it selects the same
 * messages, so a message of another type does not render the component again.
 */
function messageSelector(type: string | undefined, limit: number): (messages: readonly ModelMessage[]) => readonly ModelMessage[] {
  let source: readonly ModelMessage[] | undefined;
  let selected = NO_MESSAGES;
  return (messages) => {
    if (messages === source) return selected;
    source = messages;
    const matching = type === undefined ? messages : messages.filter((m) => m.type === type);
    const next = limit === 0 ? NO_MESSAGES : matching.slice(-limit);
    if (next.length !== selected.length || next.some((m, i) => m !== selected[i])) selected = next.length === 0 ? NO_MESSAGES : next;
    return selected;
  };
}

/**
 * Calls `handler` for every message of `type` from the model while the component is mounted
 * (not for earlier ones). The latest `handler` is called, so an inline function is fine: the
 * subscription is not renewed when it changes. `Model` (optional) types the message as for
 * `useModelMessages`.
 *
 * @example
 * ```tsx
 * useModelMessage('input_started', (message) => setSize(message.data));
 * ```
 */
export function useModelMessage<Model extends ModelTypes = UntypedModel, Type extends string = string>(
  type: Type,
  handler: (message: MessageOfType<Model, Type>) => void,
): void {
  const { client } = useArclightContext('useModelMessage');
  const latest = useRef(handler);
  useLayoutEffect(() => {
    latest.current = handler;
  });
  useEffect(() => {
    const listener = (message: ModelMessage): void => {
      if (message.type === type) latest.current(message as MessageOfType<Model, Type>);
    };
    client.on('message', listener);
    return () => client.off('message', listener);
  }, [client, type]);
}
