/**
 * `startCoordinator()`: opens storage, migrates, serves the coordinator's HTTP API.
 *
 * @example
 * const coordinator = await startCoordinator({ database: 'data/coordinator.db', port: 8090 });
 * const account = await coordinator.accounts.create('Acme');
 * const { key } = await coordinator.apiKeys.create(account.id);
 * // POST {coordinator.url}/tokens with header Service-API-Key: key
 */

import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import { serve, type ServerType } from '@hono/node-server';
import { outlastClientIdleTimeouts } from '../server-kit/keep-alive.ts';
import { createLogger, type Logger } from '../server-kit/log.ts';
import { AccountStore, checkSignupCredits, DEFAULT_SIGNUP_CREDITS } from './accounts/account-store.ts';
import { ApiKeyStore } from './accounts/api-keys.ts';
import { createCoordinatorApp } from './http/app.ts';
import { ModelCatalog } from './models/model-catalog.ts';
import { DEFAULT_PRICING, type PricingSettings } from './pricing/pricing.ts';
import { CreditLedger } from './billing/credit-ledger.ts';
import type { PaymentProvider } from './billing/payment-provider.ts';
import { PurchaseService } from './billing/purchases.ts';
import { METER_CONCURRENCY_POSTGRES, SessionMeter, type MeterStop } from './billing/session-meter.ts';
import { HousekeeperLease } from './housekeeping/housekeeper-lease.ts';
import { CoordinatorMetrics } from './metrics.ts';
import { DashboardSessionStore } from './dashboard/dashboard-sessions.ts';
import { RuntimeClient } from './runtimes/runtime-client.ts';
import { RuntimeRegistry } from './runtimes/runtime-registry.ts';
import { SessionLifecycle } from './sessions/session-lifecycle.ts';
import { SessionStore } from './sessions/session-store.ts';
import { isPostgresUrl, openStorage, type CoordinatorStorage } from './storage/database.ts';
import { signingKeyCipherFor } from './tokens/signing-key-secret.ts';
import { DEFAULT_SIGNING_KEY_REFRESH_MS, SigningKeyring } from './tokens/signing-keyring.ts';
import { TokenService } from './tokens/token-service.ts';

export interface CoordinatorOptions {
  /** A SQLite file path (default `data/coordinator.db`, `:memory:` for none) or a `postgres://` URL. */
  readonly database?: string;
  /** Default 8090; 0 picks a free port. */
  readonly port?: number;
  /** Default 127.0.0.1. */
  readonly host?: string;
  /** Token `iss`; default `arclight`. Replicas of one deployment share it. */
  readonly issuer?: string;
  /** Token `aud`; default `arclight`. */
  readonly audience?: string;
  readonly pricing?: Partial<PricingSettings>;
  /**
   * Promotional credits every new account receives when it is created (expiring after 90 days,
   * like every promotional grant); 0 = none. Default 100,000 (10 US dollars; see
   * DEFAULT_SIGNUP_CREDITS). At most the balance ceiling (`pricing.maxAccountCredits`).
   */
  readonly signupCredits?: number;
  /**
   * The secret runtimes present to register and heartbeat (header `Arclight-Runtime-Secret`).
   * Default `$ARCLIGHT_RUNTIME_SECRET`; unset = registration off.
   */
  readonly runtimeSecret?: string;
  /**
   * The secret that encrypts the private signing keys at rest (AES-256-GCM under a key derived from
   * it; at least 16 characters). Default `$ARCLIGHT_SIGNING_KEY_SECRET`, else the contents of the
   * file `$ARCLIGHT_SIGNING_KEY_SECRET_FILE` names. **Required on PostgreSQL** (startCoordinator
   * throws without it); on SQLite, none keeps the keys as plain JWKs, with a warning. Plain keys
   * found at a start with a secret are encrypted then; a secret that does not open the stored
   * keys is refused. (`{value, source}`: the secret, and where it came from — for messages.)
   */
  readonly signingKeySecret?: string | { readonly value: string; readonly source: string };
  /**
   * How often this replica reads the signing keys again, ms (default 5000): a rotation or a
   * retirement made elsewhere is in force here within this long. A token signed by a key this
   * replica has not seen yet triggers a re-read at once.
   */
  readonly signingKeyRefreshMs?: number;
  /** The `cluster` named in session records; default `default`. */
  readonly cluster?: string;
  readonly logger?: Logger;
  /**
   * How often the billing meter charges running sessions, ms (default 5000). A crash loses none
   * of the seconds (they are computed from the database); 0 turns the timer off (tests flush).
   */
  readonly meterFlushMs?: number;
  /**
   * How long a session outlives its last client's connection (a recoverable disconnect, a network
   * drop), seconds: the GPU stays held and billing continues so the client can reconnect; then
   * the runtime ends it. Default 30.
   */
  readonly reconnectWindowSeconds?: number;
  /**
   * How often runtimes heartbeat, ms (default 5000; they are told in the answers to register and
   * heartbeat). A runtime silent for three intervals is declared gone and its open sessions end,
   * billed up to its last heartbeat — found by the next housekeeping pass (`meterFlushMs`).
   */
  readonly heartbeatIntervalMs?: number;
  /**
   * Write batching, for benchmarks that compare against the unbatched baseline: heartbeats within
   * `heartbeatBatchMs` share one UPDATE (default 50; 0 = one each), and the meter charges up to
   * `sessionsPerCharge` sessions of an account in one transaction (default 500; 1 = one each).
   * @internal
   */
  readonly batching?: { readonly heartbeatBatchMs?: number; readonly sessionsPerCharge?: number };
  /**
   * The origin clients reach this coordinator at (behind a load balancer: its public URL).
   * Runtimes point presigned clip URLs here. Default: the URL it listens on.
   */
  readonly publicUrl?: string;
  /**
   * Browser origins allowed to call the session API and /pricing (CORS): `'*'` (the default —
   * those calls carry bearer tokens, never cookies) or a list of origins.
   */
  readonly corsOrigins?: '*' | readonly string[];
  /**
   * Where purchases are paid (`POST /platform/purchases`, automatic top-up, the payment webhook):
   * a `PaymentProvider` — `new TestPaymentProvider()` confirms at once without money, for tests
   * and local development. Default none: purchases and automatic top-up answer 501
   * `payments_not_configured`. docs/coordinator.md, "Purchases and automatic top-up".
   */
  readonly paymentProvider?: PaymentProvider;
  /** Milliseconds since the epoch (tests move time). Default `Date.now`. */
  readonly now?: () => number;
}

