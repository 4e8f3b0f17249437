/**
 * The coordinator's commands:
 *
 *   arclight coordinator [--port 8090] [--host 127.0.0.1] [--database <file|postgres://…>]
 *   arclight admin <verb> [args] [--database <file|postgres://…>]
 *
 * Admin verbs act on the database directly (run them where the database is reachable, like a
 * migration); each prints one JSON object on stdout so scripts can read it. The database is
 * `--database`, else `DATABASE_URL`, else `data/coordinator.db`.
 *
 * Longer than ~400 lines: one small parser per admin verb, each a screen; they share the
 * database option and the JSON output.
 */

import { parseArgs } from 'node:util';
import { AccountStore, DEFAULT_SIGNUP_CREDITS, type AccountQuotas } from './accounts/account-store.ts';
import { CreditLedger } from './billing/credit-ledger.ts';
import { DEFAULT_PRICING } from './pricing/pricing.ts';
import { DEFAULT_USAGE_WINDOW_MS, usageReport } from './billing/usage-report.ts';
import { ApiKeyStore, parseApiKeyName } from './accounts/api-keys.ts';
import { coordinatorWorkerIndex, reportListening, startCoordinatorWorkers } from './cluster.ts';
import { startCoordinator } from './coordinator.ts';
import { ModelCatalog } from './models/model-catalog.ts';
import { isPostgresUrl, openStorage } from './storage/database.ts';
import { readSigningKeySecretFile, signingKeyCipherFor, type SigningKeySecret } from './tokens/signing-key-secret.ts';
import { SigningKeyring } from './tokens/signing-keyring.ts';
import { writeStandardStream } from '../server-kit/log.ts';
import { TestPaymentProvider, type PaymentProvider } from './billing/payment-provider.ts';
import { DashboardSessionStore } from './dashboard/dashboard-sessions.ts';

export const COORDINATOR_USAGE = `Usage:
  arclight coordinator [--port 8090] [--host 127.0.0.1] [--database <file|postgres://…>]
                       [--reconnect-window 30] [--meter-flush-ms 5000] [--heartbeat-ms 5000] [--workers 1]
                       [--public-url https://api.example.com] [--signup-credits 100000]
                       [--signing-key-secret-file <path>] [--signing-key-refresh-ms 5000]
                       [--payment-provider none|test]
      --public-url        the URL clients reach this service at (behind a load balancer): presigned
                          upload and clip URLs point there; default its own listening URL
      --reconnect-window  seconds a session outlives its last client (GPU held, still billed), 1–3600
      --meter-flush-ms    how often running sessions are charged and housekeeping runs
      --heartbeat-ms      how often runtimes heartbeat; one silent for three intervals is gone and
                          its sessions end, billed to its last heartbeat (at the next housekeeping)
      --workers           processes sharing the port (one per core); all decide in the database
      --signup-credits    promotional credits each new account receives (expire after 90 days);
                          0 = none; default $ARCLIGHT_SIGNUP_CREDITS, else 100000 (10 US dollars)
      --signing-key-secret-file
                          a file holding the secret that encrypts the private signing keys at rest;
                          default $ARCLIGHT_SIGNING_KEY_SECRET, else the file
                          $ARCLIGHT_SIGNING_KEY_SECRET_FILE names. Required on PostgreSQL; on
                          SQLite, none keeps the keys unencrypted (with a warning)
      --signing-key-refresh-ms
                          how often each replica reads the signing keys again: a rotation or a
                          retirement is in force on every replica within this long (at least 100)
      --payment-provider  where purchases and automatic top-ups are paid: none (the default:
                          they answer 501) or test, which confirms every payment at once without
                          money (tests, local development; never in production) and declines
                          402-dollar ones; its webhooks are signed with
                          $ARCLIGHT_PAYMENT_WEBHOOK_SECRET. Default $ARCLIGHT_PAYMENT_PROVIDER
  arclight admin <verb> [arguments] [--database <file|postgres://…>] [--signing-key-secret-file <path>]

Admin verbs (each prints one JSON object):
  create-account <name> [quotas] [--signup-credits n]
                                    grants the signup credits as the coordinator does (default
                                    $ARCLIGHT_SIGNUP_CREDITS, else 100000; 0 = none)
  set-quotas <account-id> [quotas]
      quotas: --concurrent-sessions n  --sessions-per-minute n  --max-session-duration s
              --monthly-credit-cap credits (billing cap per calendar month, UTC; 0 = none)
  create-key <account-id> [--name <label>]
                                    a new rk_ API key (shown once); accounts also manage their
                                    keys themselves (GET/POST /platform/keys, docs/coordinator.md)
  rotate-key <key-id>               a new key for the same account and name; the old one stops working,
                                    tokens it minted keep working until they expire
  revoke-key <key-id>               the key and every token it minted stop working, on every replica;
                                    even the account's last active key (the platform API refuses that)
  list-keys <account-id>
  add-model <slug> --rate <credits-per-second> [--private]
  grant-model <account-id> <slug>   lets the account use a private model
  list-sessions <account-id> [--open]
  rotate-signing-key                a new key signs tokens (every replica within
                                    --signing-key-refresh-ms); the old ones keep verifying
  retire-signing-key <kid>          the key stops verifying: tokens it signed are refused (rotate
                                    first: the current signing key cannot be retired)
  list-signing-keys                 the keys that verify, newest first, and which one signs
  grant-credits <account-id> <credits>   promotional credits (expire after 90 days)
  buy-credits <account-id> <dollars>     a purchase paid outside the coordinator, 1–1,000 whole dollars
                                         (credits expire after 365 days), recorded as a confirmed
                                         purchase of kind "operator" (GET /platform/purchases)
  dashboard-link <account-id> [--base-url https://api.example.com]
                                         a single-use link signing the account in to its dashboard,
                                         valid 15 minutes; base URL default $ARCLIGHT_PUBLIC_URL,
                                         else http://127.0.0.1:8090
  balance <account-id>                   unspent credits, per grant, in spending order
  usage <account-id> [--since <date|ms>] sessions with seconds and credits charged (default: 30 days),
                                         totals, and this month's spend against the billing cap

The database is --database, else $DATABASE_URL, else data/coordinator.db. The signing-key verbs
need the signing-key secret as the coordinator does (on PostgreSQL, or once the keys are encrypted).`;

