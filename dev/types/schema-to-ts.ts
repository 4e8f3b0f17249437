/**
 * JSON Schema → TypeScript type text, for `arclight types`. json-schema-to-ts does the same at
 * the type level only (it cannot print a declaration file), so this is a small printer of its
 * own. It covers what model schemas use: objects (required/optional, additionalProperties),
 * enum/const, arrays and tuples, primitives, oneOf/anyOf unions, allOf intersections, `type`
 * lists and OpenAPI's `nullable`. What it cannot express (`$ref`, `not`, conditionals) becomes
 * `unknown` — never a type narrower than what the runtime accepts.
 */

type Schema = { readonly [keyword: string]: unknown } | boolean;

export interface SchemaToTsOptions {
  /** Indentation of the first line's surroundings (nested members get two more spaces). */
  readonly indent?: string;
}

/** How deep nested schemas are followed before giving up with `unknown` (guards cycles of plain data). */
const MAX_DEPTH = 32;

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/** The TypeScript type that a value valid against `schema` has. */
export function schemaToTs(schema: unknown, options: SchemaToTsOptions = {}): string {
  return convert(schema as Schema, options.indent ?? '', 0);
}

/** A property key as TypeScript source: bare when it is an identifier, else quoted. */
export function propertyKey(name: string): string {
  return IDENTIFIER.test(name) ? name : JSON.stringify(name);
}

/** A TSDoc comment (`/** … *\/`) for a description, or '' when there is none. */
export function docComment(description: unknown, indent: string): string {
  if (typeof description !== 'string' || description.trim() === '') return '';
  const lines = description.trim().replace(/\*\//g, '*\\/').split(/\r?\n/);
  if (lines.length === 1) return `${indent}/** ${lines[0]} */\n`;
  return `${indent}/**\n${lines.map((line) => `${indent} *${line === '' ? '' : ` ${line}`}`).join('\n')}\n${indent} */\n`;
}

function convert(schema: Schema, indent: string, depth: number): string {
  if (schema === true) return 'unknown';
  if (schema === false) return 'never';
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema) || depth > MAX_DEPTH) return 'unknown';
  return withNullable(schema, convertNonNull(schema, indent, depth));
}

/** OpenAPI 3.0's `nullable: true` adds null to whatever the schema says. */
function withNullable(schema: { readonly [keyword: string]: unknown }, type: string): string {
  if (schema['nullable'] !== true || type === 'unknown' || type === 'null') return type;
  return union([type, 'null']);
}

function convertNonNull(schema: { readonly [keyword: string]: unknown }, indent: string, depth: number): string {
  // A value is both const/enum-restricted and typed: the literals are the more precise answer.
  if ('const' in schema) return literal(schema['const']);
  if (Array.isArray(schema['enum'])) return schema['enum'].length === 0 ? 'never' : union(schema['enum'].map(literal));
  for (const keyword of ['oneOf', 'anyOf'] as const) {
    const options = schema[keyword];
    if (Array.isArray(options) && options.length > 0) {
      // Sibling keywords (e.g. a shared `type: 'object'`) constrain every option; the options
      // alone are precise enough for a type, and keep the printer simple.
      return union(options.map((option) => convert(option as Schema, indent, depth + 1)));
    }
  }
  const parts: string[] = [];
  const base = typedValue(schema, indent, depth);
  if (base !== undefined) parts.push(base);
  if (Array.isArray(schema['allOf'])) {
    for (const part of schema['allOf']) {
      const converted = convert(part as Schema, indent, depth + 1);
      if (converted !== 'unknown') parts.push(converted);
    }
  }
  if (parts.length === 0) return 'unknown';
  return parts.length === 1 ? parts[0]! : parts.map((part) => parenthesise(part, 'intersection')).join(' & ');
}

/** The type from `type` (one or a list), or from the keywords that imply one (properties, items). */
function typedValue(schema: { readonly [keyword: string]: unknown }, indent: string, depth: number): string | undefined {
  const declared = schema['type'];
  const types = Array.isArray(declared)
    ? declared.filter((t): t is string => typeof t === 'string')
    : typeof declared === 'string'
      ? [declared]
      : [];
  if (types.length === 0) {
    if ('properties' in schema || 'additionalProperties' in schema || 'required' in schema) return objectType(schema, indent, depth);
    if ('items' in schema || 'prefixItems' in schema) return arrayType(schema, indent, depth);
    return undefined;
  }
  return union(
    types.map((t) => {
      switch (t) {
        case 'string':
          return 'string';
        case 'number':
        case 'integer':
          return 'number';
        case 'boolean':
          return 'boolean';
        case 'null':
          return 'null';
        case 'object':
          return objectType(schema, indent, depth);
        case 'array':
          return arrayType(schema, indent, depth);
        default:
          return 'unknown';
      }
    }),
  );
}

