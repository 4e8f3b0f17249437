/**
 * The diffuse example's declared settings, served by a real runtime: `/capabilities` and `/schema`
 * list the generated `set_prompt` (and `set_paused`, `set_ms_per_frame`) with the field's schema as
 * their `value` parameter, beside the one hand-written command, `reset` — what the playground's
 * forms and typed clients are built from.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { modelSchemaFromOpenApi } from '../../dev/types/model-schema.ts';
import diffuse from '../../models/examples/diffuse/index.ts';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import { createLogger } from '../../server-kit/log.ts';

const LOOPBACK = '127.0.0.1';

interface CapabilityCommand {
  readonly name: string;
  readonly description: string;
  readonly schema?: Record<string, unknown>;
  readonly params?: Record<string, unknown>;
}

describe('diffuse: settings as commands, served', () => {
  let runtime: Runtime;
  beforeAll(async () => {
    runtime = await startRuntime({
      model: diffuse as never,
      port: 0,
      host: LOOPBACK,
      ice: { hostAddresses: [LOOPBACK] },
      playground: false,
      logger: createLogger({ test: 'diffuse-schema' }, 'error'),
    });
  });
  afterAll(async () => {
    await runtime?.close();
  });

  it('/capabilities and /schema list set_prompt with the declared value schema, and reset', async () => {
    const capabilities = (await (await fetch(`${runtime.url}/capabilities`)).json()) as { commands: CapabilityCommand[] };
    const names = capabilities.commands.map((c) => c.name).sort();
    expect(names).toEqual(['reset', 'set_ms_per_frame', 'set_paused', 'set_prompt']);
    const fromCapabilities = capabilities.commands.find((c) => c.name === 'set_prompt')!;
    expect(fromCapabilities.description).toBe('What to generate; applies from the next step.');
    expect(JSON.stringify(fromCapabilities)).toContain('"maxLength":80');

    const schema = modelSchemaFromOpenApi(await (await fetch(`${runtime.url}/schema`)).json());
    expect(schema.commands.map((c) => c.name).sort()).toEqual(names);
    const setPrompt = schema.commands.find((c) => c.name === 'set_prompt')!;
    expect(setPrompt.params).toMatchObject({
      type: 'object',
      properties: { value: { type: 'string', minLength: 1, maxLength: 80, pattern: expect.any(String) } },
      required: ['value'],
      additionalProperties: false,
    });
    expect(schema.commands.find((c) => c.name === 'set_paused')!.params).toMatchObject({
      properties: { value: { type: 'boolean' } },
      required: ['value'],
    });
    expect(schema.commands.find((c) => c.name === 'reset')!.reply).toMatchObject({ type: 'scene_reset' });
  });
});
