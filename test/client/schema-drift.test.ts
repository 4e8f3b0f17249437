/**
 * Schema drift, end to end: a real runtime serving the pattern example on 127.0.0.1 and the Node
 * client (wrtc), typed with the interface `arclight types` generates. A client built against the
 * model's current hash connects without a warning and gets its declared `welcome` message typed;
 * one built against another hash still connects, and gets one `warning` (`schema_drift`) and one
 * console warning. The hash the runtime announces is the one computed from the module.
 */

import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ArclightClient, type ClientWarning, type Capabilities } from '../../client/node.ts';
import { modelSchemaFromModule } from '../../dev/types/model-schema.ts';
import pattern from '../../models/examples/pattern/index.ts';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import { createLogger } from '../../server-kit/log.ts';
import type { PatternModel } from '../types/pattern-model.d.ts';

describe('schema drift warning', () => {
  let runtime: Runtime;
  let moduleHash: string;
  const clients: ArclightClient<PatternModel>[] = [];

  beforeAll(async () => {
    runtime = await startRuntime({
      model: pattern as never,
      port: 0,
      host: '127.0.0.1',
      ice: { hostAddresses: ['127.0.0.1'] },
      playground: false,
      logger: createLogger({}, 'warn'),
    });
    await runtime.loaded;
    moduleHash = (await modelSchemaFromModule('models/examples/pattern')).schemaHash;
  });

  afterAll(async () => {
    for (const client of clients) await client.disconnect().catch(() => {});
    await runtime?.close();
  });

  interface Connected {
    readonly client: ArclightClient<PatternModel>;
    readonly warnings: ClientWarning[];
    readonly capabilities: Capabilities[];
    readonly consoleWarnings: unknown[][];
    readonly welcome: Promise<PatternModel['messages']['welcome']>;
  }

  const connect = async (schemaHash: string): Promise<Connected> => {
    const client = new ArclightClient<PatternModel>({
      modelName: 'pattern',
      local: true,
      localRuntimeUrl: runtime.url,
      schemaHash,
      connectTimeoutMs: 20_000,
      commandTimeoutMs: 20_000,
    });
    clients.push(client);
    const warnings: ClientWarning[] = [];
    const capabilities: Capabilities[] = [];
    client.on('warning', (warning) => warnings.push(warning));
    client.on('capabilitiesReceived', (c) => capabilities.push(c));
    const welcome = new Promise<PatternModel['messages']['welcome']>((resolve) => {
      client.on('message', (message) => {
        // Narrowed by type: data is { model: 'pattern'; frame: number }.
        if (message.type === 'welcome') resolve(message.data);
      });
    });
    const spy = vi.spyOn(console, 'warn').mockImplementation(() => {});
    let consoleWarnings: unknown[][];
    try {
      await client.connect(undefined, { maxAttempts: 10 });
    } finally {
      // Read before restoring: mockRestore() clears the recorded calls.
      consoleWarnings = spy.mock.calls.filter((args) => String(args[0]).includes('schema hash'));
      spy.mockRestore();
    }
    return { client, warnings, capabilities, welcome, consoleWarnings };
  };

  it('the same hash: no warning, and the declared messages arrive typed', async () => {
    const { client, warnings, capabilities, consoleWarnings, welcome } = await connect(moduleHash);
    expect(client.getState().status).toBe('ready');
    expect(capabilities[0]?.schema_hash).toBe(moduleHash);
    expect(capabilities[0]?.messages?.map((m) => m.type)).toEqual(['welcome']);
    expect(warnings).toEqual([]);
    expect(consoleWarnings).toEqual([]);

    const greeting = await welcome;
    expect(greeting.model).toBe('pattern');
    expect(Number.isInteger(greeting.frame)).toBe(true);

    const reply = await client.sendCommand('set_color', { color: '#00FF00' });
    expect(reply).toEqual({ type: 'color_changed', data: { color: '#00ff00' } });
    await client.disconnect();
  }, 60_000);

  it('another hash: one schema_drift warning event and one console warning, and the client still connects', async () => {
    const stale = '0'.repeat(64);
    const { client, warnings, consoleWarnings } = await connect(stale);
    expect(client.getState().status).toBe('ready');
    expect(warnings).toEqual([
      { code: 'schema_drift', message: expect.stringContaining('arclight types'), expected: stale, actual: moduleHash },
    ]);
    expect(consoleWarnings).toHaveLength(1);
    // Commands still work: the warning is advice, not a failure.
    await client.sendCommand('set_speed', { speed: 2 });
    await client.disconnect();
  }, 60_000);

  it('a model reloaded in place (arclight dev) with another interface: schema_drift for the open connection', async () => {
    const { client, warnings } = await connect(moduleHash);
    expect(warnings).toEqual([]);
    const drifted = new Promise<ClientWarning>((resolve) => client.on('warning', resolve));
    const spy = vi.spyOn(console, 'warn').mockImplementation(() => {});
    try {
      // Same tracks and fps (the session is kept), one more declared message: another hash.
      const outcome = await runtime.reloadModel({ ...pattern, messages: { ...pattern.messages, goodbye: {} } } as never);
      expect(outcome).toMatchObject({ ok: true });
      const warning = await drifted;
      expect(warning).toMatchObject({ code: 'schema_drift', expected: moduleHash });
      expect(warning.actual).toMatch(/^[0-9a-f]{64}$/);
      expect(warning.actual).not.toBe(moduleHash);
    } finally {
      spy.mockRestore();
      // Back to the module's version for any later test.
      await runtime.reloadModel(pattern as never);
    }
    await client.disconnect();
  }, 60_000);
});
