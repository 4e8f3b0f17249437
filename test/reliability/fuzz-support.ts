/**
 * Shared pieces of the input-fuzzing suites (issue 8 part 1): how many runs, a raw HTTP call, the
 * check that an answer is a clean 4xx `{code, message, field?}`, and generators of bad bodies.
 *
 * FUZZ_RUNS (default 40) is the number of generated bodies per endpoint and property in one run;
 * `FUZZ_RUNS=1000 npx vitest run test/reliability` is the on-demand count (docs/reliability.md).
 * FUZZ_SEED replays a run (fast-check prints the seed of a failure).
 */

import fc from 'fast-check';
import { expect } from 'vitest';
import { ERROR_CODES } from '../../protocol/errors.ts';

export const FUZZ_RUNS = Math.max(1, Number(process.env['FUZZ_RUNS'] ?? 40));
export const FUZZ_SEED = process.env['FUZZ_SEED'] === undefined ? undefined : Number(process.env['FUZZ_SEED']);
/** Per-test timeout: the 30 s default fits the default count; bigger counts get ~250 ms per run. */
export const FUZZ_TIMEOUT_MS = Math.max(30_000, FUZZ_RUNS * 250);
export const fuzzParams = (runs = FUZZ_RUNS): fc.Parameters<unknown> => ({
  numRuns: runs,
  ...(FUZZ_SEED === undefined ? {} : { seed: FUZZ_SEED }),
  endOnFailure: true,
});

/** How many requests each endpoint got in this run (printed at the end, quoted in docs/reliability.md). */
export const sent = new Map<string, number>();

export interface Answer {
  readonly status: number;
  readonly contentType: string;
  readonly text: string;
  readonly body: unknown;
}

export type RawBody = string | Uint8Array;

export async function send(
  label: string,
  url: string,
  method: string,
  body: RawBody | undefined,
  headers: Record<string, string> = {},
): Promise<Answer> {
  sent.set(label, (sent.get(label) ?? 0) + 1);
  const all: Record<string, string> = { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers };
  const response = await fetch(url, { method, headers: all, ...(body === undefined ? {} : { body: body as BodyInit }) });
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: response.status, contentType: response.headers.get('content-type') ?? '', text, body: parsed };
}

/** A 4xx with a JSON `{code, message, field?}` whose code is in ERROR_CODES and maps to this status. */
export function expectCleanError(answer: Answer, context: string, options: { newerVersion?: boolean } = {}): void {
  const where = `${context} → HTTP ${answer.status} ${answer.text.slice(0, 300)}`;
  expect(answer.status, where).toBeGreaterThanOrEqual(400);
  // A version header newer than the server's is the one documented 5xx a client can cause (501 version_not_implemented).
  if (options.newerVersion && answer.status === 501)
    expect((answer.body as Record<string, unknown>)['code'], where).toBe('version_not_implemented');
  else expect(answer.status, where).toBeLessThan(500);
  expect(answer.contentType, where).toMatch(/application\/json/);
  expect(answer.body, where).toBeTypeOf('object');
  const body = answer.body as Record<string, unknown>;
  expect(Object.hasOwn(ERROR_CODES, body['code'] as string), where).toBe(true);
  expect(ERROR_CODES[body['code'] as keyof typeof ERROR_CODES].status, where).toBe(answer.status);
  expect(body['message'], where).toBeTypeOf('string');
  for (const key of Object.keys(body)) expect(['code', 'message', 'field'], where).toContain(key);
}

/** Shows a body in a failure message without pasting 300 KB. */
export function show(body: RawBody | undefined): string {
  if (body === undefined) return '(no body)';
  const text = typeof body === 'string' ? body : `bytes ${Buffer.from(body).toString('hex', 0, 80)}`;
  return text.length > 200 ? `${text.slice(0, 200)}… (${text.length} chars)` : text;
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
export { isObject };

/** Values of every JSON type and some that only exist in JS (undefined drops the key, NaN becomes null). */
export const anyValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.anything({ maxDepth: 3, maxKeys: 4, withNullPrototype: true }),
  fc.constantFrom(
    null,
    true,
    false,
    0,
    -1,
    1.5,
    -0,
    Number.NaN,
    Infinity,
    -Infinity,
    Number.MAX_SAFE_INTEGER + 2,
    1e308,
    '',
    ' ',
    '\u0000',
    '\ud800',
    '💥',
    [],
    {},
    [[]],
    { __proto__: null },
  ),
  fc.string({ minLength: 1000, maxLength: 20_000 }),
  fc.integer({ min: 1000, max: 70_000 }).map((n) => 'x'.repeat(n)),
);

