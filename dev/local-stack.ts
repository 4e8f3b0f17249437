/**
 * The whole hosted service on one machine, for development — what `npm start` (`arclight stack`)
 * runs: a coordinator on SQLite, a runtime in hosted mode registered with it, a demo account with
 * credits and a fresh API key, and the playground's runtime in local mode that can also connect
 * through the coordinator (its hosted mode mints tokens with the demo key).
 *
 * @example
 * ```ts
 * import pattern from '../models/examples/pattern/index.ts';
 * const stack = await startLocalStack({ model: pattern });
 * console.log(stack.playgroundUrl, stack.coordinatorUrl, stack.apiKey);
 * await stack.close();
 * ```
 */

import { randomBytes } from 'node:crypto';
import { mintToken } from '../client/server-token.ts';
import { startCoordinator, TestPaymentProvider, type Coordinator, type PaymentProvider } from '../coordinator/index.ts';
import { startRuntime, type IcePolicyOptions, type ModelDefinition, type Runtime } from '../runtime/index.ts';
import { createLogger, type Logger } from '../server-kit/log.ts';

export interface LocalStackOptions {
  readonly model: ModelDefinition<never>;
  /** The playground's (local runtime's) port; default 8080. 0 picks free ports for both runtimes. */
  readonly port?: number;
  /** The hosted runtime's port; default `port + 1` (0 when `port` is 0). */
  readonly hostedRuntimePort?: number;
  /** Default 8090; 0 picks a free port. */
  readonly coordinatorPort?: number;
  /** SQLite file (default `data/coordinator.db`) or a `postgres://` URL. */
  readonly database?: string;
  /** Where every server listens; default 127.0.0.1. */
  readonly host?: string;
  /** ICE addresses of both runtimes (tests pin loopback or a namespace). */
  readonly ice?: IcePolicyOptions;
  /** The model's rate when the stack adds it to the catalog (an existing entry keeps its own). Default 5. */
  readonly creditsPerSecond?: number;
  /**
   * Where the coordinator's purchases are paid (the account dashboard's Credits screen, automatic
   * top-up). Default the test provider, which confirms without money — a development stack only;
   * null: none (purchases answer 501).
   */
  readonly paymentProvider?: PaymentProvider | null;
  readonly logger?: Logger;
}

export interface LocalStack {
  /** The playground: the local runtime's page, which offers local and hosted mode. */
  readonly playgroundUrl: string;
  readonly coordinatorUrl: string;
  /** The runtime the coordinator places hosted sessions on (closed to clients that go around it). */
  readonly hostedRuntimeUrl: string;
  /** The catalog slug clients connect with (`modelName`): the model's name. */
  readonly modelName: string;
  readonly demoAccountId: string;
  /** The demo account's API key, new on every start (earlier ones are revoked). */
  readonly apiKey: string;
  readonly coordinator: Coordinator;
  readonly localRuntime: Runtime;
  readonly hostedRuntime: Runtime;
  close(): Promise<void>;
}

/** The account the stack finds (by this name) or creates. */
export const DEMO_ACCOUNT_NAME = 'Demo';
/** The demo balance is topped up to this whenever it is below half: 200,000 s of a 5-credit model. */
export const DEMO_CREDITS = 1_000_000;
const DEFAULT_RATE = 5;
const REGISTRATION_TIMEOUT_MS = 30_000;

