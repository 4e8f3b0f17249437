import { describe, expect, it } from 'vitest';
import { schemaToTs } from './schema-to-ts.ts';

/** The type on one line, for compact expectations. */
const oneLine = (schema: unknown): string => schemaToTs(schema).replace(/\s*\n\s*/g, ' ');

describe('schemaToTs', () => {
  it('primitives, and unknown for an empty or true schema', () => {
    expect(oneLine({ type: 'string' })).toBe('string');
    expect(oneLine({ type: 'number' })).toBe('number');
    expect(oneLine({ type: 'integer' })).toBe('number');
    expect(oneLine({ type: 'boolean' })).toBe('boolean');
    expect(oneLine({ type: 'null' })).toBe('null');
    expect(oneLine({})).toBe('unknown');
    expect(oneLine(true)).toBe('unknown');
    expect(oneLine(false)).toBe('never');
  });

  it('objects: required and optional members, quoted keys, descriptions as TSDoc', () => {
    expect(
      schemaToTs({
        type: 'object',
        properties: { speed: { type: 'number', description: 'px per frame' }, 'max-size': { type: 'integer' } },
        required: ['speed'],
        additionalProperties: false,
      }),
    ).toBe('{\n  /** px per frame */\n  speed: number;\n  "max-size"?: number;\n}');
  });

  it('additionalProperties: open by default, typed by a schema, closed by false', () => {
    expect(oneLine({ type: 'object' })).toBe('{ [key: string]: unknown; }');
    expect(oneLine({ type: 'object', properties: { a: { type: 'string' } }, required: ['a'] })).toBe(
      '{ a: string; [key: string]: unknown; }',
    );
    expect(oneLine({ type: 'object', additionalProperties: { type: 'number' } })).toBe('{ [key: string]: number; }');
    // The index signature must admit the listed members' types too.
    expect(oneLine({ type: 'object', properties: { a: { type: 'string' } }, additionalProperties: { type: 'number' } })).toBe(
      '{ a?: string; [key: string]: number | string | undefined; }',
    );
    expect(oneLine({ type: 'object', additionalProperties: false })).toBe('Record<string, never>');
    // A required name with no property schema is still required.
    expect(oneLine({ type: 'object', required: ['id'], additionalProperties: false })).toBe('{ id: unknown; }');
  });

  it('enum and const become literal unions', () => {
    expect(oneLine({ enum: ['a', 'b', 3, null, true] })).toBe('"a" | "b" | 3 | null | true');
    expect(oneLine({ type: 'string', enum: ['x'] })).toBe('"x"');
    expect(oneLine({ const: 'on' })).toBe('"on"');
    expect(oneLine({ const: { a: 1 } })).toBe('unknown');
  });

  it('arrays and tuples', () => {
    expect(oneLine({ type: 'array', items: { type: 'string' } })).toBe('string[]');
    expect(oneLine({ type: 'array' })).toBe('unknown[]');
    expect(oneLine({ type: 'array', items: { type: ['string', 'number'] } })).toBe('(string | number)[]');
    expect(oneLine({ type: 'array', prefixItems: [{ type: 'number' }, { type: 'number' }], items: false })).toBe('[number, number]');
    expect(oneLine({ type: 'array', prefixItems: [{ type: 'string' }] })).toBe('[string, ...unknown[]]');
    expect(oneLine({ type: 'array', items: [{ type: 'string' }, { type: 'boolean' }] })).toBe('[string, boolean]');
    expect(oneLine({ type: 'array', items: { type: 'array', items: { type: 'integer' } } })).toBe('number[][]');
  });

  it('oneOf / anyOf unions, allOf intersections, type lists and nullable', () => {
    expect(oneLine({ oneOf: [{ type: 'string' }, { type: 'number' }] })).toBe('string | number');
    expect(
      oneLine({
        anyOf: [{ const: 'a' }, { type: 'object', properties: { b: { type: 'string' } }, required: ['b'], additionalProperties: false }],
      }),
    ).toBe('"a" | { b: string; }');
    expect(
      oneLine({
        allOf: [
          { type: 'object', properties: { a: { type: 'string' } }, required: ['a'] },
          { anyOf: [{ type: 'string' }, { type: 'number' }] },
        ],
      }),
    ).toBe('{ a: string; [key: string]: unknown; } & (string | number)');
    expect(oneLine({ type: ['string', 'null'] })).toBe('string | null');
    expect(oneLine({ type: 'string', nullable: true })).toBe('string | null');
    expect(oneLine({ type: ['object', 'null'], properties: { a: { type: 'number' } }, additionalProperties: false })).toBe(
      '{ a?: number; } | null',
    );
    // unknown absorbs a union.
    expect(oneLine({ anyOf: [{ type: 'string' }, {}] })).toBe('unknown');
  });

  it('what it cannot express is unknown, never narrower', () => {
    expect(oneLine({ $ref: '#/$defs/thing' })).toBe('unknown');
    expect(oneLine({ not: { type: 'string' } })).toBe('unknown');
    expect(oneLine({ type: 'wat' })).toBe('unknown');
    expect(oneLine('not a schema')).toBe('unknown');
  });

  it('nests with indentation', () => {
    expect(
      schemaToTs(
        {
          type: 'object',
          properties: { inner: { type: 'object', properties: { x: { type: 'number' } }, required: ['x'], additionalProperties: false } },
          required: ['inner'],
          additionalProperties: false,
        },
        { indent: '  ' },
      ),
    ).toBe('{\n    inner: {\n      x: number;\n    };\n  }');
  });
});