/** Extra keys, including the ones prototype pollution relies on. */
export const extraKeys: fc.Arbitrary<Record<string, unknown>> = fc.dictionary(
  fc.oneof(
    fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', 'valueOf', ''),
    fc.string({ maxLength: 12 }),
  ),
  anyValue,
  { maxKeys: 3 },
);

/**
 * An object body that breaks at least one rule: some fields get a value their check refuses (a
 * wrong type, a huge string, NaN, an out-of-range number), some required fields go missing, and
 * extra keys (`__proto__`, `constructor`…) may ride along. `accepts[field]` tells whether the
 * endpoint would take a value; a draw that breaks nothing is thrown away.
 */
export function badObject(
  valid: Record<string, unknown>,
  accepts: Record<string, (value: unknown) => boolean>,
  required: readonly string[],
): fc.Arbitrary<Record<string, unknown>> {
  const fields = Object.keys(accepts);
  return fc
    .record({
      broken: fc.subarray(fields),
      values: fc.array(anyValue, { minLength: fields.length, maxLength: fields.length }),
      missing: fc.subarray([...required]),
      extra: extraKeys,
    })
    .map(({ broken, values, missing, extra }) => {
      const body: Record<string, unknown> = {};
      for (const [key, value] of Object.entries(extra))
        Object.defineProperty(body, key, { value, enumerable: true, writable: true, configurable: true });
      for (const [key, value] of Object.entries(valid)) body[key] = value;
      broken.forEach((field, i) => {
        body[field] = values[fields.indexOf(field)] ?? values[i];
      });
      for (const field of missing) delete body[field];
      return body;
    })
    .filter((body) => {
      // What travels is the JSON text: judge the value the server will parse.
      const parsed = JSON.parse(JSON.stringify(body)) as Record<string, unknown>;
      const accepted = fields.every((field) => accepts[field]!(parsed[field])) && required.every((field) => Object.hasOwn(parsed, field));
      return !accepted;
    });
}

/**
 * Byte sequences that are not UTF-8 (RFC 3629): a byte never used, an overlong NUL, a surrogate,
 * a truncated sequence, a lone continuation, a 5-byte form, a code point past U+10FFFF.
 */
export const INVALID_UTF8: ReadonlyArray<{ name: string; bytes: readonly number[] }> = [
  { name: '0xFF', bytes: [0xff] },
  { name: 'overlong NUL', bytes: [0xc0, 0x80] },
  { name: 'surrogate U+D800', bytes: [0xed, 0xa0, 0x80] },
  { name: 'truncated 3-byte', bytes: [0xe2, 0x82] },
  { name: 'lone continuation', bytes: [0x80] },
  { name: '5-byte form', bytes: [0xf8, 0x88, 0x80, 0x80, 0x80] },
  { name: 'past U+10FFFF', bytes: [0xf4, 0x90, 0x80, 0x80] },
];

const MARK = '\u{e000}mark\u{e000}';

/**
 * The valid body with `before` + `bytes` + `after` appended to one of its string values: one
 * body per string value (nested ones too), and one with an extra `"note"` key holding them (an
 * ignored key, or a body with no string value). Everything else about each is acceptable, so
 * only the bytes can make it a 4xx.
 */
export function invalidUtf8InStrings(valid: Record<string, unknown>, bytes: readonly number[], before = '', after = ''): Uint8Array[] {
  const insert = Buffer.concat([Buffer.from(before), Buffer.from(bytes), Buffer.from(after)]);
  const withBytes = (marked: string) => {
    const [head, tail] = marked.split(MARK) as [string, string];
    return new Uint8Array(Buffer.concat([Buffer.from(head), insert, Buffer.from(tail)]));
  };
  const bodies: Uint8Array[] = [];
  for (let target = 0; ; target++) {
    let seen = 0;
    const marked = JSON.stringify(valid, (_key, value: unknown) =>
      typeof value === 'string' && seen++ === target ? `${value}${MARK}` : value,
    );
    if (!marked.includes(MARK)) break;
    bodies.push(withBytes(marked));
  }
  const json = JSON.stringify(valid);
  bodies.push(withBytes(json === '{}' ? `{"note":"${MARK}"}` : json.replace(/}$/, `,"note":"${MARK}"}`)));
  return bodies;
}

