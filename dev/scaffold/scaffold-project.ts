/**
 * `arclight init`'s work: copies the model project template (dev/scaffold/template/, real files
 * that this repository type-checks and tests) into a new folder, with the model's name and the
 * Arclight version filled in.
 */

import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { packageRoot } from '../../runtime/package-root.ts';

/** The name the template is written under; every occurrence becomes the new model's name. */
const TEMPLATE_NAME = 'arclight-template-model';
/** Placeholder for the Arclight dependency's version range in the template's package.json. */
const VERSION_PLACEHOLDER = 'ARCLIGHT_VERSION_RANGE';
/**
 * Template files stored under another name: npm drops `.gitignore` from published packages (and
 * a dotfile is easy to miss in a listing), so they become dotfiles on the way out; and a
 * package.json in the template would make it a package of its own, where `arclight/runtime` no
 * longer resolves to this package and the template could not be type-checked here.
 */
const RENAMED: Readonly<Record<string, string>> = { gitignore: '.gitignore', dockerignore: '.dockerignore', 'package.template.json': 'package.json' };

/** A model slug, as defineModel() accepts it and clients connect with (`modelName`). */
export const MODEL_NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/;

export interface ScaffoldOptions {
  /** The model's slug: the folder, package and `defineModel({ name })`. */
  readonly name: string;
  /** Where the project goes; must not exist or be empty. */
  readonly directory: string;
  /**
   * The npm spec the project depends on Arclight by. Default: `^<this package's version>`;
   * `file:/path/to/arclight` develops against a checkout.
   */
  readonly arclightSpec?: string;
}

export class ScaffoldError extends Error {
  override readonly name = 'ScaffoldError';
}

/** Writes the project; returns the files written, relative to `directory`, in order. */
export function scaffoldModelProject(options: ScaffoldOptions): string[] {
  if (!MODEL_NAME.test(options.name)) {
    throw new ScaffoldError(`"${options.name}" is not a model name: use 1–64 lowercase letters, digits, ".", "_" or "-", starting with a letter or digit.`);
  }
  if (existsSync(options.directory)) {
    if (!statSync(options.directory).isDirectory()) throw new ScaffoldError(`${options.directory} exists and is not a folder.`);
    if (readdirSync(options.directory).length > 0) throw new ScaffoldError(`${options.directory} is not empty; pick a new folder.`);
  }
  const root = packageRoot();
  const spec = options.arclightSpec ?? `^${(JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }).version}`;
  const template = join(root, 'dev', 'scaffold', 'template');
  const written: string[] = [];
  for (const source of listFiles(template)) {
    const path = relative(template, source);
    const target = join(options.directory, RENAMED[path] ?? path);
    const text = readFileSync(source, 'utf8').replaceAll(TEMPLATE_NAME, options.name).replaceAll(VERSION_PLACEHOLDER, spec);
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
