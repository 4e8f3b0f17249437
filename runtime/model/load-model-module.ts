/**
 * Imports a model module by path (TypeScript or JavaScript) and validates its default export.
 * TypeScript modules are loaded through tsx's ESM hooks, registered once.
 */

import { existsSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { ModelDefinition } from './definition.ts';
import { validateModelDefinition } from './validate-definition.ts';

export class ModelModuleError extends Error {
  override readonly name = 'ModelModuleError';
}

let tsxRegistered = false;

/**
 * @param options.importUrl how to turn the module's file URL into what is imported (`arclight dev`
 * adds a version query there so each save is a fresh module; see runtime/dev/fresh-import.ts).
 */
export async function loadModelModule(
  path: string,
  options: { readonly importUrl?: (fileUrl: string) => string } = {},
): Promise<ModelDefinition<unknown>> {
  const file = modelModuleFile(path);
  await registerTypeScriptLoader(file);
  let module: { default?: unknown };
  try {
    const url = pathToFileURL(file).href;
    module = (await import(options.importUrl ? options.importUrl(url) : url)) as { default?: unknown };
  } catch (error) {
    throw new ModelModuleError(`Model module ${path} failed to import: ${(error as Error).message}`, { cause: error });
  }
  if (module.default === undefined) {
    throw new ModelModuleError(`${path} has no default export; write \`export default defineModel({...})\`.`);
  }
  return validateModelDefinition(module.default, path);
}

/** Lets Node import `file` when it is TypeScript: tsx's ESM hooks, registered once (vitest has its own). */
export async function registerTypeScriptLoader(file: string): Promise<void> {
  if (/\.(c|m)?tsx?$/.test(file) && !tsxRegistered && !process.env['VITEST']) {
    const { register } = await import('tsx/esm/api');
    register();
    tsxRegistered = true;
  }
}

/** The file a model module path names: the path itself, or a folder's index.ts / index.js. */
export function modelModuleFile(path: string): string {
  let file = resolve(path);
  if (existsSync(file) && statSync(file).isDirectory()) {
    const index = ['index.ts', 'index.mts', 'index.js', 'index.mjs'].map((n) => resolve(file, n)).find((f) => existsSync(f));
    if (!index) throw new ModelModuleError(`${path} is a folder without an index.ts or index.js model module.`);
    file = index;
  }
  if (!existsSync(file)) throw new ModelModuleError(`Model module not found: ${path} (resolved to ${file}).`);
  return file;
}
