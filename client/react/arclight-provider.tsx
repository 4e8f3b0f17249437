/**
 * `<ArclightProvider>`: one `ArclightClient` for a React tree.
 */

import { useEffect, useMemo, useRef, type ReactNode } from 'react';
import { ArclightClient, type ArclightClientOptions, type ConnectOptions } from '../arclight-client.ts';
import type { TokenSource } from '../token.ts';
import { ArclightContext, type ArclightContextValue } from './arclight-context.ts';
import { storeOf } from './client-store.ts';

interface ProviderCommonProps {
  /**
   * The token (or token resolver, e.g. `cacheToken(...)`) to connect with in hosted mode. Read
   * when connecting, so a new value is used from the next connect on.
   */
  readonly token?: TokenSource;
  /**
   * Connect while true: on mount (once, also under `<StrictMode>`), and when it turns true;
   * turning false disconnects. Default false (connect with `useArclight().connect()`).
   */
  readonly autoConnect?: boolean;
  /** Options for the provider's connects (`connect()` from `useArclight` may add to them). */
  readonly connectOptions?: ConnectOptions;
  readonly children?: ReactNode;
}

/** The provider creates its own client from these options. */
export interface ArclightProviderOwnClientProps extends ArclightClientOptions, ProviderCommonProps {
  readonly client?: undefined;
}

/** The provider shares a client the app made (and keeps owning). */
export interface ArclightProviderClientProps extends ProviderCommonProps {
  readonly client: ArclightClient;
}

/** `<ArclightProvider>`'s props: client options, or an existing `client`. */
export type ArclightProviderProps = ArclightProviderOwnClientProps | ArclightProviderClientProps;

/** The client the provider last managed: whether it connected it, and a disconnect its cleanup scheduled. */
interface Lifecycle {
  client: ArclightClient | undefined;
  autoConnected: boolean;
  release: ReturnType<typeof setTimeout> | undefined;
}

/**
 * Makes an `ArclightClient` available to the hooks and components below it.
 *
 * Given client options (`modelName`, `local`/`localRuntimeUrl` or `apiUrl`, ...) it creates one
 * client on first render and keeps it for its lifetime (later changes to the options are
 * ignored: give the provider a new `key` to start over), and disconnects it on unmount. Given a
 * `client`, it shares that one, and disconnects it on unmount only if `autoConnect` connected it.
 *
 * `<StrictMode>` mounts effects twice in development: the provider connects once, and a
 * disconnect scheduled by the first cleanup is cancelled by the second mount.
 *
 * @example
 * ```tsx
 * <ArclightProvider modelName="echo" local localRuntimeUrl="http://localhost:8080" autoConnect>
 *   <ArclightVideo track="main_video" />
 *   <WebcamPublisher track="webcam" />
 * </ArclightProvider>
 * ```
 */
export function ArclightProvider(props: ArclightProviderProps): ReactNode {
  const { token, autoConnect = false, connectOptions, children } = props;
  const external = props.client;
  // Created on the first render that needs it (React's lazy-ref idiom); the constructor has no
  // side effects, so a render StrictMode repeats or discards costs nothing.
  const owned = useRef<ArclightClient | undefined>(undefined);
  if (!external && !owned.current) owned.current = new ArclightClient(clientOptionsOf(props as ArclightProviderOwnClientProps));
  const client = external ?? owned.current!;
  // Listening from now on: tracks and messages that arrive before a hook mounts are kept.
  storeOf(client);

  const latest = useRef({ token, connectOptions });
  latest.current = { token, connectOptions };

  const context = useMemo<ArclightContextValue>(
    () => ({
      client,
      connect: (override, options) => {
        const { token: ownToken, connectOptions: ownOptions } = latest.current;
        return client.connect(override ?? ownToken, { ...ownOptions, ...options });
      },
    }),
    [client],
  );

  const lifecycle = useRef<Lifecycle>({ client: undefined, autoConnected: false, release: undefined });
  const ownsClient = external === undefined;
  useEffect(() => {
    const life = lifecycle.current;
    if (life.client === client) {
      // The cleanup that ran just before this effect (StrictMode's remount, or a changed
      // autoConnect) scheduled a disconnect of this same client: this run decides instead.
      clearTimeout(life.release);
    } else {
      // Another client (a new `client` prop): the previous one's scheduled release goes ahead.
      life.client = client;
      life.autoConnected = false;
    }
    life.release = undefined;
    if (autoConnect) {
      if (!life.autoConnected) {
        life.autoConnected = true;
        // connect() turns the status to `connecting` before its first await, so a remount sees it.
        if (client.getStatus() === 'disconnected') context.connect().catch(() => {}); // reported as `error`
      }
    } else if (life.autoConnected) {
      life.autoConnected = false;
      void client.disconnect();
    }
    return () => {
      const connectedHere = life.autoConnected;
      life.release = setTimeout(() => {
        if (life.client === client) {
          life.release = undefined;
          life.autoConnected = false;
        }
        if (ownsClient || connectedHere) void client.disconnect();
      }, 0);
    };
  }, [client, context, autoConnect, ownsClient]);

  return <ArclightContext.Provider value={context}>{children}</ArclightContext.Provider>;
}

/** The client options among the provider's props. */
function clientOptionsOf(props: ArclightProviderOwnClientProps): ArclightClientOptions {
  const {
    token: _token,
    autoConnect: _autoConnect,
    connectOptions: _connectOptions,
    children: _children,
    client: _client,
    ...options
  } = props;
  return options;
}
