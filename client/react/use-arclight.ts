/**
 * `useArclight()` and `useArclightStatus()`: the provider's client, its status and error, and
 * stable functions to drive it.
 */

import { useCallback, useMemo, useSyncExternalStore } from 'react';
import type { ArclightClient, ClientStatus, ConnectOptions } from '../arclight-client.ts';
import type { ArclightError } from '../../protocol/errors.ts';
import type { ModelTypes, UntypedModel } from '../model-types.ts';
import type { TokenSource } from '../token.ts';
import { useArclightContext } from './arclight-context.ts';
import { storeOf } from './client-store.ts';

/** What `useArclight()` returns. The functions keep their identity for the client's lifetime. */
export interface UseArclightResult<Model extends ModelTypes = UntypedModel> {
  readonly client: ArclightClient<Model>;
  /** The client's status; the component renders again when it changes. */
  readonly status: ClientStatus;
  /** Why the current (or last) connect failed, or what went wrong since; cleared when a connect starts. */
  readonly error: ArclightError | undefined;
  /** `client.connect()` with the provider's token and `connectOptions` unless given here. */
  readonly connect: (token?: TokenSource, options?: ConnectOptions) => Promise<void>;
  /** `client.disconnect()`. */
  readonly disconnect: (recoverable?: boolean) => Promise<void>;
  /** `client.sendCommand()`, bound (typed by `Model`: declared command names, params and replies). */
  readonly sendCommand: ArclightClient<Model>['sendCommand'];
}

/**
 * The provider's client with its status and error, and stable `connect`, `disconnect` and
 * `sendCommand` functions (safe in effect dependencies).
 *
 * `Model` (optional; from `arclight types`, or `ModelTypesOf<typeof model>`) states the types of
 * the provider's model (no check at run time): `useArclight<EchoModel>()` gives a `sendCommand`
 * that accepts only declared commands with their params and resolves to the declared reply.
 *
 * @example
 * ```tsx
 * function Brightness() {
 *   const { status, sendCommand } = useArclight();
 *   return <button disabled={status !== 'ready'} onClick={() => sendCommand('set_brightness', { value: 0.5 })}>Dim</button>;
 * }
 * ```
 */
export function useArclight<Model extends ModelTypes = UntypedModel>(): UseArclightResult<Model> {
  const { client, connect } = useArclightContext('useArclight');
  const store = storeOf(client);
  const status = useSyncExternalStore(
    store.subscribeStatus,
    () => client.getStatus(),
    () => client.getStatus(),
  );
  const error = useSyncExternalStore(
    store.subscribeError,
    () => store.error,
    () => store.error,
  );
  const disconnect = useCallback((recoverable?: boolean) => client.disconnect(recoverable), [client]);
  const sendCommand = useMemo(() => client.sendCommand.bind(client), [client]);
  const typed = client as ArclightClient<Model>;
  return { client: typed, status, error, connect, disconnect, sendCommand: sendCommand as ArclightClient<Model>['sendCommand'] };
}

/**
 * The provider's client status (`disconnected`, `connecting`, `waiting`, `ready`); the component
 * renders again when it changes.
 *
 * @example
 * ```tsx
 * const status = useArclightStatus();
 * return <span className={`badge ${status}`}>{status}</span>;
 * ```
 */
export function useArclightStatus(): ClientStatus {
  const { client } = useArclightContext('useArclightStatus');
  const store = storeOf(client);
  return useSyncExternalStore(
    store.subscribeStatus,
    () => client.getStatus(),
    () => client.getStatus(),
  );
}
