/**
 * `arclight dev <module>`: serves a model like `arclight serve`, and on every save re-imports the
 * module (with its local imports) and swaps the new version in (`Runtime.reloadModel`) without
 * restarting the process — the open session keeps running when its tracks are unchanged. Load
 * errors (syntax, imports, an invalid definition, a throwing `load()`) are printed with file and
 * line and kept for the playground (`GET /dev/status`, `model_load` events); the previous version
 * keeps serving. If the first version cannot be loaded, the server starts anyway and waits for a fix.
 */

import { existsSync, statSync } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import type { ModelLoadErrorInfo } from '../../protocol/session-logs.ts';
import type { ModelDefinition } from '../model/definition.ts';
import { formatLoadError } from '../model/load-error.ts';
import { startRuntime, type Runtime, type RuntimeOptions } from '../server.ts';
import { importFreshModel } from './fresh-import.ts';
import { ModuleWatcher } from './module-watcher.ts';

export interface DevServer {
  readonly runtime: Runtime;
  close(): Promise<void>;
}

export interface DevServerOptions {
  /** The model module (file or folder), as given on the command line. */
  readonly modulePath: string;
  /** Everything `startRuntime` takes but the model. */
  readonly runtime: Omit<RuntimeOptions, 'model' | 'dev'>;
  /** Where the one-line reports go (the terminal). */
  readonly print: (line: string) => void;
  /** Changes closer together than this are one reload. Default 100 ms. */
  readonly debounceMs?: number;
}

export async function startDevServer(options: DevServerOptions): Promise<DevServer> {
  const { print } = options;
  const folder = watchedFolder(options.modulePath);
  const first = await importOrError(options.modulePath);
  const model = 'definition' in first ? first.definition : unloadedModel(options.modulePath, first.error);
  const runtime = await startRuntime({ ...options.runtime, model: model as never, dev: true });
  reportLoadProgress(runtime, print);
  await runtime.loaded;
  if (runtime.lastLoadError) printError(print, runtime.lastLoadError, 'nothing serves until a save fixes it');

  let reloading: Promise<void> | undefined;
  let again = false;
  const reload = async (): Promise<void> => {
    const started = performance.now();
    const next = await importOrError(options.modulePath);
    if ('error' in next) {
      printError(print, runtime.reportModelError(next.error));
      return;
    }
    const outcome = await runtime.reloadModel(next.definition as never);
    if (!outcome.ok) {
      printError(print, outcome.error);
      return;
    }
    const ms = Math.round(performance.now() - started);
    const note =
      outcome.sessions === 'ended'
        ? ' (its tracks or fps changed: the open session ended, clients start a new one)'
        : outcome.sessions === 'kept'
          ? ' (session kept)'
          : '';
    print(`arclight: reloaded ${next.definition.name} in ${ms} ms${note}`);
  };
  // One reload at a time; saves during one fold into a single reload after it.
  const schedule = (): void => {
    if (reloading) {
      again = true;
      return;
    }
    reloading = reload().finally(() => {
      reloading = undefined;
      if (again) {
        again = false;
        schedule();
      }
    });
  };
  const watcher = new ModuleWatcher(folder, schedule, options.debounceMs);
  print(`arclight: watching ${folder} for changes`);

  return {
    runtime,
    async close() {
      watcher.close();
      await reloading;
      await runtime.close();
    },
  };
}

async function importOrError(path: string): Promise<{ definition: ModelDefinition<unknown> } | { error: unknown }> {
  try {
    return { definition: await importFreshModel(path) };
  } catch (error) {
    return { error };
  }
}

/**
 * What serves when the first version cannot be imported: a model whose load() fails with the
 * import's error, so the runtime reports it (and refuses sessions) until a save fixes it.
 */
function unloadedModel(path: string, error: unknown): ModelDefinition<unknown> {
  const name =
    basename(resolve(path))
      .replace(/\.[cm]?[jt]sx?$/, '')
      .toLowerCase()
      .replace(/[^a-z0-9._-]+/g, '-')
      .replace(/^[^a-z0-9]+/, '') || 'model';
  return {
    name: name.slice(0, 64),
    fps: 30,
    tracks: [],
    load: () => {
      throw error;
    },
  };
}

function watchedFolder(path: string): string {
  const full = resolve(path);
  return existsSync(full) && statSync(full).isDirectory() ? full : dirname(full);
}

function printError(
  print: (line: string) => void,
  error: ModelLoadErrorInfo,
  meanwhile = 'the previous version keeps serving; save to retry',
): void {
  print(`arclight: model failed to load (${meanwhile})\n${formatLoadError(error)}`);
}

/** A line per ~10 % of `load()`'s reported progress. */
function reportLoadProgress(runtime: Runtime, print: (line: string) => void): void {
  let shownTenth = -1;
  const seen = (event: Parameters<Parameters<Runtime['events']['subscribe']>[0]>[0]): void => {
    if (event.type !== 'model_load') return;
    if (event.phase !== 'loading') {
      shownTenth = -1;
      return;
    }
    if (event.progress === undefined) return;
    const tenth = Math.floor(event.progress * 10);
    if (tenth <= shownTenth) return;
    shownTenth = tenth;
    print(`arclight: loading ${Math.round(event.progress * 100)} %${event.message ? ` (${event.message})` : ''}`);
  };
  // The first load started inside startRuntime: catch up on what it already reported.
  for (const event of runtime.events.since(0).events) seen(event);
  runtime.events.subscribe(seen);
}
