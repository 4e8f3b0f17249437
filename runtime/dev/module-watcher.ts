/**
 * Watches a model's folder and calls back once per burst of changes (an editor's save is often
 * several writes: truncate, write, rename). Dependencies, build output, VCS and dot-files are
 * ignored — and not even watched: Node 20's recursive `fs.watch` on Linux would put an inotify
 * watch on every folder of a project's node_modules (thousands), so each kept folder gets its own
 * non-recursive watch instead, and folders created later are added as they appear.
 */

import { existsSync, readdirSync, statSync, watch, type FSWatcher } from 'node:fs';
import { join, relative, sep } from 'node:path';

/** Changes closer together than this are one reload. */
export const DEFAULT_DEBOUNCE_MS = 100;

const IGNORED_FOLDERS = new Set(['node_modules', 'dist', 'build', 'coverage']);

/** Whether a change to `relative` (a path inside the watched folder) can change the model. */
export function isWatchedPath(relative: string): boolean {
  return relative.split(/[\\/]/).every((part) => part !== '' && !part.startsWith('.') && !IGNORED_FOLDERS.has(part));
}

export class ModuleWatcher {
  readonly #root: string;
  readonly #onChange: (paths: readonly string[]) => void;
  readonly #debounceMs: number;
  /** One watch per folder, by absolute path. */
  readonly #watchers = new Map<string, FSWatcher>();
  readonly #changed = new Set<string>();
  #timer: NodeJS.Timeout | undefined;
  #closed = false;

  /** `onChange` gets the changed paths (relative to `folder`, `/`-separated) of the burst. */
  constructor(folder: string, onChange: (paths: readonly string[]) => void, debounceMs = DEFAULT_DEBOUNCE_MS) {
    this.#root = folder;
    this.#onChange = onChange;
    this.#debounceMs = debounceMs;
    this.#watchTree(folder);
  }

  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
    for (const watcher of this.#watchers.values()) watcher.close();
    this.#watchers.clear();
  }

  #watchTree(folder: string): void {
    if (this.#closed || this.#watchers.has(folder)) return;
    let watcher: FSWatcher;
    try {
      watcher = watch(folder, { persistent: true }, (_event, name) => this.#seen(folder, name === null ? undefined : String(name)));
    } catch {
      return; // gone already
    }
    // A watched folder that is deleted: its watch errors or goes quiet; drop it.
    watcher.on('error', () => this.#unwatch(folder));
    this.#watchers.set(folder, watcher);
    let entries: string[] = [];
    try {
      entries = readdirSync(folder, { withFileTypes: true })
        .filter((e) => e.isDirectory())
        .map((e) => e.name);
    } catch {
      return;
    }
    for (const name of entries) {
      const child = join(folder, name);
      if (isWatchedPath(relative(this.#root, child))) this.#watchTree(child);
    }
  }

  #unwatch(folder: string): void {
    for (const [path, watcher] of this.#watchers) {
      if (path === folder || path.startsWith(folder + sep)) {
        watcher.close();
        this.#watchers.delete(path);
      }
    }
  }

  #seen(folder: string, name: string | undefined): void {
    if (this.#closed) return;
    const full = name === undefined ? folder : join(folder, name);
    const path = relative(this.#root, full);
    if (path !== '' && !isWatchedPath(path)) return;
    if (name !== undefined) {
      if (!existsSync(full)) this.#unwatch(full);
      else if (statSync(full, { throwIfNoEntry: false })?.isDirectory()) this.#watchTree(full);
    }
    this.#changed.add(path.split(sep).join('/'));
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      const paths = [...this.#changed];
      this.#changed.clear();
      this.#onChange(paths);
    }, this.#debounceMs);
  }
}
