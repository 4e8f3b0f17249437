/**
 * Watches a model's folder and calls back once per burst of changes (an editor's save is often
 * several writes: truncate, write, rename). Dependencies, build output, VCS and dot-files are
 * ignored. Recursive `fs.watch` is native on macOS and Windows and emulated by Node (≥ 19.1) on
 * Linux, which is what arclight supports (Node 20).
 */

import { watch, type FSWatcher } from 'node:fs';
import { sep } from 'node:path';

/** Changes closer together than this are one reload. */
export const DEFAULT_DEBOUNCE_MS = 100;

const IGNORED_FOLDERS = new Set(['node_modules', 'dist', 'build', 'coverage']);

/** Whether a change to `relative` (a path inside the watched folder) can change the model. */
export function isWatchedPath(relative: string): boolean {
  return relative.split(/[\\/]/).every((part) => part !== '' && !part.startsWith('.') && !IGNORED_FOLDERS.has(part));
}

export class ModuleWatcher {
  readonly #watcher: FSWatcher;
  #timer: NodeJS.Timeout | undefined;
  readonly #changed = new Set<string>();

  /** `onChange` gets the changed paths (relative to `folder`) of the burst. */
  constructor(folder: string, onChange: (paths: readonly string[]) => void, debounceMs = DEFAULT_DEBOUNCE_MS) {
    this.#watcher = watch(folder, { recursive: true, persistent: true }, (_event, name) => {
      const relative = name === null ? '' : String(name).split(sep).join('/');
      if (relative !== '' && !isWatchedPath(relative)) return;
      this.#changed.add(relative);
      clearTimeout(this.#timer);
      this.#timer = setTimeout(() => {
        const paths = [...this.#changed];
        this.#changed.clear();
        onChange(paths);
      }, debounceMs);
    });
  }

  close(): void {
    clearTimeout(this.#timer);
    this.#watcher.close();
  }
}