class UsageError extends Error {}

function count(value: string | undefined, what: string): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d{1,9}$/.test(value) || Number(value) < 1) throw new UsageError(`${what} must be a positive integer`);
  return Number(value);
}

/**
 * The signup grant: `--signup-credits`, else `$ARCLIGHT_SIGNUP_CREDITS`, else the default. The
 * variable is read here rather than by the container's entrypoint so that the server and the
 * admin verbs (`create-account`) of one deployment grant the same.
 */
function signupCredits(flag: string | undefined): number {
  const fromEnv = process.env['ARCLIGHT_SIGNUP_CREDITS'];
  const [value, what] =
    flag !== undefined
      ? [flag, '--signup-credits']
      : fromEnv !== undefined && fromEnv !== ''
        ? [fromEnv, 'ARCLIGHT_SIGNUP_CREDITS']
        : [undefined, ''];
  if (value === undefined) return DEFAULT_SIGNUP_CREDITS;
  const ceiling = DEFAULT_PRICING.maxAccountCredits;
  if (!/^\d{1,15}$/.test(value)) throw new UsageError(`${what} must be a whole number of credits (0 = no signup credits); got "${value}"`);
  if (Number(value) > ceiling) throw new UsageError(`${what} must be at most the balance ceiling, ${ceiling} credits; got ${value}`);
  return Number(value);
}

/** `--payment-provider`, else `$ARCLIGHT_PAYMENT_PROVIDER`: none (undefined) or the test provider. */
function paymentProvider(flag: string | undefined): PaymentProvider | undefined {
  const fromEnv = process.env['ARCLIGHT_PAYMENT_PROVIDER'];
  const [value, what] = flag !== undefined ? [flag, '--payment-provider'] : [fromEnv, 'ARCLIGHT_PAYMENT_PROVIDER'];
  if (value === undefined || value === '' || value === 'none') return undefined;
  if (value !== 'test')
    throw new UsageError(
      `${what} must be none or test (a real provider plugs in through startCoordinator's paymentProvider); got "${value}"`,
    );
  const secret = process.env['ARCLIGHT_PAYMENT_WEBHOOK_SECRET'];
  return new TestPaymentProvider(secret ? { webhookSecret: secret } : {});
}

