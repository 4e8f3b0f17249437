/**
 * The harness against the real thing: the same model (test/fixtures/faulty-model.ts) served by a
 * real runtime on 127.0.0.1 to the Node client over WebRTC, and run under createTestSession. Every
 * command — healthy, unknown, with bad params, refused with a CommandError, crashing, rejecting
 * late, replying off its schema — must end the same way in both: the same reply, or the same
 * code, message and field. Failing hooks must be logged under the same words.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ArclightClient, type CommandData } from '../../client/node.ts';
import faultyModel from '../../test/fixtures/faulty-model.ts';
import { startRuntime, type Runtime } from '../index.ts';
import type { Logger } from '../../server-kit/log.ts';
import { createTestSession, type TestSession } from './index.ts';

const LOOPBACK = '127.0.0.1';

/** How a command ended, as a test can compare it. */
type Ending = { reply: unknown } | { code: string; message: string; field: string | undefined };

async function endingOf(send: Promise<unknown>): Promise<Ending> {
  try {
    return { reply: await send };
  } catch (error) {
    const { code, message, field } = error as { code: string; message: string; field?: string };
    return { code, message, field };
  }
}

/** Keeps the runtime's log lines' messages, printing nothing. */
function messageLogger(messages: string[]): Logger {
  const at = (message: string) => void messages.push(message);
  const logger: Logger = { debug: at, info: at, warn: at, error: at, child: () => logger };
  return logger;
}

const COMMANDS: ReadonlyArray<readonly [string, CommandData]> = [
  ['echo', { value: 'hi' }],
  ['nope', {}],
  ['echo', { value: 42 }],
  ['echo', {}],
  ['echo', { value: 'hi', extra: true }],
  ['refuse', {}],
  ['boom', {}],
  ['reject_later', {}],
  ['bad_reply', {}],
];

describe('createTestSession and a real runtime end commands the same way', () => {
  const runtimeLog: string[] = [];
  let runtime: Runtime;
  let client: ArclightClient;
  let harness: TestSession<Record<string, unknown>>;

  beforeAll(async () => {
    runtime = await startRuntime({
      model: faultyModel as never,
      port: 0,
      host: LOOPBACK,
      ice: { hostAddresses: [LOOPBACK] },
      playground: false,
      logger: messageLogger(runtimeLog),
    });
    await runtime.loaded;
    client = new ArclightClient({
      modelName: 'faulty',
      local: true,
      localRuntimeUrl: runtime.url,
      commandTimeoutMs: 20_000,
      connectTimeoutMs: 20_000,
    });
    await client.connect(undefined, { maxAttempts: 10 });
    harness = await createTestSession(faultyModel);
  });

  afterAll(async () => {
    await harness?.end();
    await client?.disconnect().catch(() => {});
    await runtime?.close();
  });

  for (const [name, params] of COMMANDS) {
    it(`${name} ${JSON.stringify(params)}`, async () => {
      const real = await endingOf(client.sendCommand(name, params));
      const underTest = await endingOf(harness.sendCommand(name, params));
      expect(underTest).toEqual(real);
    });
  }

  it('logs the failing hooks under the same words', async () => {
    const hookFailures = (messages: readonly string[]) =>
      [...new Set(messages.filter((m) => /^model hook (session_started|connected) failed$/.test(m)))].sort();
    await expect
      .poll(() => hookFailures(runtimeLog), { timeout: 10_000 })
      .toEqual(['model hook connected failed', 'model hook session_started failed']);
    expect(hookFailures(harness.logs.map((l) => l.message))).toEqual(hookFailures(runtimeLog));
  });
});
