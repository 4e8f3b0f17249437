import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson, schemaHashOf, type ModelInterface } from './schema-hash.ts';
import { sha256Hex } from './sha256.ts';

describe('sha256Hex', () => {
  it('matches node:crypto on the standard vectors and block-boundary lengths', () => {
    expect(sha256Hex('')).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(sha256Hex('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    for (const length of [55, 56, 63, 64, 65, 119, 120, 1000]) {
      const text = 'x'.repeat(length);
      expect(sha256Hex(text), `length ${length}`).toBe(createHash('sha256').update(text).digest('hex'));
    }
  });

  it('matches node:crypto on any text (UTF-8)', () => {
    fc.assert(fc.property(fc.fullUnicodeString(), (text) => sha256Hex(text) === createHash('sha256').update(text, 'utf8').digest('hex')));
  });
});

describe('schemaHashOf', () => {
  const model: ModelInterface = {
    name: 'pattern',
    commands: [
      { name: 'set_speed', params: { type: 'object', properties: { speed: { type: 'number' } }, required: ['speed'] } },
      { name: 'get_state', params: { type: 'object' }, reply: { type: 'state', schema: { type: 'object' } } },
    ],
    messages: { welcome: { schema: { type: 'object' } } },
  };

  it('does not depend on key order or command order', () => {
    const reordered: ModelInterface = {
      messages: { welcome: { schema: { type: 'object' } } },
      commands: [
        { reply: { schema: { type: 'object' }, type: 'state' }, params: { type: 'object' }, name: 'get_state' },
        { params: { required: ['speed'], properties: { speed: { type: 'number' } }, type: 'object' }, name: 'set_speed' },
      ],
      name: 'pattern',
    };
    expect(schemaHashOf(reordered)).toBe(schemaHashOf(model));
    expect(schemaHashOf(model)).toMatch(/^[0-9a-f]{64}$/);
  });

  it('changes with the name, a parameter, a reply or a message', () => {
    const base = schemaHashOf(model);
    expect(schemaHashOf({ ...model, name: 'pattern2' })).not.toBe(base);
    expect(
      schemaHashOf({
        ...model,
        commands: [{ ...model.commands[0]!, params: { type: 'object', properties: { speed: { type: 'integer' } } } }, model.commands[1]!],
      }),
    ).not.toBe(base);
    expect(schemaHashOf({ ...model, commands: [model.commands[0]!, { ...model.commands[1]!, reply: { type: 'state2' } }] })).not.toBe(base);
    expect(schemaHashOf({ ...model, messages: {} })).not.toBe(base);
    expect(schemaHashOf({ ...model, messages: { welcome: {} } })).not.toBe(base);
  });

  it('canonical JSON sorts keys at every depth and drops undefined members', () => {
    expect(canonicalJson({ b: 1, a: { d: [3, { z: 1, y: 2 }], c: undefined } })).toBe('{"a":{"d":[3,{"y":2,"z":1}]},"b":1}');
  });
});
