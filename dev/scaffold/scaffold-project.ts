/**
 * `arclight init`'s work: copies the model project template (dev/scaffold/template/, real files
 * that this repository type-checks and tests) into a new folder, with the model's name and the
 * Arclight dependency filled in.
 */

import { existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, statSync, writeFileSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { packageRoot } from '../../server-kit/package-root.ts';

/** The name the template is written under; every occurrence becomes the new model's name. */
const TEMPLATE_NAME = 'arclight-template-model';
/** Placeholder for the npm spec of the Arclight dependency in the template's package.json. */
const VERSION_PLACEHOLDER = 'ARCLIGHT_VERSION_RANGE';
/**
 * Placeholder for the key that names the Arclight dependency in the template's `allowScripts`
 * (npm 11's install-script policy). npm matches a registry package by its name but a `file:`
 * dependency only by its path, so the key is `arclight` or the `file:` spec itself.
 */
const SCRIPTS_KEY_PLACEHOLDER = 'ARCLIGHT_SCRIPTS_POLICY_KEY';
// The template's allowScripts, so that the project's `npm install` runs what it needs, nothing
// that reaches beyond the npm registry, and warns about nothing unreviewed:
// - Arclight's own scripts run. From a checkout, npm runs a linked package's `prepare` and
//   `install`: they build the checkout's dist/ (what the project's `arclight` command and its
//   `arclight/*` imports run, so it is as current as the checkout's sources) and its optional
//   native addon (which never fails an install).
// - better-sqlite3, esbuild and node-av are allowed and onnxruntime-node denied, as the Arclight
//   repository's own policy does: the first three need their binaries; onnxruntime-node's script
//   downloads CUDA libraries from outside the npm registry, and the CPU build in its package
//   serves. With a `file:` dependency none of the four is installed in the project (they live in
//   the checkout's node_modules, installed under the checkout's policy), so only Arclight's own
//   scripts run; the entries are for a project that installs Arclight from the registry.
/**
 * Template files stored under another name: npm drops `.gitignore` from published packages (and
 * a dotfile is easy to miss in a listing), so they become dotfiles on the way out; and a
 * package.json in the template would make it a package of its own, where `arclight/runtime` no
 * longer resolves to this package and the template could not be type-checked here.
 */
const RENAMED: Readonly<Record<string, string>> = {
  gitignore: '.gitignore',
  dockerignore: '.dockerignore',
  'package.template.json': 'package.json',
};

/** A model slug, as defineModel() accepts it and clients connect with (`modelName`). */
export const MODEL_NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/;

export interface ScaffoldOptions {
  /** The model's slug: the folder, package and `defineModel({ name })`. */
  readonly name: string;
  /** Where the project goes; must not exist or be empty. */
  readonly directory: string;
  /**
   * The npm spec the project depends on Arclight by. Default: {@link defaultArclightDependency}
   * (this checkout as a `file:` path, or `^<version>` when this is an installed copy).
   */
  readonly arclightSpec?: string;
}

/** The Arclight dependency `arclight init` writes when not told one, and why. */
export interface ArclightDependency {
  /** The npm spec: `file:/absolute/path/to/checkout` or `^<version>`. */
  readonly spec: string;
  /** `checkout`: this Arclight is a source folder; `registry`: an installed copy of a published version. */
  readonly source: 'checkout' | 'registry';
}

/**
 * Where the running Arclight came from decides the default dependency. A copy that npm installed
 * from the registry (`npx arclight` from the registry, a global install, a project's dependency)
 * always lives inside a `node_modules` folder, and its version is one the registry has, so the
 * project gets `^<version>`. Anything else is a source folder: a git clone (`.git`, a folder or a
 * worktree's file, which npm never packs, so it is proof enough even under node_modules), a
 * downloaded archive, or a checkout that `npm link` or `npm install -g ./arclight` reached
 * through a symlink (the real path, which Node runs modules from, is the checkout's). Arclight is
 * not on the registry yet, so for those only a `file:` path installs, and it installs offline.
 *
 * The path is absolute: a model project is moved (renamed, put under its own repository) far
 * more often than the checkout is, and an absolute path survives that, where a relative one
 * breaks on any move of either; npm keeps relative paths in package-lock.json and refreshes them
 * on the next install. Where this guesses wrong (a `file:` dependency that npm copied into
 * node_modules instead of linking, `install-links`, is taken for a registry copy), `--arclight`
 * overrides it.
 */
export function defaultArclightDependency(root: string = packageRoot()): ArclightDependency {
  const real = realpathSync(root);
  const underNodeModules = real.split(sep).includes('node_modules');
  if (existsSync(join(real, '.git')) || !underNodeModules) {
    // npm's file: specs take forward slashes on every platform.
    return { spec: `file:${real.split(sep).join('/')}`, source: 'checkout' };
  }
  const { version } = JSON.parse(readFileSync(join(real, 'package.json'), 'utf8')) as { version: string };
  return { spec: `^${version}`, source: 'registry' };
}

export class ScaffoldError extends Error {
  override readonly name = 'ScaffoldError';
}

/** Writes the project; returns the files written, relative to `directory`, in order. */
export function scaffoldModelProject(options: ScaffoldOptions): string[] {
  if (!MODEL_NAME.test(options.name)) {
    throw new ScaffoldError(
      `"${options.name}" is not a model name: use 1–64 lowercase letters, digits, ".", "_" or "-", starting with a letter or digit.`,
    );
  }
  if (existsSync(options.directory)) {
    if (!statSync(options.directory).isDirectory()) throw new ScaffoldError(`${options.directory} exists and is not a folder.`);
    if (readdirSync(options.directory).length > 0) throw new ScaffoldError(`${options.directory} is not empty; pick a new folder.`);
  }
  const root = packageRoot();
  const spec = options.arclightSpec ?? defaultArclightDependency(root).spec;
  // JSON-escaped: a path may hold a quote or (on Windows) a backslash.
  const json = (value: string): string => JSON.stringify(value).slice(1, -1);
  const template = join(root, 'dev', 'scaffold', 'template');
  const written: string[] = [];
  for (const source of listFiles(template)) {
    const path = relative(template, source);
    const target = join(options.directory, RENAMED[path] ?? path);
    const text = readFileSync(source, 'utf8')
      .replaceAll(TEMPLATE_NAME, options.name)
      .replaceAll(VERSION_PLACEHOLDER, json(spec))
      .replaceAll(SCRIPTS_KEY_PLACEHOLDER, json(spec.startsWith('file:') ? spec : 'arclight'));
    mkdirSync(join(target, '..'), { recursive: true });
    writeFileSync(target, text);
    written.push(relative(options.directory, target));
  }
  return written;
}

function listFiles(folder: string): string[] {
  return readdirSync(folder, { withFileTypes: true })
    .sort((a, b) => a.name.localeCompare(b.name))
    .flatMap((entry) => (entry.isDirectory() ? listFiles(join(folder, entry.name)) : [join(folder, entry.name)]));
}
