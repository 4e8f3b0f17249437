/**
 * Which command parameters are moderated: the `x-arclight-moderated` annotation in a command's
 * params schema, found once when the model loads, and the values it picks out of each call.
 * Only these values ever reach a moderator.
 */

import { MODERATED_KEYWORD } from '../../protocol/moderation.ts';

/**
 * Marks a free-text string parameter for moderation (off unless marked).
 *
 * @example
 * ```ts
 * params: { type: 'object', properties: { prompt: moderated({ type: 'string', maxLength: 500 }) }, required: ['prompt'] } as const
 * ```
 */
export function moderated<const S extends { readonly [keyword: string]: unknown }>(
  schema: S,
): S & { readonly 'x-arclight-moderated': true } {
  return { ...schema, [MODERATED_KEYWORD]: true } as S & { readonly 'x-arclight-moderated': true };
}

/**
 * The JSON pointers of the moderated string properties in a params schema, following
 * `properties` into nested objects. Array items and `$ref`/`allOf`/`oneOf`/`anyOf` branches are
 * not followed: an annotation there is an error, so an author never believes a field is checked
 * when it is not.
 * @throws TypeError for an annotation that is not a boolean, or on something that is not a string property.
 */
export function moderatedFieldPointers(paramsSchema: unknown): string[] {
  const pointers: string[] = [];
  visit(paramsSchema, '', pointers);
  return pointers;
}

/** Data, not subschemas: an annotation-looking value inside these is the author's data. */
const DATA_KEYWORDS = new Set(['default', 'const', 'enum', 'examples']);

function visit(schema: unknown, pointer: string, out: string[]): void {
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) return;
  const node = schema as Record<string, unknown>;
  const flag = node[MODERATED_KEYWORD];
  if (flag !== undefined && typeof flag !== 'boolean') {
    throw new TypeError(`${pointer === '' ? 'the params schema' : `"${pointer}"`}: "${MODERATED_KEYWORD}" must be true or false`);
  }
  if (flag === true) {
    if (pointer === '') throw new TypeError('the params object itself cannot be moderated; mark its free-text string properties');
    if (!allowsString(node['type']))
      throw new TypeError(`"${pointer}": "${MODERATED_KEYWORD}" marks free-text string parameters; declare "type": "string"`);
    out.push(pointer);
  }
  for (const [keyword, value] of Object.entries(node)) {
    if (keyword === 'properties' && typeof value === 'object' && value !== null) {
      for (const [name, child] of Object.entries(value)) visit(child, `${pointer}/${escapePointerSegment(name)}`, out);
    } else if (!DATA_KEYWORDS.has(keyword)) {
      refuseAnnotationWithin(value, pointer === '' ? keyword : `${pointer} ${keyword}`);
    }
  }
}

/** Other subschemas (items, allOf, $defs, …) are not followed; an annotation there is refused. */
function refuseAnnotationWithin(value: unknown, where: string): void {
  if (typeof value !== 'object' || value === null) return;
  if (!Array.isArray(value) && (value as Record<string, unknown>)[MODERATED_KEYWORD] === true) {
    throw new TypeError(
      `"${MODERATED_KEYWORD}" under ${where}: only properties reached through "properties" are moderated (not array items, $ref targets or schema combinators)`,
    );
  }
  for (const [key, child] of Object.entries(value)) if (!DATA_KEYWORDS.has(key)) refuseAnnotationWithin(child, where);
}

function allowsString(type: unknown): boolean {
  return type === 'string' || (Array.isArray(type) && type.includes('string'));
}

/**
 * The moderated values present in validated params: strings that are not blank, by pointer. A
 * blank string says nothing a moderator could object to, so it does not make the command wait.
 */
export function moderatedValues(params: unknown, pointers: readonly string[]): Record<string, string> {
  const values: Record<string, string> = {};
  for (const pointer of pointers) {
    let value: unknown = params;
    for (const segment of pointer.slice(1).split('/')) {
      if (typeof value !== 'object' || value === null || Array.isArray(value)) {
        value = undefined;
        break;
      }
      const key = unescapePointerSegment(segment);
      value = Object.hasOwn(value, key) ? (value as Record<string, unknown>)[key] : undefined;
    }
    if (typeof value === 'string' && value.trim() !== '') values[pointer] = value;
  }
  return values;
}

/** RFC 6901: `~` → `~0`, `/` → `~1`. */
function escapePointerSegment(name: string): string {
  return name.replaceAll('~', '~0').replaceAll('/', '~1');
}

function unescapePointerSegment(segment: string): string {
  return segment.replaceAll('~1', '/').replaceAll('~0', '~');
}
