/** Reads and validates a JSON request body against a protocol schema. */

import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import type { Context } from 'hono';
import { ArclightError } from '../../protocol/errors.ts';
import { describeSchemaError } from '../model/command-router.ts';
import { readBodyText } from '../../server-kit/body-limit.ts';

const ajv = new Ajv2020({ strict: false });
const compiled = new WeakMap<object, ValidateFunction>();

/** Bodies above this are refused before parsing (an SDP offer is a few KB). */
export const MAX_BODY_BYTES = 256 * 1024;

/**
 * Parses the body as JSON and checks it against `schema`.
 * @param optional an absent or empty body reads as `{}` (2.9.0 posts `/stop_session` with none).
 */
export async function readJsonBody<T>(c: Context, schema: object, optional = false): Promise<T> {
  const text = await readBodyText(c.req.raw, MAX_BODY_BYTES);
  let value: unknown;
  if (text.trim() === '') {
    if (!optional) throw new ArclightError('invalid_request', 'A JSON body is required.');
    value = {};
  } else {
    try {
      value = JSON.parse(text);
    } catch (error) {
      throw new ArclightError('invalid_json', `The body is not valid JSON: ${(error as Error).message}`);
    }
  }
  if (value === null && optional) value = {};
  let validate = compiled.get(schema);
  if (!validate) {
    validate = ajv.compile(schema);
    compiled.set(schema, validate);
  }
  if (!validate(value)) {
    const { message, field } = describeSchemaError(validate.errors, 'the body');
    throw new ArclightError('invalid_request', `Invalid body: ${message}.`, { field });
  }
  return value as T;
}
