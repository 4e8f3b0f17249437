/**
 * `sendCommand()` below its types: the command checked against the model's declared commands,
 * its data against "a JSON object", and split as 2.9.0 sends it — scalar values in `data`, file
 * parameters (FileRefs from `uploadFile()`) apart in `uploads` — then sent in application scope.
 */

import type { Capabilities } from '../protocol/capabilities.ts';
import { ArclightError } from '../protocol/errors.ts';
import type { JsonObject, JsonValue } from '../protocol/json-schema.ts';
import type { UploadReference } from '../protocol/uploads.ts';
import type { RequestSender } from './command-channel.ts';
import { FileRef } from './file-ref.ts';
import type { CommandData } from './model-types.ts';
import type { CommandReply } from './pending-commands.ts';

export function sendModelCommand(
  sender: RequestSender,
  capabilities: Capabilities | undefined,
  command: string,
  data: unknown,
): Promise<CommandReply | undefined> {
  const known = capabilities?.commands;
  if (known && !known.some((c) => c.name === command)) {
    throw new ArclightError('unknown_command', `The model has no command "${command}". Known: ${known.map((c) => c.name).join(', ')}.`);
  }
  if (data === null || typeof data !== 'object' || Array.isArray(data)) {
    throw new ArclightError('invalid_params', 'Command data must be a JSON object.');
  }
  // File parameters travel apart from the scalar data, in `uploads` (as 2.9.0 sends them).
  const scalars: JsonObject = {};
  const uploads: Record<string, UploadReference> = {};
  for (const [key, value] of Object.entries(data as CommandData)) {
    if (value instanceof FileRef) uploads[key] = value.toReference();
    else scalars[key] = value as JsonValue;
  }
  return sender.request('application', command, scalars, Object.keys(uploads).length > 0 ? uploads : undefined);
}