export async function startLocalStack(options: LocalStackOptions): Promise<LocalStack> {
  const log = options.logger ?? createLogger();
  const host = options.host ?? '127.0.0.1';
  const port = options.port ?? 8080;
  const modelName = options.model.name;
  // Fresh per start: nothing outside this process needs it, and a leaked one dies with it.
  const runtimeSecret = randomBytes(32).toString('base64url');
  // Also fresh per start: a previous run's sessions stay on the previous id, which the
  // coordinator declares gone (ending them as of its last heartbeat) instead of them holding
  // this runtime's only slot.
  const runtimeId = `local-${randomBytes(4).toString('hex')}`;

  const started: { close(): Promise<void> }[] = [];
  const closeAll = async (): Promise<void> => {
    // Runtimes first, so their last reports still reach the coordinator.
    for (const service of started.splice(0).reverse())
      await service.close().catch((error: unknown) => log.error('closing the local stack failed', { error }));
  };
  try {
    const coordinator = await startCoordinator({
      database: options.database ?? 'data/coordinator.db',
      port: options.coordinatorPort ?? 8090,
      host,
      runtimeSecret,
      logger: log.child({ process: 'coordinator' }),
      ...(options.paymentProvider === null ? {} : { paymentProvider: options.paymentProvider ?? new TestPaymentProvider() }),
    });
    started.push(coordinator);
    if (!(await coordinator.catalog.byName(modelName))) await coordinator.catalog.add(modelName, options.creditsPerSecond ?? DEFAULT_RATE);
    const demo = await prepareDemoAccount(coordinator);

    const hostedRuntime = await startRuntime({
      model: options.model,
      port: options.hostedRuntimePort ?? (port === 0 ? 0 : port + 1),
      host,
      ...(options.ice ? { ice: options.ice } : {}),
      playground: false,
      logger: log.child({ process: 'hosted-runtime' }),
      recording: {},
      hosted: { coordinatorUrl: coordinator.url, secret: runtimeSecret, runtimeId },
    });
    started.push(hostedRuntime);
    await registered(coordinator, runtimeId, hostedRuntime);

    const localRuntime = await startRuntime({
      model: options.model,
      port,
      host,
      ...(options.ice ? { ice: options.ice } : {}),
      logger: log.child({ process: 'local-runtime' }),
      recording: {},
      playgroundHosted: {
        coordinatorUrl: coordinator.url,
        // One session per token: the page mints a new one for each Connect.
        mintToken: () => mintToken({ coordinatorUrl: coordinator.url, apiKey: demo.apiKey, models: [modelName], maxSessions: 1 }),
      },
    });
    started.push(localRuntime);

    let closing: Promise<void> | undefined;
    return {
      playgroundUrl: localRuntime.url,
      coordinatorUrl: coordinator.url,
      hostedRuntimeUrl: hostedRuntime.url,
      modelName,
      demoAccountId: demo.accountId,
      apiKey: demo.apiKey,
      coordinator,
      localRuntime,
      hostedRuntime,
      close: () => (closing ??= closeAll()),
    };
  } catch (error) {
    await closeAll();
    throw error;
  }
}

/**
 * Finds or creates the demo account, tops its credits up, and issues a new API key, revoking the
 * earlier ones: keys are stored hashed, so an old one cannot be shown again, and each start would
 * otherwise leave one more live key behind.
 */
async function prepareDemoAccount(coordinator: Coordinator): Promise<{ accountId: string; apiKey: string }> {
  // Account names are not unique; the stack owns the oldest "Demo". (A query here because the
  // account store has no lookup by name: nothing else in the service should need one.)
  const existing = await coordinator.storage.db
    .selectFrom('accounts')
    .select('id')
    .where('name', '=', DEMO_ACCOUNT_NAME)
    .orderBy('created_at')
    .limit(1)
    .executeTakeFirst();
  // Created like any account, so it starts with the coordinator's signup credits; the top-up
  // below brings it to DEMO_CREDITS.
  const accountId = existing?.id ?? (await coordinator.accounts.create(DEMO_ACCOUNT_NAME)).id;
  const { credits } = await coordinator.ledger.balance(accountId);
  if (credits < DEMO_CREDITS / 2) await coordinator.ledger.grantPromotional(accountId, DEMO_CREDITS - credits);
  for (const key of await coordinator.apiKeys.list(accountId)) {
    if (key.revokedAt === null) await coordinator.apiKeys.revoke(key.id);
  }
  const { key } = await coordinator.apiKeys.create(accountId);
  return { accountId, apiKey: key };
}

/** Resolves once the hosted runtime has registered (its model loaded): before, no session could be placed. */
async function registered(coordinator: Coordinator, runtimeId: string, runtime: Runtime): Promise<void> {
  const deadline = Date.now() + REGISTRATION_TIMEOUT_MS;
  while ((await coordinator.registry.get(runtimeId)) === undefined) {
    if (runtime.state === 'terminated') throw new Error(`The hosted runtime's model failed to load; see the log above.`);
    if (Date.now() > deadline)
      throw new Error(
        `The hosted runtime did not register with the coordinator within ${REGISTRATION_TIMEOUT_MS / 1000} s; see the log above.`,
      );
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
