/**
 * Which Python runs the workers, and what a model module declares. `ARCLIGHT_PYTHON` (or the
 * model's `python` option) names the executable, else the first of `python3` on PATH and Debian's
 * `/usr/bin/python3` that imports numpy (a pyenv or venv Python first on PATH may lack numpy while
 * the system one has python3-numpy, which is what `npm test`'s provisioning installs). The repository's
 * `python/` folder (the arclight_worker package) goes first on the workers' PYTHONPATH.
 */

import { spawnSync } from 'node:child_process';
import { delimiter, join } from 'node:path';
import { packageRoot } from '../../server-kit/package-root.ts';
import { PythonWorkerError } from './python-worker-error.ts';
import type { ModelDescription } from './worker-protocol.ts';

/** The folder holding the `arclight_worker` package. */
export const PYTHON_PACKAGE_DIR = join(packageRoot(), 'python');

/** Where to look for a Python with numpy when none is named, in order. */
const DEFAULT_PYTHONS = ['python3', '/usr/bin/python3'] as const;
let foundPython: string | undefined;

export function pythonExecutable(explicit?: string): string {
  const named = explicit ?? process.env['ARCLIGHT_PYTHON'];
  if (named) return named;
  // Probed once per process (~100 ms: numpy's import); none with numpy → 'python3', and
  // checkPython() then says what is missing.
  foundPython ??=
    DEFAULT_PYTHONS.find((python) => spawnSync(python, ['-c', 'import numpy'], { stdio: 'ignore', timeout: 30_000 }).status === 0) ??
    'python3';
  return foundPython;
}

/** The environment a worker (or a describe run) gets: the caller's, with the package on PYTHONPATH. */
export function pythonEnvironment(extra: Readonly<Record<string, string>> = {}): NodeJS.ProcessEnv {
  const existing = process.env['PYTHONPATH'];
  return {
    ...process.env,
    PYTHONPATH: existing ? `${PYTHON_PACKAGE_DIR}${delimiter}${existing}` : PYTHON_PACKAGE_DIR,
    PYTHONUNBUFFERED: '1',
    PYTHONDONTWRITEBYTECODE: '1',
    ...extra,
  };
}

/**
 * Throws `python_unavailable` unless `python` runs and imports numpy; returns its versions.
 * About 100 ms (numpy's import).
 */
export function checkPython(python: string): { python: string; numpy: string } {
  const run = spawnSync(python, ['-c', 'import sys, numpy; print(sys.version.split()[0], numpy.__version__)'], {
    encoding: 'utf8',
    env: pythonEnvironment(),
    timeout: 30_000,
  });
  if (run.error) {
    throw new PythonWorkerError(
      'python_unavailable',
      `Cannot run the Python worker's interpreter "${python}" (${(run.error as NodeJS.ErrnoException).code ?? run.error.message}). Install python3 and python3-numpy, or set ARCLIGHT_PYTHON to a Python that has numpy.`,
    );
  }
  if (run.status !== 0) {
    throw new PythonWorkerError(
      'python_unavailable',
      `"${python}" cannot import numpy, which the Python worker needs. Install python3-numpy (Debian/Ubuntu) or \`pip install numpy\`, or set ARCLIGHT_PYTHON to a Python that has it.`,
      run.stderr.trim().split('\n').slice(-5).join('\n'),
    );
  }
  const [version = '?', numpy = '?'] = run.stdout.trim().split(/\s+/);
  return { python: version, numpy };
}

/**
 * Imports the model module in a short-lived Python (`python -m arclight_worker describe`) and
 * returns its declaration — the commands with their JSON Schemas — without running `@model.load`.
 * Synchronous, so `definePythonModel` can return a complete definition (commands in capabilities,
 * /schema and typed clients) from a module's top level.
 */
export function describePythonModule(python: string, modulePath: string): ModelDescription {
  const run = spawnSync(python, ['-m', 'arclight_worker', 'describe', modulePath], {
    encoding: 'utf8',
    env: pythonEnvironment(),
    timeout: 60_000,
  });
  if (run.error || run.status !== 0) {
    checkPython(python); // a missing interpreter or numpy says so, rather than "describe failed"
    const tail = (run.stderr ?? '').trim().split('\n').slice(-15).join('\n');
    throw new PythonWorkerError(
      'python_load_failed',
      `The Python model ${modulePath} could not be imported: ${tail.split('\n').at(-1) ?? 'no output'}`,
      tail,
    );
  }
  const last = run.stdout.trim().split('\n').at(-1) ?? '';
  try {
    const description = JSON.parse(last) as ModelDescription;
    if (typeof description.commands !== 'object' || description.commands === null) throw new TypeError('no commands');
    return description;
  } catch {
    throw new PythonWorkerError(
      'python_protocol_error',
      `describe of ${modulePath} printed no model description (last line: ${last.slice(0, 200)})`,
    );
  }
}
