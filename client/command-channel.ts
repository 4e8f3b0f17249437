/**
 * Requests over the data channel that wait for an outcome: a model command (`application`
 * scope) or a request to the runtime (`runtime` scope: clips, publishing, pings, ...). Each gets a
 * request id, is refused before sending when it exceeds the message size limit, and settles
 * exactly once (PendingCommands): with the reply the inbound router hands back, a failure, the
 * timeout, or the connection closing.
 */

import { ArclightError } from '../protocol/errors.ts';
import type { JsonObject } from '../protocol/json-schema.ts';
import { MAX_MESSAGE_BYTES } from '../protocol/messages.ts';
import type { UploadReference } from '../protocol/uploads.ts';
import { asError } from './error-coercion.ts';
import { PendingCommands, type CommandReply } from './pending-commands.ts';

export type RequestScope = 'application' | 'runtime';

/** What the client's parts send requests through (the connection implements it). */
export interface RequestSender {
  request(
    scope: RequestScope,
    type: string,
    data: JsonObject,
    uploads?: Record<string, UploadReference>,
  ): Promise<CommandReply | undefined>;
}

export class CommandChannel implements RequestSender {
  readonly #pending = new PendingCommands();
  /** Writes to the current data channel; throws when there is none or it is closing. */
  readonly #send: (text: string) => void;
  readonly #timeoutMs: number;

  constructor(send: (text: string) => void, timeoutMs: number) {
    this.#send = send;
    this.#timeoutMs = timeoutMs;
  }

  request(
    scope: RequestScope,
    type: string,
    data: JsonObject,
    uploads?: Record<string, UploadReference>,
  ): Promise<CommandReply | undefined> {
    const requestId = this.#pending.nextId();
    const text = JSON.stringify({ scope, data: { type, data, request_id: requestId, ...(uploads ? { uploads } : {}) } });
    const limit = MAX_MESSAGE_BYTES;
    const bytes = new TextEncoder().encode(text).byteLength;
    if (bytes > limit) {
      return Promise.reject(new ArclightError('message_too_large', `The command is ${bytes} bytes; the limit is ${limit}.`));
    }
    const outcome = this.#pending.track(requestId, type, this.#timeoutMs);
    try {
      this.#send(text);
    } catch (error) {
      this.#pending.reject(requestId, asError(error, 'not_ready'));
    }
    return outcome;
  }

  /** Settles a request with its reply (undefined: an ack); false when none waits on `requestId`. */
  resolve(requestId: string, reply: CommandReply | undefined): boolean {
    return this.#pending.resolve(requestId, reply);
  }

  /** Fails a request; false when none waits on `requestId`. */
  reject(requestId: string, error: ArclightError): boolean {
    return this.#pending.reject(requestId, error);
  }

  rejectAll(error: ArclightError): void {
    this.#pending.rejectAll(error);
  }
}
