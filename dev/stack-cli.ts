/**
 * `arclight stack [model-module] [--port 8080] [--coordinator-port 8090] [--database data/coordinator.db]`
 * — the full local stack (dev/local-stack.ts); what `npm start` runs. dev/cli.ts routes here.
 */

import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { API_KEY_HEADER } from '../protocol/coordinator.ts';
import { loadModelForCli } from '../runtime/cli.ts';
import { packageRoot } from '../server-kit/package-root.ts';
import { startLocalStack, type LocalStack } from './local-stack.ts';

const USAGE = `Usage: arclight stack [model-module] [options]

Runs the hosted service on this machine for development, all on 127.0.0.1:
  - a coordinator (SQLite) with the model in its catalog,
  - a runtime in hosted mode registered with it (on --port + 1),
  - a demo account with credits and a new API key (printed; earlier demo keys are revoked),
  - the account dashboard at the coordinator's /dashboard/ (sign in with that key); purchases
    there are paid by the test payment provider, which confirms without money,
  - the playground on --port, which connects to its runtime directly (local mode) or through
    the coordinator with tokens minted from the demo key (hosted mode).
The model module defaults to the \`pattern\` example.

Options:
  --port <n>              the playground's port (default 8080; the hosted runtime takes the next)
  --coordinator-port <n>  the coordinator's port (default 8090)
  --database <file>       the coordinator's SQLite file (default data/coordinator.db) or postgres://…
                          (PostgreSQL needs $ARCLIGHT_SIGNING_KEY_SECRET, as in production)
  -h, --help              show this help`;

function portOption(value: string | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  const port = /^\d{1,5}$/.test(value) ? Number(value) : NaN;
  if (!(port >= 0 && port <= 65535)) throw new UsageError(`${name} must be an integer from 0 to 65535; got "${value}"`);
  return port;
}

class UsageError extends Error {}

/** What the stack prints once it is up: where everything is, the key, and how to use it. */
export function describeLocalStack(stack: LocalStack): string {
  const tokenBody = JSON.stringify({ authorization_details: [{ type: 'session', resources: { models: { match: [stack.modelName] } } }] });
  return [
    `arclight: local stack for model "${stack.modelName}" is up`,
    '',
    `  Playground     ${stack.playgroundUrl.replace('127.0.0.1', 'localhost')}   (Mode: Local runtime, or Hosted (coordinator))`,
    `  Coordinator    ${stack.coordinatorUrl}`,
    `  Hosted runtime ${stack.hostedRuntimeUrl}   (registered with the coordinator; reached through it)`,
    `  Demo API key   ${stack.apiKey}`,
    `                 (account "Demo" ${stack.demoAccountId}; a new key every start, the old ones revoked)`,
    `  Dashboard      ${stack.coordinatorUrl}/dashboard/   (sign in with the demo key; purchases use the test payment provider)`,
    '',
    'Mint a session token with it, as your server would (or mintToken from arclight/client/server):',
    `  curl -s -X POST ${stack.coordinatorUrl}/tokens \\`,
    `    -H '${API_KEY_HEADER}: ${stack.apiKey}' -H 'Content-Type: application/json' \\`,
    `    -d '${tokenBody}'`,
    `Then connect: new ArclightClient({ modelName: '${stack.modelName}', apiUrl: '${stack.coordinatorUrl}' }).connect(token)`,
    '',
    'Ctrl-C stops everything.',
  ].join('\n');
}

export async function main(argv: readonly string[]): Promise<number> {
  let modulePath: string;
  let port: number;
  let coordinatorPort: number;
  let database: string | undefined;
  try {
    const { values, positionals } = parseArgs({
      args: [...argv],
      allowPositionals: true,
      options: {
        port: { type: 'string' },
        'coordinator-port': { type: 'string' },
        database: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
    if (values.help) {
      process.stdout.write(USAGE + '\n');
      return 0;
    }
    const [verb, module, ...extra] = positionals;
    if (verb !== 'stack' || extra.length > 0)
      throw new UsageError(verb === 'stack' ? `unexpected arguments: ${extra.join(' ')}` : 'expected the verb "stack"');
    modulePath = module ?? join(packageRoot(), 'models', 'examples', 'pattern');
    port = portOption(values.port, 8080, '--port');
    coordinatorPort = portOption(values['coordinator-port'], 8090, '--coordinator-port');
    database = values.database;
  } catch (error) {
    process.stderr.write(`arclight: ${(error as Error).message}\n\n${USAGE}\n`);
    return 2;
  }

  const model = await loadModelForCli(modulePath);
  if (model === undefined) return 1;
  let stack: LocalStack;
  try {
    stack = await startLocalStack({ model: model as never, port, coordinatorPort, ...(database ? { database } : {}) });
  } catch (error) {
    const { code, port: busy } = error as NodeJS.ErrnoException & { port?: number };
    if (code === 'EADDRINUSE') {
      process.stderr.write(`arclight: port ${busy ?? '?'} is in use; pick others with --port (and the next one) and --coordinator-port\n`);
      return 1;
    }
    throw error;
  }
  process.stdout.write(describeLocalStack(stack) + '\n');
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  process.stdout.write('arclight: shutting down\n');
  await stack.close();
  return 0;
}
