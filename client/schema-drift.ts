/**
 * Whether the runtime's model is still the one the app's types describe. `checkSchemaHash()`
 * compares the `schemaHash` option with the hash the runtime announces — at connect, and when
 * `arclight dev` reloads the model in place (`model_reloaded`) — and warns on a mismatch without
 * stopping anything. `requestSchema()` asks the runtime for the capabilities it serves now.
 */

import type { Capabilities } from '../protocol/capabilities.ts';
import { ArclightError } from '../protocol/errors.ts';
import type { ClientWarning, EmitClientEvent } from './client-types.ts';
import type { RequestSender } from './command-channel.ts';

/** Warns (event + one console line) when the runtime's model is not the one the app's types describe. */
export function checkSchemaHash(expected: string | undefined, modelName: string, capabilities: Capabilities, emit: EmitClientEvent): void {
  const actual = capabilities.schema_hash;
  if (expected === undefined || actual === undefined || expected === actual) return;
  const warning: ClientWarning = {
    code: 'schema_drift',
    message: `The model "${modelName}" has changed since this app's types were generated (schema hash ${actual}, expected ${expected}): commands or messages may not match. Regenerate them with \`arclight types\`.`,
    expected,
    actual,
  };
  console.warn(`[arclight] ${warning.message}`);
  emit('warning', warning);
}

/** The capabilities the runtime serves now, asked on the data channel (`request_schema`). */
export async function requestSchema(sender: RequestSender): Promise<Capabilities> {
  const reply = await sender.request('runtime', 'request_schema', {});
  const capabilities = (reply?.data as { capabilities?: unknown } | undefined)?.capabilities;
  if (typeof capabilities !== 'object' || capabilities === null)
    throw new ArclightError('internal_error', 'The runtime answered request_schema without capabilities.');
  return capabilities as Capabilities;
}
