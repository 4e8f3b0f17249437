/**
 * Builds a served version of the model (runtime/model/model-slot.ts's `ServedModel`): its command
 * router, the capabilities clients are told at connect, and the OpenAPI document `/schema`
 * serves — derived together from one definition so they always agree. The runtime builds the
 * first version at start (a bad schema fails the start) and one more per reload.
 */

import type { Capabilities } from '../../protocol/capabilities.ts';
import type { Logger } from '../../server-kit/log.ts';
import type { RuntimeMetrics } from '../metrics.ts';
import { CommandRouter } from '../model/command-router.ts';
import type { ModelDefinition } from '../model/definition.ts';
import { modelCapabilities } from '../model/model-capabilities.ts';
import type { ServedModel } from '../model/model-slot.ts';
import type { ModerationOptions } from '../moderation/moderator.ts';
import { buildOpenApi } from '../openapi.ts';

/** @internal What a client is told about the model at connect (tracks, commands, messages, schema hash). */
export function capabilitiesOf(model: ModelDefinition<unknown>, router: CommandRouter): Capabilities {
  return modelCapabilities(model, router.capabilities());
}

/** Builds version `version` of a model; throws when its commands' schemas do not compile. */
export type ServedVersionBuilder = (definition: ModelDefinition<unknown>, version: number) => ServedModel;

/** A builder whose routers log, count and moderate through the runtime's own. */
export function servedVersionBuilder(
  log: Logger,
  metrics: RuntimeMetrics,
  moderation: ModerationOptions | undefined,
): ServedVersionBuilder {
  return (definition, version) => {
    const router = new CommandRouter(definition.commands ?? {}, log, metrics, moderation);
    const capabilities = capabilitiesOf(definition, router);
    return { definition, router, capabilities, openApi: buildOpenApi(definition, capabilities), version };
  };
}
