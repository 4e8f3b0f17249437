#!/usr/bin/env node
// The `arclight` command. Under the `source` export condition (npm start in this repository:
// `node --conditions=source --import tsx`) it runs the TypeScript sources, so edits take effect
// without a build; otherwise the compiled runtime that `npm install` built into dist/.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

// NODE_OPTIONS counts too: it is how a child process (npm scripts in a project that depends on a
// checkout of Arclight) inherits the condition.
const fromSource =
  process.execArgv.some(
    (arg, i, all) =>
      arg === '--conditions=source' || arg === '-C=source' || ((arg === '--conditions' || arg === '-C') && all[i + 1] === 'source'),
  ) || /(^|\s)(--conditions[= ]|-C[= ]?)source(\s|$)/.test(process.env.NODE_OPTIONS ?? '');
// `arclight coordinator` and `arclight admin …` are the coordinator's; the developer tools (dev/:
// `arclight stack`, the full local stack; `arclight init`, a new model project) have their verbs
// listed here (and in dev/cli.ts); everything else is the runtime's.
const DEV_VERBS = ['stack', 'init', 'types'];
const first = process.argv.slice(2).find((arg) => !arg.startsWith('-'));
const owner = first === 'coordinator' || first === 'admin' ? 'coordinator' : DEV_VERBS.includes(first) ? 'dev' : 'runtime';
const compiled = new URL(`../dist/${owner}/cli.js`, import.meta.url);
let cli;
if (!fromSource && existsSync(fileURLToPath(compiled))) {
  cli = await import(compiled.href);
} else {
  if (!fromSource) {
    const { register } = await import('tsx/esm/api');
    register();
  }
  cli = await import(new URL(`../${owner}/cli.ts`, import.meta.url).href);
}
const code = await cli.main(process.argv.slice(2));
// node-av's encoders can crash during Node's normal teardown: leave explicitly.
process.exit(code);
