/**
 * The opt-in annotation: which parameters are moderated (only annotated strings, reached through
 * `properties`), annotations refused where they would silently do nothing, and the values
 * picked out of a call.
 */

import { describe, expect, it } from 'vitest';
import { MODERATED_KEYWORD } from '../../protocol/moderation.ts';
import { moderated, moderatedFieldPointers, moderatedValues } from './moderated-fields.ts';

describe('moderatedFieldPointers', () => {
  it('finds annotated string properties, nested objects included, and nothing else', () => {
    const schema = {
      type: 'object',
      properties: {
        prompt: moderated({ type: 'string' }),
        negative: { type: 'string' }, // not opted in
        quiet: { type: 'string', [MODERATED_KEYWORD]: false },
        style: { type: 'object', properties: { 'a/b~c': moderated({ type: ['string', 'null'] }), seed: { type: 'number' } } },
        examples: { type: 'string', default: 'x', examples: [{ [MODERATED_KEYWORD]: true }] }, // data, not a schema
      },
    };
    expect(moderatedFieldPointers(schema)).toEqual(['/prompt', '/style/a~1b~0c']);
    expect(moderatedFieldPointers(undefined)).toEqual([]);
    expect(moderatedFieldPointers({ type: 'object' })).toEqual([]);
  });

  it('refuses annotations that would do nothing or are not on a string', () => {
    expect(() => moderatedFieldPointers({ type: 'object', properties: { n: moderated({ type: 'number' }) } })).toThrow(
      /declare "type": "string"/,
    );
    expect(() => moderatedFieldPointers({ type: 'object', properties: { s: { type: 'string', [MODERATED_KEYWORD]: 'yes' } } })).toThrow(
      /must be true or false/,
    );
    expect(() => moderatedFieldPointers(moderated({ type: 'object' }))).toThrow(/params object itself/);
    expect(() =>
      moderatedFieldPointers({ type: 'object', properties: { tags: { type: 'array', items: moderated({ type: 'string' }) } } }),
    ).toThrow(/not array items/);
    expect(() => moderatedFieldPointers({ type: 'object', oneOf: [{ properties: { s: moderated({ type: 'string' }) } }] })).toThrow(
      /oneOf/,
    );
  });
});

describe('moderatedValues', () => {
  it('picks present, non-blank strings by pointer', () => {
    const pointers = ['/prompt', '/style/a~1b~0c', '/missing', '/style/deeper/x'];
    expect(moderatedValues({ prompt: 'a cat', style: { 'a/b~c': 'red' } }, pointers)).toEqual({
      '/prompt': 'a cat',
      '/style/a~1b~0c': 'red',
    });
    expect(moderatedValues({ prompt: '   ', style: { 'a/b~c': null } }, pointers)).toEqual({});
    expect(moderatedValues({ prompt: 42, style: 'flat' }, pointers)).toEqual({});
    // Inherited properties are not parameters.
    expect(moderatedValues(Object.create({ prompt: 'inherited' }) as object, ['/prompt'])).toEqual({});
  });
});
