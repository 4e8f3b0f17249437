/**
 * A model that declares `messages` but sends a type it did not declare gets one warning per type
 * and session: typed clients (`arclight types`) do not know that type, and the schema hash does
 * not cover it. Models that declare no messages are not checked — declaring is optional.
 */

import type { JsonObject } from '../../protocol/json-schema.ts';
import type { MessageMap } from '../model/definition.ts';

/** Distinct undeclared types remembered per session; past this a model sending made-up types is not worth more lines. */
const MAX_WARNED_TYPES = 64;

export class UndeclaredMessageWarner {
  readonly #warned = new Set<string>();

  /** Calls `warn` the first time `type` is sent undeclared by a model whose `messages` is `declared`. */
  check(declared: MessageMap | undefined, type: string, warn: (message: string, fields: JsonObject) => void): void {
    if (declared === undefined || Object.hasOwn(declared, type) || this.#warned.has(type) || this.#warned.size >= MAX_WARNED_TYPES) return;
    this.#warned.add(type);
    warn('the model sent a message type it does not declare in `messages` (typed clients do not know it)', {
      type,
      declared: Object.keys(declared),
    });
  }
}
