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

export async function loadModelModule(path: string): Promise<ModelDefinition<unknown>> {
  let file = resolve(path);
  if (existsSync(file) && statSync(file).isDirectory()) {
    const index = ['index.ts', 'index.mts', 'index.js', 'index.mjs'].map((n) => resolve(file, n)).find((f) => existsSync(f));
    if (!index) throw new ModelModuleError(`${path} is a folder without an index.ts or index.js model module.`);
    file = index;
  }
  if (!existsSync(file)) throw new ModelModuleError(`Model module not found: ${path} (resolved to ${file}).`);
  if (/\.(c|m)?tsx?$/.test(file) && !tsxRegistered && !process.env['VITEST']) {
    const { register } = await import('tsx/esm/api');
    register();
    tsxRegistered = true;
  }
  let module: { default?: unknown };
  try {
    module = (await import(pathToFileURL(file).href)) as { default?: unknown };
  } catch (error) {
    throw new ModelModuleError(`Model module ${path} failed to import: ${(error as Error).message}`, { cause: error });
  }
  if (module.default === undefined) {
    throw new ModelModuleError(`${path} has no default export; write \`export default defineModel({...})\`.`);
  }
  return validateModelDefinition(module.default, path);
}
