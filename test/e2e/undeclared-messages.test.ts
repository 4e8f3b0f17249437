/**
 * A model that declares `messages` and sends other types: they still reach the client, and the
 * session's log (and the runtime's) gets one warning per undeclared type — not one per message,
 * and none for declared types.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ArclightClient, type ModelMessage } from '../../client/node.ts';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import { createLogger } from '../../server-kit/log.ts';
import model from '../fixtures/undeclared-message-model.ts';

describe('undeclared message types', () => {
  let runtime: Runtime;
  let client: ArclightClient | undefined;

  beforeAll(async () => {
    runtime = await startRuntime({
      model: model as never,
      port: 0,
      host: '127.0.0.1',
      ice: { hostAddresses: ['127.0.0.1'] },
      playground: false,
      logger: createLogger({}, 'silent'),
    });
    await runtime.loaded;
  });

  afterAll(async () => {
    await client?.disconnect().catch(() => {});
    await runtime?.close();
  });

  it('are delivered, and warned about once per type in the session log', async () => {
    client = new ArclightClient({ modelName: 'undeclared-messages', local: true, localRuntimeUrl: runtime.url, connectTimeoutMs: 20_000 });
    const received: ModelMessage[] = [];
    const allArrived = new Promise<void>((resolve) => {
      client!.on('message', (message) => {
        received.push(message);
        if (received.length === 5) resolve();
      });
    });
    await client.connect(undefined, { maxAttempts: 10 });
    await allArrived;
    expect(received.map((m) => m.type).sort()).toEqual(['hello', 'hello', 'oops', 'oops', 'shout']);

    const { lines } = await client.getSessionLogs({ limit: 1000 });
    const warnings = lines.filter((line) => line.level === 'warn' && line.message.includes('does not declare'));
    expect(warnings.map((line) => line.fields?.['type']).sort()).toEqual(['oops', 'shout']);
    expect(warnings[0]!.fields?.['declared']).toEqual(['hello']);
  }, 60_000);
});
