/**
 * The one place that owns the model a runtime serves: its definition and what is derived from it
 * (the command router, capabilities, the OpenAPI document). Everything that answers for the
 * model (/schema, /capabilities, new sessions) reads through the slot at the moment it answers,
 * so `Runtime.reloadModel` can put a new version in without restarting the process. Nothing
 * else keeps a version: once replaced (and its sessions have moved on), it can be collected.
 */

import type { Capabilities } from '../../protocol/capabilities.ts';
import type { CommandRouter } from './command-router.ts';
import type { ModelDefinition } from './definition.ts';

/** A model version and everything derived from it, built together so they always agree. */
export interface ServedModel {
  readonly definition: ModelDefinition<unknown>;
  readonly router: CommandRouter;
  readonly capabilities: Capabilities;
  /** `GET /schema`'s body. */
  readonly openApi: unknown;
  /** 1 for the model the runtime started with, +1 per reload. */
  readonly version: number;
}

export class ModelSlot {
  #current: ServedModel;

  constructor(first: ServedModel) {
    this.#current = first;
  }

  get current(): ServedModel {
    return this.#current;
  }

  /** Serves `next` from now on. */
  replace(next: ServedModel): void {
    this.#current = next;
  }
}
