/**
 * `arclight init <name|path> [--dir <folder>] [--arclight <npm spec>]` — a new model project
 * (dev/scaffold/scaffold-project.ts), ready for `npm install`, `npm start` and `npm test`.
 */

import { basename, relative, resolve, isAbsolute } from 'node:path';
import { parseArgs } from 'node:util';
import { packageRoot } from '../../server-kit/package-root.ts';
import { defaultArclightDependency, scaffoldModelProject, ScaffoldError } from './scaffold-project.ts';

const USAGE = `Usage: arclight init <name | path> [options]

Creates a model project in ./<name>, or in <path> named after its last folder (../glow: the
folder ../glow, the model "glow"): the model (index.ts), its tests (test/model.test.ts, with
arclight/testing), a README, a Dockerfile for the runtime image and a tsconfig.json. Then:
  cd <name or path> && npm install && npm start

Run from a checkout of Arclight (in its folder: npx arclight init ../<name>), the project
depends on that checkout (file:<its absolute path>) and installs without the registry; run from
an installed copy, it depends on ^<that version>.

Options:
  --dir <folder>      create it there instead (must not exist, or be empty)
  --arclight <spec>   the npm spec to depend on Arclight by instead, e.g. file:../arclight or ^0.1.0
  -h, --help          show this help`;

export async function main(argv: readonly string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      allowPositionals: true,
      options: { dir: { type: 'string' }, arclight: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
    });
  } catch (error) {
    process.stderr.write(`arclight: ${(error as Error).message}\n\n${USAGE}\n`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(USAGE + '\n');
    return 0;
  }
  const [, target, ...extra] = positionals;
  if (!target || extra.length > 0) {
    process.stderr.write(`arclight: ${target ? `unexpected arguments: ${extra.join(' ')}` : 'missing the model name'}\n\n${USAGE}\n`);
    return 2;
  }
  // A path (anything with a slash, or . and ..) names the folder, and its last part the model:
  // `init ../glow` is what someone in a checkout types to put the project beside it.
  const isPath = /[\\/]/.test(target) || target === '.' || target === '..';
  if (isPath && values.dir !== undefined) {
    process.stderr.write(`arclight: give the folder either as the argument or with --dir, not both\n\n${USAGE}\n`);
    return 2;
  }
  const folder = values.dir ?? target;
  const directory = resolve(folder);
  const name = isPath ? basename(directory) : target;
  const dependency = values.arclight
    ? { spec: values.arclight, why: 'as --arclight says' }
    : (() => {
        const found = defaultArclightDependency();
        return {
          spec: found.spec,
          why:
            found.source === 'checkout'
              ? 'this checkout of Arclight (--arclight <spec> picks another)'
              : 'this installed version of Arclight, from the npm registry (--arclight <spec> picks another)',
        };
      })();
  try {
    const files = scaffoldModelProject({ name, directory, arclightSpec: dependency.spec });
    const root = packageRoot();
    const inside = relative(root, directory);
    process.stdout.write(
      [
        `arclight: created model "${name}" in ${directory}`,
        ...files.map((file) => `  ${file}`),
        `arclight: its arclight dependency: ${dependency.spec}, ${dependency.why}`,
        // Inside the checkout, the checkout's own test run and type-check pick the project up.
        ...(inside === '' || (!inside.startsWith('..') && !isAbsolute(inside))
          ? [
              `arclight: note: ${directory} is inside Arclight's own folder (${root}); a folder beside it (init ../${name}) keeps the two apart`,
            ]
          : []),
        '',
        'Next:',
        `  cd ${folder}`,
        '  npm install',
        '  npm start     # the model and its playground on http://localhost:8080',
        '  npm test',
        '',
      ].join('\n'),
    );
    return 0;
  } catch (error) {
    if (error instanceof ScaffoldError) {
      process.stderr.write(`arclight: ${error.message}\n`);
      return 1;
    }
    throw error;
  }
}
