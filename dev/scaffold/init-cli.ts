/**
 * `arclight init <name> [--dir <folder>] [--arclight <npm spec>]` — a new model project
 * (dev/scaffold/scaffold-project.ts), ready for `npm install`, `npm start` and `npm test`.
 */

import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { scaffoldModelProject, ScaffoldError } from './scaffold-project.ts';

const USAGE = `Usage: arclight init <name> [options]

Creates a model project in ./<name>: the model (index.ts), its tests (test/model.test.ts, with
arclight/testing), a README, a Dockerfile for the runtime image and a tsconfig.json. Then:
  cd <name> && npm install && npm start

Options:
  --dir <folder>      create it there instead (must not exist, or be empty)
  --arclight <spec>   the npm spec to depend on Arclight by (default ^<this version>); e.g.
                      file:../arclight to develop against a checkout
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
  const [, name, ...extra] = positionals;
  if (!name || extra.length > 0) {
    process.stderr.write(`arclight: ${name ? `unexpected arguments: ${extra.join(' ')}` : 'missing the model name'}\n\n${USAGE}\n`);
    return 2;
  }
  const directory = resolve(values.dir ?? name);
  try {
    const files = scaffoldModelProject({ name, directory, ...(values.arclight ? { arclightSpec: values.arclight } : {}) });
    process.stdout.write(
      [
        `arclight: created model "${name}" in ${directory}`,
        ...files.map((file) => `  ${file}`),
        '',
        'Next:',
        `  cd ${values.dir ?? name}`,
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