/** Texts no JSON parser accepts, or JSON documents no endpoint accepts, whatever its schema. */
export function hostileTexts(
  valid: Record<string, unknown>,
  poison: (inner: string) => string,
  limit: number,
  hasRequiredFields: boolean,
): Array<{ name: string; body: RawBody }> {
  const json = JSON.stringify(valid);
  const withField = (raw: string) => (json === '{}' ? `{${raw}}` : json.replace(/}$/, `,${raw}}`));
  const bytes = (...parts: Array<string | number[]>) =>
    Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p) : Buffer.from(p))));
  // Unknown keys are ignored where every field is optional: there, those bodies must be poisoned too.
  const strict = (name: string, body: string) => (hasRequiredFields ? [{ name, body }] : []);
  return [
    ...strict('objects 10,000 deep', '{"a":'.repeat(10_000) + '1' + '}'.repeat(10_000)),
    ...strict('__proto__ carrying a valid body', `{"__proto__":${json}}`),
    ...strict('constructor and __proto__ carrying a valid body', `{"constructor":{"prototype":${json}},"__proto__":${json}}`),
    { name: 'NaN', body: 'NaN' },
    { name: 'raw NaN field', body: withField('"nan":NaN') },
    { name: 'raw Infinity field', body: withField('"inf":Infinity') },
    { name: 'raw -Infinity field', body: withField('"inf":-Infinity') },
    { name: 'raw undefined', body: withField('"u":undefined') },
    { name: 'hex number', body: withField('"n":0x10') },
    { name: 'single quotes', body: "{'a':1}" },
    { name: 'trailing comma', body: withField('"a":1,') },
    { name: 'comment', body: `/* hi */${json}` },
    { name: 'truncated', body: json.slice(0, -1) },
    { name: 'two documents', body: `${json}${json}` },
    { name: 'NUL bytes', body: bytes([0, 0, 0]) },
    { name: 'invalid UTF-8 outside strings', body: bytes('{', [0xff, 0xfe], '}') },
    { name: 'invalid UTF-8 overlong', body: bytes([0xc0, 0x80, 0xed, 0xa0, 0x80]) },
    { name: 'lone continuation bytes', body: bytes('{"a":', [0x80, 0x81], '}') },
    { name: 'UTF-16 BOM', body: bytes([0xfe, 0xff], json) },
    ...INVALID_UTF8.flatMap(({ name, bytes: sequence }) =>
      invalidUtf8InStrings(valid, sequence, 'a', 'b').map((body, i) => ({
        name: `invalid UTF-8 inside a string value (${i + 1}): ${name}`,
        body,
      })),
    ),
    { name: 'arrays 10,000 deep', body: '['.repeat(10_000) + ']'.repeat(10_000) },
    { name: 'poisoned field 10,000 deep', body: poison('['.repeat(10_000) + ']'.repeat(10_000)) },
    { name: 'poisoned field, objects 10,000 deep', body: poison('{"a":'.repeat(10_000) + '1' + '}'.repeat(10_000)) },
    { name: 'unclosed 100,000 deep', body: '['.repeat(100_000) },
    { name: 'constructor.prototype', body: poison('{"constructor":{"prototype":{"polluted":true}},"__proto__":{"polluted":true}}') },
    { name: 'a number', body: '42' },
    { name: 'a string', body: '"hello"' },
    { name: 'an array', body: `[${json}]` },
    { name: 'oversized (limit + 1 KiB of padding)', body: withField(`"pad":"${'p'.repeat(limit + 1024)}"`) },
    { name: 'oversized non-JSON', body: 'z'.repeat(limit + 1) },
    { name: 'oversized 2 MiB', body: withField(`"pad":"${'p'.repeat(2 * 1024 * 1024)}"`) },
  ];
}
