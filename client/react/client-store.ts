/**
 * What the React bindings read from an `ArclightClient` that the client does not keep itself:
 * the streams of received tracks, the latest model messages, and the error of the current
 * connect. One store per client, listening from its creation, so a component that mounts after
 * `ready` still finds the tracks and messages that arrived before it.
 */

import type { ArclightClient, ClientStatus, ModelMessage } from '../arclight-client.ts';
import type { ArclightError } from '../../protocol/errors.ts';

/** How many messages a store keeps (`useModelMessages` reads its `limit` latest from these). */
export const MESSAGE_HISTORY = 500;

type Listener = () => void;
type Topic = 'status' | 'error' | 'tracks' | 'messages';

export class ClientStore {
  readonly #listeners: Record<Topic, Set<Listener>> = { status: new Set(), error: new Set(), tracks: new Set(), messages: new Set() };
  readonly #tracks = new Map<string, MediaStream>();
  /** Replaced (never mutated) on each message, so it is its own snapshot. */
  #messages: readonly ModelMessage[] = [];
  /** The session the kept messages belong to: a new session starts a new history. */
  #messagesSessionId: string | undefined;
  #error: ArclightError | undefined;
  #status: ClientStatus;

  constructor(client: ArclightClient) {
    this.#status = client.getStatus();
    this.#error = client.getLastError();
    client.on('statusChanged', (status) => this.#onStatus(status));
    client.on('error', (error) => {
      this.#error = error;
      this.#notify('error');
    });
    client.on('trackReceived', (name, track) => {
      // One stream per track, made here: the runtime's stream may group several tracks, and a
      // stream per track is what a <video> or <audio> of that one track wants.
      if (typeof MediaStream !== 'function') return;
      this.#tracks.set(name, new MediaStream([track]));
      this.#notify('tracks');
    });
    client.on('sessionIdChanged', (sessionId) => {
      if (sessionId === undefined || sessionId === this.#messagesSessionId) return;
      this.#messagesSessionId = sessionId;
      if (this.#messages.length === 0) return;
      this.#messages = [];
      this.#notify('messages');
    });
    client.on('message', (message) => {
      const kept = this.#messages.length >= MESSAGE_HISTORY ? this.#messages.slice(1 - MESSAGE_HISTORY) : this.#messages;
      this.#messages = [...kept, message];
      this.#notify('messages');
    });
  }

  /** The error of the current connect, or of the last one (cleared when a new connect starts). */
  get error(): ArclightError | undefined {
    return this.#error;
  }

  /** The stream of the received track `name`; undefined before it arrives and once disconnected. */
  track(name: string): MediaStream | undefined {
    return this.#tracks.get(name);
  }

  /** The latest messages of the current (or last) session, oldest first. */
  get messages(): readonly ModelMessage[] {
    return this.#messages;
  }

  /** `useSyncExternalStore`'s `subscribe`, one per topic. */
  readonly subscribeStatus = (listener: Listener): (() => void) => this.#subscribe('status', listener);
  readonly subscribeError = (listener: Listener): (() => void) => this.#subscribe('error', listener);
  readonly subscribeTracks = (listener: Listener): (() => void) => this.#subscribe('tracks', listener);
  readonly subscribeMessages = (listener: Listener): (() => void) => this.#subscribe('messages', listener);

  #onStatus(status: ClientStatus): void {
    const previous = this.#status;
    this.#status = status;
    if (previous === 'disconnected' && status === 'connecting' && this.#error !== undefined) {
      this.#error = undefined;
      this.#notify('error');
    }
    // The peer is gone: its tracks are ended. A recovery (ready → connecting → ready) keeps them
    // until the new peer's tracks replace them, so the picture holds its last frame meanwhile.
    if (status === 'disconnected' && this.#tracks.size > 0) {
      this.#tracks.clear();
      this.#notify('tracks');
    }
    this.#notify('status');
  }

  #subscribe(topic: Topic, listener: Listener): () => void {
    this.#listeners[topic].add(listener);
    return () => this.#listeners[topic].delete(listener);
  }

  #notify(topic: Topic): void {
    for (const listener of [...this.#listeners[topic]]) listener();
  }
}

const stores = new WeakMap<ArclightClient, ClientStore>();

/** The client's store, created (and listening) on first use; it lives as long as the client. */
export function storeOf(client: ArclightClient): ClientStore {
  let store = stores.get(client);
  if (!store) {
    store = new ClientStore(client);
    stores.set(client, store);
  }
  return store;
}