export interface Coordinator {
  readonly url: string;
  // The stores below are the coordinator's insides, reachable for its tests and `arclight admin`;
  // they are not a stable API (the HTTP API and docs/coordinator.md are).
  /** @internal */
  readonly storage: CoordinatorStorage;
  /** @internal */
  readonly accounts: AccountStore;
  /** @internal */
  readonly apiKeys: ApiKeyStore;
  /** @internal */
  readonly catalog: ModelCatalog;
  /** @internal */
  readonly keyring: SigningKeyring;
  /** @internal */
  readonly tokens: TokenService;
  /** @internal */
  readonly sessions: SessionStore;
  /** @internal */
  readonly ledger: CreditLedger;
  /** @internal */
  readonly meter: SessionMeter;
  /** @internal */
  readonly purchases: PurchaseService;
  /** @internal */
  readonly registry: RuntimeRegistry;
  /** @internal */
  readonly dashboardSessions: DashboardSessionStore;
  /** One pass of what the timer does: end sessions at max duration, bill, end dry accounts' sessions, retry unanswered payments. */
  housekeeping(): Promise<void>;
  close(): Promise<void>;
}

const DEFAULT_RECONNECT_WINDOW_SECONDS = 30;
/** What clients are told when the meter ends their session. */
const METER_STOP_REASONS: Record<MeterStop, string> = {
  out_of_credits: 'The account ran out of credits.',
  billing_cap: 'The account reached its monthly billing cap.',
};

function reconnectWindow(seconds: number | undefined): number {
  const value = seconds ?? DEFAULT_RECONNECT_WINDOW_SECONDS;
  if (!Number.isInteger(value) || value < 1 || value > 3600)
    throw new RangeError(`reconnectWindowSeconds must be a whole number from 1 to 3600 (got ${value})`);
  return value;
}