function quotasFrom(values: Record<string, string | boolean | undefined>): Partial<AccountQuotas> {
  const quotas: { -readonly [K in keyof AccountQuotas]?: number } = {};
  const concurrent = count(values['concurrent-sessions'] as string | undefined, '--concurrent-sessions');
  const perMinute = count(values['sessions-per-minute'] as string | undefined, '--sessions-per-minute');
  const duration = count(values['max-session-duration'] as string | undefined, '--max-session-duration');
  const cap = values['monthly-credit-cap'] as string | undefined;
  if (cap !== undefined) {
    if (!/^\d{1,15}$/.test(cap)) throw new UsageError('--monthly-credit-cap must be a whole number of credits (0 = no cap)');
    quotas.monthlyCreditCap = Number(cap);
  }
  if (concurrent !== undefined) quotas.concurrentSessions = concurrent;
  if (perMinute !== undefined) quotas.sessionsPerMinute = perMinute;
  if (duration !== undefined) quotas.maxSessionDurationSeconds = duration;
  return quotas;
}

/** Runs `arclight coordinator …` or `arclight admin …`; resolves to the exit code. */
export async function main(argv: readonly string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      allowPositionals: true,
      options: {
        port: { type: 'string' },
        host: { type: 'string' },
        database: { type: 'string' },
        'concurrent-sessions': { type: 'string' },
        'sessions-per-minute': { type: 'string' },
        'max-session-duration': { type: 'string' },
        'monthly-credit-cap': { type: 'string' },
        since: { type: 'string' },
        'reconnect-window': { type: 'string' },
        'meter-flush-ms': { type: 'string' },
        'heartbeat-ms': { type: 'string' },
        'public-url': { type: 'string' },
        'signup-credits': { type: 'string' },
        'signing-key-secret-file': { type: 'string' },
        'signing-key-refresh-ms': { type: 'string' },
        'payment-provider': { type: 'string' },
        workers: { type: 'string' },
        rate: { type: 'string' },
        private: { type: 'boolean' },
        open: { type: 'boolean' },
        name: { type: 'string' },
        'base-url': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (error) {
    process.stderr.write(`arclight: ${(error as Error).message}\n\n${COORDINATOR_USAGE}\n`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(COORDINATOR_USAGE + '\n');
    return 0;
  }
  const database = values.database ?? process.env['DATABASE_URL'] ?? 'data/coordinator.db';
  const [command, verb, ...rest] = positionals;
  try {
    const secretFile = values['signing-key-secret-file'] as string | undefined;
    // Read here, so the secret itself never appears on a command line; undefined: the environment's.
    const signingKeySecret: SigningKeySecret | undefined =
      secretFile === undefined
        ? undefined
        : { value: readSigningKeySecretFile(secretFile), source: `--signing-key-secret-file (${secretFile})` };
    if (command === 'coordinator') {
      if (verb !== undefined) throw new UsageError(`unexpected argument "${verb}"`);
      const port =
        values.port === undefined ? 8090 : /^\d{1,5}$/.test(values.port) && Number(values.port) < 65536 ? Number(values.port) : NaN;
      if (Number.isNaN(port)) throw new UsageError('--port must be 0–65535');
      const reconnectWindow = count(values['reconnect-window'] as string | undefined, '--reconnect-window');
      if (reconnectWindow !== undefined && reconnectWindow > 3600) throw new UsageError('--reconnect-window must be 1–3600 seconds');
      const flushMs = count(values['meter-flush-ms'] as string | undefined, '--meter-flush-ms');
      const heartbeatMs = count(values['heartbeat-ms'] as string | undefined, '--heartbeat-ms');
      const publicUrl = values['public-url'] as string | undefined;
      // An origin only: runtimes sign presigned paths under it and drop a base URL with a path.
      if (publicUrl !== undefined && !/^https?:\/\/[^\s/?#]+\/?$/.test(publicUrl))
        throw new UsageError('--public-url must be an http(s) origin (no path), e.g. https://api.example.com');
      if (heartbeatMs !== undefined && heartbeatMs < 100) throw new UsageError('--heartbeat-ms must be at least 100');
      const workers = count(values['workers'] as string | undefined, '--workers') ?? 1;
      const keyRefreshMs = count(values['signing-key-refresh-ms'] as string | undefined, '--signing-key-refresh-ms');
      if (keyRefreshMs !== undefined && keyRefreshMs < 100) throw new UsageError('--signing-key-refresh-ms must be at least 100');
      const signup = signupCredits(values['signup-credits'] as string | undefined);
      const payments = paymentProvider(values['payment-provider'] as string | undefined);
      const workerIndex = coordinatorWorkerIndex();
      // Several workers: this is the primary, which forks them (each runs this command again).
      const coordinator =
        workers > 1 && workerIndex === undefined
          ? await startCoordinatorWorkers(database, workers, signingKeySecret)
          : await startCoordinator({
              database,
              port,
              ...(signingKeySecret === undefined ? {} : { signingKeySecret }),
              ...(keyRefreshMs === undefined ? {} : { signingKeyRefreshMs: keyRefreshMs }),
              host: values.host ?? '127.0.0.1',
              signupCredits: signup,
              ...(payments === undefined ? {} : { paymentProvider: payments }),
              ...(reconnectWindow === undefined ? {} : { reconnectWindowSeconds: reconnectWindow }),
              ...(heartbeatMs === undefined ? {} : { heartbeatIntervalMs: heartbeatMs }),
              ...(publicUrl === undefined ? {} : { publicUrl: publicUrl.replace(/\/+$/, '') }),
              // Housekeeping runs in one worker: the others would find nothing left to do.
              ...(workerIndex !== undefined && workerIndex > 0
                ? { meterFlushMs: 0 }
                : flushMs === undefined
                  ? {}
                  : { meterFlushMs: flushMs }),
            });
      if (workerIndex !== undefined) reportListening(coordinator.url);
      else
        writeStandardStream(process.stdout, `coordinator listening on ${coordinator.url}${workers > 1 ? ` (${workers} workers)` : ''}\n`);
      await new Promise<void>((resolve) => {
        process.once('SIGINT', resolve);
        process.once('SIGTERM', resolve);
        // A worker whose primary died (even SIGKILLed) loses its IPC channel: it stops too.
        if (workerIndex !== undefined) process.once('disconnect', resolve);
      });
      await coordinator.close();
      return 0;
    }
    if (command !== 'admin' || verb === undefined)
      throw new UsageError(command === 'admin' ? 'missing admin verb' : `unknown command "${command}"`);
    const result = await runAdmin(database, verb, rest, values, signingKeySecret);
    process.stdout.write(JSON.stringify(result) + '\n');
    return 0;
  } catch (error) {
    if (error instanceof UsageError) {
      process.stderr.write(`arclight: ${error.message}\n\n${COORDINATOR_USAGE}\n`);
      return 2;
    }
    process.stderr.write(`arclight: ${(error as Error).message}\n`);
    return 1;
  }
}

async function runAdmin(
  database: string,
  verb: string,
  args: readonly string[],
  values: Record<string, string | boolean | undefined>,
  signingKeySecret: SigningKeySecret | undefined,
): Promise<unknown> {
  const need = (n: number, names: string): void => {
    if (args.length !== n) throw new UsageError(`${verb} takes ${names}`);
  };
  // Read (and refused) before the database opens; only create-account uses it, so a bad
  // $ARCLIGHT_SIGNUP_CREDITS does not break the other verbs.
  const signup = verb === 'create-account' ? signupCredits(values['signup-credits'] as string | undefined) : 0;
  const storage = await openStorage(database, {
    onConnectionError: (error) => writeStandardStream(process.stderr, `arclight: database connection failed: ${error.message}\n`),
  });
  // Every branch awaits its result before `finally` closes the database.
  try {
    const keys = new ApiKeyStore(storage.db, storage.engine);
    /**
     * For the signing-key verbs: the keyring with the secret the coordinator would have (required
     * on PostgreSQL), its stored keys checked against it (and encrypted, if plain) as at a start.
     */
    const keyring = async (): Promise<SigningKeyring> => {
      const cipher = await signingKeyCipherFor(isPostgresUrl(database), signingKeySecret);
      const ring = new SigningKeyring(storage.db, { cipher });
      await ring.prepare((message) => writeStandardStream(process.stderr, `arclight: ${message}\n`));
      return ring;
    };
    const catalog = new ModelCatalog(storage.db);
    const ledger = new CreditLedger(storage.db, storage.engine, DEFAULT_PRICING);
    const accounts = new AccountStore(storage.db, { ledger, credits: signup });
    const account = async (id: string) => {
      const found = await accounts.get(id);
      if (!found) throw new Error(`no account ${id}`);
      return found;
    };
    switch (verb) {
      case 'create-account':
        need(1, '<name>');
        return await accounts.create(args[0]!, quotasFrom(values));
      case 'set-quotas': {
        need(1, '<account-id>');
        await account(args[0]!);
        await accounts.setQuotas(args[0]!, quotasFrom(values));
        return await account(args[0]!);
      }
      case 'create-key': {
        need(1, '<account-id>');
        await account(args[0]!);
        let name: string | null;
        try {
          name = parseApiKeyName(values['name'], '--name');
        } catch (error) {
          throw new UsageError((error as Error).message.replace(/^name /, '--name '));
        }
        const issued = await keys.create(args[0]!, { name });
        return { key: issued.key, ...issued.record };
      }
      case 'rotate-key': {
        need(1, '<key-id>');
        const issued = await keys.rotate(args[0]!);
        return { key: issued.key, ...issued.record, replaces: args[0] };
      }
      case 'revoke-key':
        need(1, '<key-id>');
        await keys.revoke(args[0]!);
        return { id: args[0], revoked: true, tokens_revoked: true };
      case 'rotate-signing-key': {
        need(0, 'no arguments');
        const ring = await keyring();
        const kid = await ring.rotate();
        return { kid, signing: true, verifying: (await ring.list()).map((k) => k.kid) };
      }
      case 'retire-signing-key': {
        need(1, '<kid>');
        const retired = await (await keyring()).retire(args[0]!);
        return { kid: retired.kid, created_at: retired.createdAt, superseded_at: retired.supersededAt, retired: true };
      }
      case 'list-signing-keys': {
        need(0, 'no arguments');
        const ring = await keyring();
        return {
          keys: (await ring.list()).map((k) => ({
            kid: k.kid,
            created_at: k.createdAt,
            superseded_at: k.supersededAt,
            current: k.current,
          })),
          encrypted: ring.encrypted,
        };
      }
      case 'list-keys':
        need(1, '<account-id>');
        return { keys: await keys.list(args[0]!) };
      case 'add-model': {
        need(1, '<slug>');
        const rate = count(values['rate'] as string | undefined, '--rate');
        if (rate === undefined) throw new UsageError('add-model needs --rate <credits-per-second>');
        return await catalog.add(args[0]!, rate, { public: values['private'] !== true });
      }
      case 'grant-model': {
        need(2, '<account-id> <slug>');
        await account(args[0]!);
        const model = (await catalog.visibleTo(args[0]!, [args[1]!])).get(args[1]!) ?? (await catalog.byName(args[1]!));
        if (!model) throw new Error(`no model ${args[1]}`);
        await catalog.grant(args[0]!, model.id);
        return { account_id: args[0], model: model.name, granted: true };
      }
      case 'list-sessions': {
        need(1, '<account-id>');
        let query = storage.db.selectFrom('sessions').selectAll().where('account_id', '=', args[0]!).orderBy('created_at', 'desc');
        if (values['open']) query = query.where('status', '!=', 'ended');
        return { sessions: await query.execute() };
      }
      case 'grant-credits': {
        need(2, '<account-id> <credits>');
        await account(args[0]!);
        return await ledger.grantPromotional(args[0]!, count(args[1], 'credits')!);
      }
      case 'buy-credits': {
        need(2, '<account-id> <dollars>');
        await account(args[0]!);
        const { purchaseId, ...grant } = await ledger.purchase(args[0]!, count(args[1], 'dollars')!);
        return { ...grant, purchase_id: purchaseId };
      }
      case 'dashboard-link': {
        need(1, '<account-id>');
        const base = ((values['base-url'] as string | undefined) ?? process.env['ARCLIGHT_PUBLIC_URL'] ?? 'http://127.0.0.1:8090').replace(
          /\/+$/,
          '',
        );
        if (!/^https?:\/\/[^\s/?#]+$/.test(base))
          throw new UsageError("--base-url must be the coordinator's http(s) origin (no path), e.g. https://api.example.com");
        const found = await account(args[0]!);
        const { token, expiresAt } = await new DashboardSessionStore(storage.db).issueLink(found.id);
        // The token rides in the fragment: browsers never send it to a server, nor in a Referer.
        return { account_id: found.id, url: `${base}/dashboard/#link=${token}`, expires_at: expiresAt, single_use: true };
      }
      case 'usage': {
        need(1, '<account-id>');
        await account(args[0]!);
        const sinceText = values['since'] as string | undefined;
        const since =
          sinceText === undefined
            ? Date.now() - DEFAULT_USAGE_WINDOW_MS
            : /^\d+$/.test(sinceText)
              ? Number(sinceText)
              : Date.parse(sinceText);
        if (!Number.isSafeInteger(since)) throw new UsageError('--since must be a date (2026-11-01) or ms since the epoch');
        const { monthlyCreditCap } = (await account(args[0]!)).quotas;
        return {
          ...(await usageReport(storage.db, args[0]!, since)),
          month: { spent_credits: await ledger.spentThisMonth(args[0]!), cap_credits: monthlyCreditCap },
        };
      }
      case 'balance':
        need(1, '<account-id>');
        await account(args[0]!);
        return await ledger.balance(args[0]!);
      default:
        throw new UsageError(`unknown admin verb "${verb}"`);
    }
  } finally {
    await storage.close();
  }
}
