import { describe, expect, it } from 'vitest';
import pattern from '../../models/examples/pattern/index.ts';
import { createLogger } from '../../server-kit/log.ts';
import { CommandRouter } from '../../runtime/model/command-router.ts';
import { modelCapabilities } from '../../runtime/model/model-capabilities.ts';
import { validateModelDefinition } from '../../runtime/model/validate-definition.ts';
import { buildOpenApi } from '../../runtime/openapi.ts';
import { modelSchemaFromModule, modelSchemaFromOpenApi, NotAnArclightSchemaError } from './model-schema.ts';

const model = validateModelDefinition(pattern, 'pattern');
const capabilities = modelCapabilities(model, new CommandRouter(model.commands ?? {}, createLogger({}, 'silent')).capabilities());
/** The document as a client receives it (through JSON). */
const served = JSON.parse(JSON.stringify(buildOpenApi(model, capabilities))) as Record<string, Record<string, unknown>>;

describe('the model interface in /schema', () => {
  it("carries the declared messages and the capabilities' schema hash", () => {
    expect(capabilities.messages).toEqual([
      { type: 'welcome', description: expect.any(String), schema: expect.objectContaining({ type: 'object' }) },
    ]);
    expect(served['x-arclight']!['schema_hash']).toBe(capabilities.schema_hash);
    expect(served['x-arclight']!['messages']).toEqual({
      welcome: { description: expect.any(String), schema: pattern.messages!.welcome.schema },
    });
  });

  it('hashing what /schema says gives the hash the runtime computed from the module', () => {
    const withoutHash = structuredClone(served);
    delete withoutHash['x-arclight']!['schema_hash'];
    expect(modelSchemaFromOpenApi(withoutHash).schemaHash).toBe(capabilities.schema_hash);
  });

  it('reads commands, replies and messages back out of the document', async () => {
    const schema = modelSchemaFromOpenApi(served);
    expect(schema.name).toBe('pattern');
    expect(schema.version).toBe('1.0.0');
    expect(schema.commands.map((c) => c.name)).toEqual(['set_color', 'set_speed', 'set_text', 'set_tone', 'get_state']);
    expect(schema.commands[0]).toEqual({
      name: 'set_color',
      description: expect.any(String),
      params: pattern.commands!.set_color.params,
      reply: { type: 'color_changed', schema: pattern.commands!.set_color.reply!.schema },
    });
    expect(schema.commands[1]!.reply).toBeUndefined();
    expect(schema.messages).toEqual([{ type: 'welcome', description: expect.any(String), schema: pattern.messages!.welcome.schema }]);
    expect(await modelSchemaFromModule('models/examples/pattern')).toEqual(schema);
  });

  it("lists the set_<field> commands a model's settings generate, as a typed client reads them", () => {
    const stepper = validateModelDefinition(
      {
        name: 'stepper',
        fps: 10,
        tracks: [],
        settings: { prompt: { type: 'string', default: 'a forest', maxLength: 200, description: 'What to draw.' } },
        generate: () => undefined,
      },
      'stepper',
    );
    const caps = modelCapabilities(stepper, new CommandRouter(stepper.commands ?? {}, createLogger({}, 'silent')).capabilities());
    const document = JSON.parse(JSON.stringify(buildOpenApi(stepper, caps))) as Record<string, Record<string, unknown>>;
    const read = modelSchemaFromOpenApi(document);
    expect(read.commands.map((c) => c.name)).toContain('set_prompt');
    const setPrompt = read.commands.find((c) => c.name === 'set_prompt')!;
    expect(setPrompt.params).toMatchObject({
      type: 'object',
      properties: { value: { type: 'string', maxLength: 200 } },
      required: ['value'],
    });
  });

  it("refuses documents that are not an Arclight runtime's /schema", () => {
    for (const document of [null, [], 'x', { openapi: '3.1.0' }, { 'x-arclight': {} }, { 'x-arclight': { model: {} } }]) {
      expect(() => modelSchemaFromOpenApi(document), JSON.stringify(document)).toThrow(NotAnArclightSchemaError);
    }
  });
});

describe('validateModelDefinition: messages', () => {
  const base = { name: 'm', fps: 10, tracks: [] };

  it('accepts declared messages with or without a schema', () => {
    expect(() =>
      validateModelDefinition(
        { ...base, messages: { ready: {}, progress: { description: 'x', schema: { type: 'object' } }, any: { schema: true } } },
        'm',
      ),
    ).not.toThrow();
  });

  it('lists every mistake', () => {
    let problems: readonly string[] = [];
    try {
      validateModelDefinition(
        { ...base, messages: { 'bad type': {}, notObject: 5, badDescription: { description: 1 }, badSchema: { schema: 'string' } } },
        'm',
      );
    } catch (error) {
      problems = (error as { problems: readonly string[] }).problems;
    }
    expect(problems).toEqual([
      'message type "bad type" must be an identifier (letters, digits, "_", "." or "-")',
      'messages.notObject must be an object ({ description?, schema? })',
      'messages.badDescription.description must be a string',
      'messages.badSchema.schema must be a JSON Schema (an object or a boolean)',
    ]);
    expect(() => validateModelDefinition({ ...base, messages: [] }, 'm')).toThrow(/messages must be an object/);
  });
});
