/**
 * The developer tools behind `arclight <verb>`: bin/arclight.js routes the verbs below here, and
 * each lives in its own module, imported only when used (the stack pulls in a coordinator and a
 * runtime; `arclight init` should not pay for that).
 */

type VerbMain = (argv: readonly string[]) => Promise<number>;

const VERBS: Readonly<Record<string, () => Promise<{ main: VerbMain }>>> = {
  stack: () => import('./stack-cli.ts'),
  init: () => import('./scaffold/init-cli.ts'),
  types: () => import('./types/types-cli.ts'),
};

/** The verbs bin/arclight.js sends here. */
export const DEV_VERBS: readonly string[] = Object.keys(VERBS);

export async function main(argv: readonly string[]): Promise<number> {
  const verb = argv.find((arg) => !arg.startsWith('-'));
  const load = verb === undefined ? undefined : VERBS[verb];
  if (!load) {
    process.stderr.write(`arclight: unknown developer command "${verb ?? ''}" (known: ${DEV_VERBS.join(', ')})\n`);
    return 2;
  }
  return (await load()).main(argv);
}