export async function startCoordinator(options: CoordinatorOptions = {}): Promise<Coordinator> {
  const log = options.logger ?? createLogger({ process: 'coordinator' });
  const heartbeatMs = options.heartbeatIntervalMs;
  if (heartbeatMs !== undefined && !(Number.isInteger(heartbeatMs) && heartbeatMs >= 100)) {
    throw new RangeError(`heartbeatIntervalMs must be a whole number of ms, at least 100 (got ${heartbeatMs})`);
  }
  // Checked before the database opens: a refused option must not leave a pool behind.
  const reconnectWindowSeconds = reconnectWindow(options.reconnectWindowSeconds);
  const pricing = { ...DEFAULT_PRICING, ...options.pricing };
  const signupCredits = options.signupCredits ?? DEFAULT_SIGNUP_CREDITS;
  checkSignupCredits(signupCredits, pricing.maxAccountCredits);
  const refreshMs = options.signingKeyRefreshMs ?? DEFAULT_SIGNING_KEY_REFRESH_MS;
  if (!Number.isInteger(refreshMs) || refreshMs < 100)
    throw new RangeError(`signingKeyRefreshMs must be a whole number of ms, at least 100 (got ${refreshMs})`);
  const database = options.database ?? 'data/coordinator.db';
  // No secret on PostgreSQL: refused here, before a pool is opened.
  const cipher = await signingKeyCipherFor(isPostgresUrl(database), options.signingKeySecret);
  const storage = await openStorage(database, {
    onConnectionError: (error) => log.warn('a database connection failed; it will be replaced', { error }),
  });
  const { db } = storage;
  const apiKeys = new ApiKeyStore(db, storage.engine);
  const catalog = new ModelCatalog(db);
  const keyring = new SigningKeyring(db, { cipher, refreshMs });
  const tokens = new TokenService(db, keyring, catalog, {
    issuer: options.issuer ?? 'arclight',
    audience: options.audience ?? 'arclight',
    ...(options.now ? { now: options.now } : {}),
  });
  const ledger = new CreditLedger(db, storage.engine, pricing, options.now);
  const accounts = new AccountStore(db, { ledger, credits: signupCredits });
  const meter = new SessionMeter(
    db,
    ledger,
    options.now,
    storage.engine === 'postgres' ? METER_CONCURRENCY_POSTGRES : 1,
    options.batching?.sessionsPerCharge,
  );
  const purchases = new PurchaseService(db, ledger, pricing, options.paymentProvider, log, options.now);
  // Charges that leave an account below its top-up threshold claim a top-up; paid after they commit.
  meter.setAutoTopup(purchases);
  if (options.paymentProvider?.name === 'test')
    log.warn('the test payment provider is on: purchases are confirmed without any payment (never in production)');
  const sessions = new SessionStore(db, storage.engine, ledger, options.now);
  const dashboardSessions = new DashboardSessionStore(db, options.now);
  const registry = new RuntimeRegistry(db, storage.engine, options.now, heartbeatMs, options.batching?.heartbeatBatchMs);
  const metrics = new CoordinatorMetrics(db);
  const runtimeSecret = options.runtimeSecret ?? process.env['ARCLIGHT_RUNTIME_SECRET'];
  const inFlight = new Set<Promise<unknown>>();
  const lifecycle = new SessionLifecycle(sessions, registry, new RuntimeClient(runtimeSecret, reconnectWindowSeconds), meter, log);
  // Every registration, heartbeat and session end asks for a placement pass; at fleet scale that
  // is thousands a second, each a query for waiting sessions. Requests coalesce: one pass at a
  // time, and one more after it if anything asked meanwhile (what it saw may have changed).
  const placement = {
    running: undefined as Promise<void> | undefined,
    again: false,
    request(): void {
      if (this.running) {
        this.again = true;
        return;
      }
      const pass = (async () => {
        do {
          this.again = false;
          await lifecycle.placeWaiting();
        } while (this.again);
      })()
        .catch((error: unknown) => log.error('placing waiting sessions failed', { error }))
        .finally(() => {
          this.running = undefined;
          // Tracked so close() waits for it rather than pulling the database from under it.
          inFlight.delete(pass);
          // A request that came after the last pass looked, but before this ran.
          if (this.again) this.request();
        });
      this.running = pass;
      inFlight.add(pass);
    },
  };
  try {
    // Encrypts plain keys under the secret (or checks it opens them), and creates the first key.
    await keyring.prepare((message) => log.warn(message));
  } catch (error) {
    await storage.close();
    throw error;
  }
  const app = createCoordinatorApp({
    apiKeys,
    catalog,
    keyring,
    tokens,
    sessions,
    ledger,
    purchases,
    dashboardSessions,
    paymentProvider: options.paymentProvider?.name,
    storage,
    registry,
    lifecycle,
    runtimeSecret,
    onCapacity: () => placement.request(),
    cluster: options.cluster ?? 'default',
    pricing,
    logError: (message, fields) => log.error(message, fields),
    corsOrigins: options.corsOrigins ?? '*',
    metrics,
    publicUrl: options.publicUrl?.replace(/\/+$/, ''),
    now: options.now ?? Date.now,
  });
  const host = options.host ?? '127.0.0.1';
  let server: ServerType;
  try {
    server = await new Promise<ServerType>((resolve, reject) => {
      const s = serve({ fetch: app.fetch, port: options.port ?? 8090, hostname: host }, () => resolve(s));
      s.once('error', reject);
    });
  } catch (error) {
    await storage.close();
    throw error;
  }
  outlastClientIdleTimeouts(server as Server);
  // Requests being answered, so close() can let them finish and then drop the connections left:
  // idle keep-alive ones last 65 s (keep-alive.ts), and server.close() alone can wait for them.
  let answering = 0;
  let answered: (() => void) | undefined;
  (server as Server).on('request', (_request, response) => {
    answering++;
    response.once('close', () => {
      answering--;
      if (answering === 0) answered?.();
    });
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  lifecycle.runtimes.publicUrl = options.publicUrl ?? url;
  log.info('coordinator listening', { url, database: storage.engine });
  /**
   * Ends the sessions of runtimes that stopped heartbeating and those at their maximum duration,
   * places waiting sessions on free slots, charges running sessions, and ends those whose
   * account ran dry. On a timer (`meterFlushMs`); tests call it directly.
   */
  const housekeeping = async (): Promise<void> => {
    const done = metrics.housekeepingDuration.startTimer();
    metrics.sessionsReaped.inc((await registry.reapStale()).length);
    await lifecycle.ended(await sessions.endExpired());
    await lifecycle.releaseLeftovers();
    await lifecycle.placeWaiting();
    const { ticks, mustEnd } = await meter.flush();
    metrics.meterTicks.inc(ticks);
    for (const { sessionId, stop } of mustEnd) await lifecycle.end(sessionId, METER_STOP_REASONS[stop]);
    // Purchases the provider never answered (a timeout, a replica that died after its claim).
    await purchases.resume();
    // Dashboard sign-ins past their expiry (checked on every use anyway; this only tidies).
    await dashboardSessions.purge();
    done();
  };
  let flushing: Promise<unknown> | undefined;
  const flushMs = options.meterFlushMs ?? 5000;
  // One replica at a time does the fleet-wide work: every replica tries for the lease each half
  // interval, the holder works once per interval, and a dead holder's lease lapses after 1.5
  // intervals — so the work moves within 2 (coordinator/housekeeping/housekeeper-lease.ts).
  const lease = new HousekeeperLease(
    storage.db,
    `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`,
    Math.max(1, Math.round(1.5 * flushMs)),
    options.now ?? Date.now,
  );
  let lastPassAt = Number.NEGATIVE_INFINITY;
  const tick = async (): Promise<void> => {
    const holder = await lease.acquire();
    metrics.housekeeper.set(holder ? 1 : 0);
    // Ticks come every half interval (for a quick takeover); the pass itself once per interval.
    if (!holder || performance.now() - lastPassAt < flushMs * 0.9) return;
    lastPassAt = performance.now();
    await housekeeping();
  };
  const timer =
    flushMs > 0
      ? setInterval(() => {
          flushing ??= tick()
            .catch((error: unknown) => log.error('housekeeping failed', { error }))
            .finally(() => (flushing = undefined));
        }, flushMs / 2)
      : undefined;
  timer?.unref();
  return {
    url,
    storage,
    accounts,
    apiKeys,
    catalog,
    keyring,
    tokens,
    sessions,
    ledger,
    meter,
    purchases,
    registry,
    dashboardSessions,
    housekeeping,
    async close() {
      clearInterval(timer);
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      // New connections are refused from here; requests in flight finish; then every connection
      // still open (idle keep-alive, or opened and never used) is closed rather than waited out.
      if (answering > 0) await new Promise<void>((resolve) => (answered = resolve));
      (server as Server).closeAllConnections();
      await closed;
      await flushing;
      await Promise.all(inFlight);
      // Payments started here finish (or time out) before the database goes.
      await purchases.settled();
      await registry.flushHeartbeats();
      // Handed over now rather than when it lapses.
      if (timer) await lease.release().catch((error: unknown) => log.warn('releasing the housekeeping lease failed', { error }));
      await storage.close();
    },
  };
}
