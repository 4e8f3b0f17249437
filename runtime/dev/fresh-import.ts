/**
 * Imports a new version of a model module on every call, with the local files it imports, while
 * packages stay the one copy already loaded. Node's ESM loader caches by URL, so each version is
 * imported under its own query (`?arclight-dev-version=N`); a resolve hook passes that query from
 * a module to what it imports by *path* (`./x.ts`, `../shared/y.ts`). Bare specifiers (`hono`,
 * `arclight/runtime`) resolve as always: a package re-evaluated per save would duplicate its
 * state (and the runtime's own classes, breaking `instanceof`).
 *
 * tsx's namespaced `tsImport` was the other candidate; it re-evaluates node_modules too, and adds
 * a loader hook per call.
 *
 * Memory: Node keeps every module it evaluated in its module map (there is no API to evict one),
 * so each version's module records stay; what the runtime holds of a version (its definition,
 * router, closures) is dropped when the next one serves. Module-level allocations (a big buffer at
 * the top of a file) therefore accumulate per save; allocate in `load()` instead.
 */

import { register } from 'node:module';
import type { ModelDefinition } from '../model/definition.ts';
import { loadModelModule, modelModuleFile, registerTypeScriptLoader } from '../model/load-model-module.ts';

export const VERSION_PARAM = 'arclight-dev-version';

/** The resolve hook, run in Node's loader thread (a data: URL: no file to build or ship). */
const HOOK_SOURCE = `
const PARAM = ${JSON.stringify(VERSION_PARAM)};
const BY_PATH = /^(\\.{1,2}\\/|\\/|file:)/;
export async function resolve(specifier, context, next) {
  const result = await next(specifier, context);
  const parent = context.parentURL;
  if (!parent || !BY_PATH.test(specifier) || !result.url.startsWith('file:') || result.url.includes('/node_modules/')) return result;
  const version = new URL(parent).searchParams.get(PARAM);
  if (version === null) return result;
  const url = new URL(result.url);
  url.searchParams.set(PARAM, version);
  return { ...result, url: url.href };
}
`;

let hookRegistered = false;
let nextVersion = 1;

/**
 * Imports the model module at `path` afresh (with its local imports) and validates its default
 * export. Throws ModelModuleError / ModelDefinitionError like loadModelModule.
 */
export async function importFreshModel(path: string): Promise<ModelDefinition<unknown>> {
  const file = modelModuleFile(path);
  if (!hookRegistered) {
    // tsx first: hooks registered later run first, and ours must see tsx's resolution of `.ts`.
    await registerTypeScriptLoader(file);
    register(`data:text/javascript,${encodeURIComponent(HOOK_SOURCE)}`);
    hookRegistered = true;
  }
  const version = nextVersion++;
  return loadModelModule(path, {
    importUrl: (url) => {
      const versioned = new URL(url);
      versioned.searchParams.set(VERSION_PARAM, String(version));
      return versioned.href;
    },
  });
}
