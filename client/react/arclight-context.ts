/**
 * The React context the bindings share: the provider's client and how it connects.
 */

import { createContext, useContext } from 'react';
import type { ArclightClient, ConnectOptions } from '../arclight-client.ts';
import type { ModelTypes, UntypedModel } from '../model-types.ts';
import type { TokenSource } from '../token.ts';

/** What `<ArclightProvider>` puts in context. */
export interface ArclightContextValue {
  readonly client: ArclightClient;
  /**
   * Connects the client with the provider's `token` (unless another is given) and
   * `connectOptions` (merged under `options`).
   */
  readonly connect: (token?: TokenSource, options?: ConnectOptions) => Promise<void>;
}

/** The context itself; most code wants `useArclight()` or `useArclightClient()` instead. */
export const ArclightContext = createContext<ArclightContextValue | null>(null);
ArclightContext.displayName = 'ArclightContext';

/** The provider's context; throws when there is no `<ArclightProvider>` above. */
export function useArclightContext(hook: string): ArclightContextValue {
  const value = useContext(ArclightContext);
  if (value === null) throw new Error(`${hook}() needs an <ArclightProvider> above it in the tree.`);
  return value;
}

/**
 * The provider's `ArclightClient`.
 *
 * `Model` (optional) states which model's types the provider's client has (no check at run
 * time): `useArclightClient<EchoModel>()` is an `ArclightClient<EchoModel>` (see `arclight
 * types`). Without it the client is untyped.
 *
 * @example
 * ```tsx
 * const client = useArclightClient();
 * useEffect(() => client.setLatencyMode('smooth'), [client]);
 * ```
 */
export function useArclightClient<Model extends ModelTypes = UntypedModel>(): ArclightClient<Model> {
  return useArclightContext('useArclightClient').client as ArclightClient<Model>;
}
