/**
 * A JSON Schema (draft 2020-12) as plain data. Kept structural on purpose: the protocol only
 * carries schemas; validation lives in the runtime (ajv).
 */
export type JsonSchema = { readonly [keyword: string]: unknown } | boolean;

/** JSON values as they travel on the data channel and in REST bodies. */
export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };
