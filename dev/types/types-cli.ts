/**
 * `arclight types --from <url | module> [--name TypeName] [--format d.ts|ts]` — prints TypeScript
 * types for a typed client (`new ArclightClient<PatternModel>(...)`) on stdout, read from a
 * runtime's `/schema` or from a model module. dev/cli.ts routes here.
 *
 * Why dev/: it is a developer tool run on a workstation or in a build, like `arclight stack`; it
 * is part of no running process (runtime, coordinator or client), and reads the runtime's model
 * code only to build the document a runtime would serve.
 */

import { parseArgs } from 'node:util';
import { renderModelTypes, isValidTypeName, type DeclarationFormat } from './declaration-writer.ts';
import { modelSchemaFromModule, modelSchemaFromOpenApi, NotAnArclightSchemaError, type ModelSchema } from './model-schema.ts';

const USAGE = `Usage: arclight types --from <url | model-module> [--name TypeName] [--format d.ts|ts]

Prints TypeScript types for a typed Arclight client on stdout:
  arclight types --from http://localhost:8080/schema > model.d.ts
  arclight types --from models/examples/pattern --format ts > pattern-model.ts

The output declares one interface — the model's commands (params and reply), the messages it
declares, and its schema hash — for new ArclightClient<PatternModel>({ ..., schemaHash }).
With --format ts it also exports the hash as a value (import { schemaHash } from './pattern-model.ts');
a .d.ts cannot carry values, so there the hash is written out for you to pass.

Options:
  --from <source>     a runtime's /schema URL (http:// or https://), or a model module path
                      (a .ts/.js file, or a folder with index.ts)
  --name <TypeName>   the interface's name (default: the model name in PascalCase + "Model")
  --format <format>   d.ts (default: types only) or ts (types and the schemaHash constant)
  -h, --help          show this help

Exit codes: 0 printed; 1 the source failed (unreachable, not 200, not an Arclight schema,
the module did not load); 2 bad usage.`;

/** How long a /schema request may take (a runtime answers at once; a wrong host should not hang a build). */
const FETCH_TIMEOUT_MS = 10_000;

class UsageError extends Error {}

/** `--help`: print the usage and succeed. */
class HelpRequested extends Error {}

/** A source that could not be read, with the message to print. */
class SourceError extends Error {}

export async function main(argv: readonly string[]): Promise<number> {
  let options: { from: string; name: string | undefined; format: DeclarationFormat };
  try {
    options = parseOptions(argv);
  } catch (error) {
    if (error instanceof HelpRequested) {
      process.stdout.write(`${USAGE}\n`);
      return 0;
    }
    process.stderr.write(`arclight types: ${(error as Error).message}\n\n${USAGE}\n`);
    return 2;
  }
  let schema: ModelSchema;
  try {
    schema = /^https?:\/\//i.test(options.from) ? await schemaFromUrl(options.from) : await schemaFromModule(options.from);
  } catch (error) {
    process.stderr.write(`arclight types: ${(error as Error).message}\n`);
    return 1;
  }
  process.stdout.write(
    renderModelTypes(schema, { format: options.format, ...(options.name === undefined ? {} : { typeName: options.name }) }),
  );
  return 0;
}

function parseOptions(argv: readonly string[]): { from: string; name: string | undefined; format: DeclarationFormat } {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      allowPositionals: true,
      options: {
        from: { type: 'string' },
        name: { type: 'string' },
        format: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const { values, positionals } = parsed;
  if (values.help) throw new HelpRequested();
  const extra = positionals.filter((p) => p !== 'types');
  if (extra.length > 0) throw new UsageError(`unexpected argument "${extra[0]}" (the source goes after --from)`);
  if (values.from === undefined || values.from === '') throw new UsageError('--from <url | model-module> is required');
  if (values.name !== undefined && !isValidTypeName(values.name))
    throw new UsageError(`--name "${values.name}" is not a TypeScript identifier`);
  const format = values.format ?? 'd.ts';
  if (format !== 'd.ts' && format !== 'ts') throw new UsageError(`--format must be "d.ts" or "ts"; got "${format}"`);
  return { from: values.from, name: values.name, format };
}

async function schemaFromUrl(url: string): Promise<ModelSchema> {
  let response: Response;
  try {
    response = await fetch(url, { headers: { accept: 'application/json' }, signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) });
  } catch (error) {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    const reason =
      (error as Error).name === 'TimeoutError'
        ? `no answer within ${FETCH_TIMEOUT_MS / 1000} s`
        : (cause?.code ?? cause?.message ?? (error as Error).message);
    throw new SourceError(`cannot reach ${url}: ${reason}`);
  }
  if (response.status !== 200) {
    await response.body?.cancel();
    throw new SourceError(
      `${url} answered ${response.status} ${response.statusText}; expected 200 with the runtime's OpenAPI document (GET /schema)`,
    );
  }
  let document: unknown;
  try {
    document = await response.json();
  } catch {
    throw new SourceError(`${url} did not answer JSON; is it a runtime's /schema?`);
  }
  try {
    return modelSchemaFromOpenApi(document);
  } catch (error) {
    if (error instanceof NotAnArclightSchemaError) throw new SourceError(`${url}: ${error.message}`);
    throw error;
  }
}

async function schemaFromModule(path: string): Promise<ModelSchema> {
  try {
    return await modelSchemaFromModule(path);
  } catch (error) {
    // ModelModuleError / ModelDefinitionError messages already say what and where.
    throw new SourceError(`cannot load the model module: ${(error as Error).message}`);
  }
}
