/**
 * Hosted mode for tests, all real: a coordinator on a fresh SQLite file (or PostgreSQL database) with the `pattern` model
 * (5 credits/s; or another one), an account with credits and an API key, and a runtime in hosted mode serving
 * `pattern` on 127.0.0.1 that has registered with it.
 */

import { startCoordinator, type Coordinator, type PaymentProvider } from '../../coordinator/index.ts';
import pattern from '../../models/examples/pattern/index.ts';
import { startRuntime, type ModelDefinition, type RecordingOptions, type Runtime } from '../../runtime/index.ts';
import { freshDatabase, type Engine } from '../coordinator/storage-engines.ts';
import { waitUntil } from './video-probe.ts';

const LOOPBACK = '127.0.0.1';

/** How often the stack's runtime heartbeats (the coordinator tells it at registration). */
export const HEARTBEAT_MS = 1_000;

export interface HostedStack {
  readonly coordinator: Coordinator;
  readonly runtime: Runtime;
  readonly accountId: string;
  /** The account's API key (what an app's server holds). */
  readonly key: string;
  /** A token for `pattern`, minted with the key as an app's server would; `bind`: adopt these sessions. */
  mintToken(bind?: readonly string[]): Promise<string>;
  close(): Promise<void>;
}

export async function startHostedStack(options: {
  runtimeId: string;
  credits?: number;
  reconnectWindowSeconds?: number;
  /** Record sessions (clips): `true` for the defaults, or the runtime's recording options (a clock, say). */
  recording?: boolean | RecordingOptions;
  /** The coordinator's `publicUrl` (`--public-url`). */
  publicUrl?: string;
  /** The model the runtime serves (and the catalog lists, at 5 credits/s); default `pattern`. */
  model?: ModelDefinition<never>;
  /** The coordinator's storage; default SQLite (hosted tests are slow: most run on one engine). */
  engine?: Engine;
  /** The coordinator's payment provider (purchases, automatic top-up); default none. */
  paymentProvider?: PaymentProvider;
}): Promise<HostedStack> {
  const model = options.model ?? (pattern as never);
  const slug = model.name;
  const secret = `secret-${options.runtimeId}`;
  const coordinator = await startCoordinator({
    database: await freshDatabase(options.engine ?? 'sqlite'),
    port: 0,
    meterFlushMs: 0,
    // Runtimes heartbeat every second (gone after 3 s of silence): a running session is billed up
    // to its runtime's last heartbeat, so the default 5 s would hold billing back that long.
    heartbeatIntervalMs: HEARTBEAT_MS,
    runtimeSecret: secret,
    // Accounts hold exactly what the tests grant them (`credits`), which they assert balances
    // and dry accounts against.
    signupCredits: 0,
    ...(options.reconnectWindowSeconds === undefined ? {} : { reconnectWindowSeconds: options.reconnectWindowSeconds }),
    ...(options.publicUrl === undefined ? {} : { publicUrl: options.publicUrl }),
    ...(options.paymentProvider === undefined ? {} : { paymentProvider: options.paymentProvider }),
  });
  await coordinator.catalog.add(slug, 5);
  const account = await coordinator.accounts.create('Acme');
  await coordinator.ledger.grantPromotional(account.id, options.credits ?? 100_000);
  const { key } = await coordinator.apiKeys.create(account.id);
  const runtime = await startRuntime({
    model,
    port: 0,
    host: LOOPBACK,
    ice: { hostAddresses: [LOOPBACK] },
    playground: false,
    hosted: { coordinatorUrl: coordinator.url, secret, runtimeId: options.runtimeId },
    ...(options.recording ? { recording: options.recording === true ? {} : options.recording } : {}),
  });
  await waitUntil(async () => (await coordinator.registry.get(options.runtimeId)) !== undefined, 20_000, 'the runtime to register');
  return {
    coordinator,
    runtime,
    accountId: account.id,
    key,
    async mintToken(bind) {
      const resources = { models: { match: [slug] }, ...(bind ? { sessions: { bind } } : {}) };
      const response = await fetch(`${coordinator.url}/tokens`, {
        method: 'POST',
        headers: { 'Service-API-Key': key, 'content-type': 'application/json' },
        body: JSON.stringify({ authorization_details: [{ type: 'session', resources }] }),
      });
      return ((await response.json()) as { token: string }).token;
    },
    async close() {
      await runtime.close();
      await coordinator.close();
    },
  };
}
