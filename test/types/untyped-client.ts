/**
 * Type test: without a type argument the client is as untyped as before typed clients existed —
 * any command name, any JSON data, `CommandReply | undefined`, `ModelMessage`.
 */

import { ArclightClient, FileRef, type CommandData, type CommandReply, type ModelMessage } from '../../client/index.ts';
import { ArclightClient as NodeClient } from '../../client/node.ts';

declare const client: ArclightClient;
declare const nodeClient: NodeClient;
declare const file: FileRef;

export async function anything(name: string, data: CommandData): Promise<void> {
  const reply: CommandReply | undefined = await client.sendCommand(name, data);
  void reply;
  await client.sendCommand('whatever');
  await client.sendCommand('upload', { file, note: 'x', count: 1, nested: { a: [1, 2] } });
  await nodeClient.sendCommand('set_speed', { speed: 4 });
  client.on('message', (message: ModelMessage) => void message.data);
  nodeClient.on('message', (message) => {
    const type: string = message.type;
    void type;
  });
  // @ts-expect-error command data is still a JSON object
  await client.sendCommand('set_speed', 4);
}