function objectType(schema: { readonly [keyword: string]: unknown }, indent: string, depth: number): string {
  const properties = isPlainObject(schema['properties']) ? schema['properties'] : {};
  const required = new Set(Array.isArray(schema['required']) ? schema['required'].filter((r): r is string => typeof r === 'string') : []);
  const inner = `${indent}  `;
  const members: string[] = [];
  const memberTypes: string[] = [];
  for (const [name, propertySchema] of Object.entries(properties)) {
    const type = convert(propertySchema as Schema, inner, depth + 1);
    const optional = !required.has(name);
    memberTypes.push(optional ? union([type, 'undefined']) : type);
    const doc = isPlainObject(propertySchema) ? docComment(propertySchema['description'], inner) : '';
    members.push(`${doc}${inner}${propertyKey(name)}${optional ? '?' : ''}: ${type};`);
  }
  // A required name without a property schema still has to be there.
  for (const name of required) {
    if (name in properties) continue;
    members.push(`${inner}${propertyKey(name)}: unknown;`);
    memberTypes.push('unknown');
  }
  const additional = schema['additionalProperties'];
  if (additional !== false) {
    // JSON Schema allows unlisted properties unless told otherwise. TypeScript needs the index
    // signature to cover the listed properties' types too.
    const extra = additional === undefined || additional === true ? 'unknown' : convert(additional as Schema, inner, depth + 1);
    const indexType = extra === 'unknown' || memberTypes.length === 0 ? extra : union([extra, ...memberTypes]);
    members.push(`${inner}[key: string]: ${indexType};`);
  }
  // `{}` would accept any non-null value (a number, a string): a closed, empty object is this.
  if (members.length === 0) return 'Record<string, never>';
  return `{\n${members.join('\n')}\n${indent}}`;
}

function arrayType(schema: { readonly [keyword: string]: unknown }, indent: string, depth: number): string {
  const prefix = schema['prefixItems'];
  const items = schema['items'];
  if (Array.isArray(prefix)) {
    const elements = prefix.map((item) => convert(item as Schema, indent, depth + 1));
    const rest =
      items === false
        ? ''
        : `...${parenthesise(items === undefined || items === true ? 'unknown' : convert(items as Schema, indent, depth + 1))}[]`;
    return `[${[...elements, ...(rest ? [rest] : [])].join(', ')}]`;
  }
  // Draft 4–2019 tuples: `items` as a list.
  if (Array.isArray(items)) return `[${items.map((item) => convert(item as Schema, indent, depth + 1)).join(', ')}]`;
  const element = items === undefined ? 'unknown' : convert(items as Schema, indent, depth + 1);
  return `${parenthesise(element)}[]`;
}

function literal(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') return JSON.stringify(value);
  // Object and array constants: their structure is not worth a literal type.
  return 'unknown';
}

/** `a | b`, without duplicates; `unknown` absorbs everything. */
function union(types: readonly string[]): string {
  const unique = [...new Set(types)];
  if (unique.includes('unknown')) return 'unknown';
  const withoutNever = unique.filter((t) => t !== 'never');
  if (withoutNever.length === 0) return 'never';
  return withoutNever.length === 1 ? withoutNever[0]! : withoutNever.join(' | ');
}

/** Wraps a union (or, as an array element, an intersection) in parentheses where precedence needs it. */
function parenthesise(type: string, context: 'array' | 'intersection' = 'array'): string {
  const operators = topLevel(type);
  const needed = context === 'array' ? /[|&]/.test(operators) : operators.includes('|');
  return needed ? `(${type})` : type;
}

/** The type text with nested {...}, [...], (...) and string literals blanked out, to see its top-level operators. */
function topLevel(type: string): string {
  let depth = 0;
  let out = '';
  let inString = false;
  for (let i = 0; i < type.length; i++) {
    const ch = type[i]!;
    if (inString) {
      if (ch === '\\') i++;
      else if (ch === '"') inString = false;
      continue;
    }
    if (ch === '"') inString = true;
    else if (ch === '{' || ch === '[' || ch === '(') depth++;
    else if (ch === '}' || ch === ']' || ch === ')') depth--;
    else if (depth === 0) out += ch;
  }
  return out;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
